"""Only the checkpoint's own text decides a verdict (issue 36, item 2): a stand-in's synthesized fields (the
quantization written from a checkpoint's name or the launch's --quantization, a renamed release's context, a
SpecForge template's shapes in a published drafter's place) feed the numbers, but a start check that reads one of
them gives a warning naming the assumption, never the verdict.

The flip test plans every command of the command corpora that needs a stand-in (offline), then plans it again with
each synthesized field flipped to another value a real checkpoint of that kind could carry. A flip may move the
memory numbers (the plan then still names its stand-in); it must never create a start-check failure."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from paths import ROOT
from specbench.contracts_inputs import PlanOptions
from specbench.errors import UserError
from specbench.plan.api import plan_command
from specbench.specs import resolve

GPUS = {"A100": "A100 80GB", "H100": "H100 80GB", "H100 80GB HBM3": "H100 80GB", "H20": "H20", "8x H20": "H20"}
START_KINDS = ("start_check", "derived_max_len")

# quantization blocks a checkpoint of the stand-in's kind could carry instead of the synthesized one
_QUANT_FLIPS: tuple[tuple[str, dict[str, Any] | None], ...] = (
    ("fp8 per-tensor", {"quant_method": "fp8", "activation_scheme": "static"}),
    ("awq 3-bit", {"quant_method": "awq", "bits": 3, "group_size": 128, "zero_point": True}),
    ("gptq 8-bit", {"quant_method": "gptq", "bits": 8, "group_size": 128, "sym": True, "desc_act": False}),
    ("mxfp4", {"quant_method": "mxfp4", "modules_to_not_convert": ["lm_head"]}),
    ("quark", {"quant_method": "quark"}),
    ("none", None),
)


def _flips(assumed: frozenset[str], data: dict[str, Any]) -> Iterator[tuple[str, Callable[[dict], dict]]]:
    if "quantization" in assumed:
        for name, qc in _QUANT_FLIPS:
            yield (f"quantization_config = {name}",
                   lambda d, qc=qc: ({**d, "quantization_config": qc} if qc else
                                     {k: v for k, v in d.items() if k != "quantization_config"}))
    if "context" in assumed and isinstance(data.get("max_position_embeddings"), int):
        for f in (0.25, 4):
            yield (f"max_position_embeddings x {f}",
                   lambda d, f=f: {**d, "max_position_embeddings": int(d["max_position_embeddings"] * f)})


def _standin_commands() -> list[dict]:
    out = []
    for f in sorted((ROOT / "tests/data/command_corpus").glob("commands*.json")):
        out.extend(json.loads(f.read_text(encoding="utf-8")))
    return out


def _plan(e: dict) -> dict | None:
    try:
        r = plan_command(e["command"], PlanOptions(gpu=GPUS.get(e.get("gpu") or "", "H200")))
    except (UserError, ValueError):
        return None
    return r if isinstance(r, dict) else r.to_dict()


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # no cached config may stand in for the checkpoint


def test_no_start_verdict_in_the_corpora_rests_on_a_synthesized_field(monkeypatch: pytest.MonkeyPatch) -> None:
    original = resolve._with_overlay
    seen: list[frozenset[str]] = []
    checked = 0
    flipped_plans = 0
    for e in _standin_commands():
        seen.clear()

        def spy(data: dict, hq: dict | None, si: Any) -> tuple[dict, dict | None]:
            seen.append(si.assumed)
            return original(data, hq, si)

        monkeypatch.setattr(resolve, "_with_overlay", spy)
        base = _plan(e)
        if base is None or not base.get("model_stand_in") or not seen or not seen[0]:
            continue
        checked += 1
        assumed = seen[0]
        for what, flip in _flips(assumed, {"max_position_embeddings": 1}):

            def flipped(data: dict, hq: dict | None, si: Any, flip: Callable[[dict], dict] = flip,
                        what: str = what) -> tuple[dict, dict | None]:
                d, h = original(data, hq, si)
                if "max_position_embeddings" in what and "max_position_embeddings" not in d:
                    return d, h
                return flip(d), (None if "quantization_config" in what else h)

            monkeypatch.setattr(resolve, "_with_overlay", flipped)
            got = _plan(e)
            if got is None:
                continue
            flipped_plans += 1
            new_start_failure = got.get("error_kind") in START_KINDS and base.get("error_kind") not in START_KINDS
            assert not new_start_failure, f"{e['id']}: {what} -> {got.get('error')}"
            if got.get("status") != base.get("status"):
                assert got.get("model_stand_in"), f"{e['id']}: {what} changed the verdict without the stand-in named"
    assert checked >= 15, checked  # the corpora hold 25 stand-in plans (2026-12-06)
    assert flipped_plans >= 60, flipped_plans
    print(f"stand-in plans {checked}, flipped plans {flipped_plans}")


def test_a_name_said_quantization_does_not_overrule_the_users_flag() -> None:
    # sglang#23146: an MXFP4 checkpoint launched with --quantization quark started; the stand-in's synthesized
    # `mxfp4` must not produce SGLang's mismatch failure, only a warning that names the assumption
    r = plan_command("python -m sglang.launch_server --model-path amd/Qwen3-8B-MXFP4 --quantization quark",
                     PlanOptions(gpu="H200"))
    d = r if isinstance(r, dict) else r.to_dict()
    assert d["status"] == "ok", d.get("error")
    said = [w for w in d["warnings"] if "assumed by the stand-in" in w]
    assert said and "(mxfp4) does not match" in said[0] and "(quark)" in said[0]


def test_the_checkpoints_own_config_still_fails_the_same_mismatch(tmp_path: Path) -> None:
    # the same mismatch read from a real config.json (no stand-in) stays SGLang's failure
    src = json.loads((resolve.bundled_dir() / "Qwen__Qwen3-8B.json").read_text(encoding="utf-8"))
    src["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": ["lm_head"]}
    folder = tmp_path / "Qwen3-8B-MXFP4"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(src), encoding="utf-8")
    r = plan_command(f"python -m sglang.launch_server --model-path {folder} --quantization quark",
                     PlanOptions(gpu="H200"))
    d = r if isinstance(r, dict) else r.to_dict()
    assert d["status"] != "ok" and "does not match" in (d.get("error") or "")
