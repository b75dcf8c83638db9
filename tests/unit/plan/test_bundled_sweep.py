"""Every bundled config plans: each bundled model (and each bundled drafter, with its target) on both engines, at TP1
and at its natural TP, on an H200, a B200 and an RTX 5090, ends in a verdict (`ok` / `fails`) and never a
traceback; a one-line refusal is allowed only where the engine itself refuses, in its words (an architecture the
release has no class for, a TP the heads do not divide).

The natural TP is the smallest of 1, 2, 4, 8 whose H200s hold the config-estimated weights with a quarter to spare.
"""

from __future__ import annotations

import json

import pytest

from specbench.contracts_inputs import PlanOptions
from specbench.errors import UserError
from specbench.plan.api import plan_command
from specbench.specs.resolve import bundled_dir, bundled_names, load_model_spec
from specbench.specs.weights import weight_bytes

H200_GIB = 140.4
GPUS = ("H200", "B200", "RTX 5090")
DRAFTERS = {n for n in bundled_names()
            if json.loads((bundled_dir() / f"{n}.json").read_text()).get("architectures", [""])[0]
            in ("DFlashDraftModel", "DFlash2DraftModel", "LlamaForCausalLMEagle3", "Qwen3_5MTPDraftModel",
                "Qwen3MoeForCausalLMMTP")}
TARGETS = [n for n in bundled_names() if n not in DRAFTERS]
# each bundled drafter with the bundled target it was made for
DRAFT_TARGET = {
    "specforge__gpt-oss-20B-eagle3": ("openai__gpt-oss-20b", "EAGLE3"),
    "specforge__llama3-70B-eagle3": ("meta-llama__Llama-3.1-70B-Instruct", "EAGLE3"),
    "specforge__llama3-8B-eagle3": ("meta-llama__Llama-3.1-8B-Instruct", "EAGLE3"),
    "specforge__qwen3-30B-A3B-eagle3": ("Qwen__Qwen3-30B-A3B", "EAGLE3"),
    "specforge__qwen3-32b-eagle3": ("Qwen__Qwen3-32B", "EAGLE3"),
    "specforge__qwen3-4b-dflash": ("Qwen__Qwen3-8B", "DFLASH"),
    "specforge__qwen3-8b-dflash": ("Qwen__Qwen3-8B", "DFLASH"),
    "specforge__qwen3-8b-eagle3": ("Qwen__Qwen3-8B", "EAGLE3"),
    "specforge__qwen3-next-80b-a3b-eagle3": ("Qwen__Qwen3-Next-80B-A3B-Instruct", "EAGLE3"),
    "specforge__qwen3.5-122b-a10b-mtp": ("Qwen__Qwen3.5-122B-A10B", "EAGLE"),
    "specforge__qwen3.5-27b-dflash": ("Qwen__Qwen3.5-27B", "DFLASH"),
    "specforge__qwen3.5-35b-a3b-dflash": ("Qwen__Qwen3.5-35B-A3B", "DFLASH"),
    "specforge__qwen3.5-35b-a3b-eagle3": ("Qwen__Qwen3.5-35B-A3B", "EAGLE3"),
    "specforge__qwen3.5-4b-mtp": ("Qwen__Qwen3.5-27B", "EAGLE"),
    "specforge__qwen3.6-27b-dflash": ("Qwen__Qwen3.6-27B-bf16-derived", "DFLASH"),
    "XiaomiMiMo__MiMo-V2.5-Pro-FP4-DFlash": ("Qwen__Qwen3.5-27B", "DFLASH"),
    "z-lab__Qwen3.8-27B-DFlash2": ("Qwen__Qwen3.6-27B-bf16-derived", "DFLASH"),
}
# what the engines themselves refuse, in their words (a plan error with it, or a one-line UserError)
# specbench's own gaps, said in one line and listed here so a fix shows up (none left: SGLang 0.5.18+'s pure-Mamba
# pools are planned, engines/sglang/pools.py::_kv_tokens)
KNOWN_GAPS: dict[str, str] = {}
ENGINE_WORDS = ("has no SGlang implementation", "not divisible", "must be divisible", "is not supported",
                "does not support", "not supported by vLLM", "Unknown speculative algorithm", "cannot be used")


def _natural_tp(name: str) -> int:
    gib = weight_bytes(load_model_spec(name), 1) / 2**30
    return next((tp for tp in (1, 2, 4, 8) if gib / tp < 0.75 * H200_GIB), 8)


def _command(engine: str, target: str, tp: int, draft: tuple[str, str] | None) -> str:
    if engine == "sglang":
        cmd = f"python -m sglang.launch_server --model-path {target} --tp {tp}"
        if draft:
            cmd += f" --speculative-algorithm {draft[1]}"
            if draft[1] != "EAGLE":
                cmd += f" --speculative-draft-model-path {draft[0]}"
        return cmd
    cmd = f"vllm serve {target} --tensor-parallel-size {tp}"
    if draft:
        method = {"EAGLE3": "eagle3", "DFLASH": "dflash", "EAGLE": "mtp"}[draft[1]]
        spec = {"method": method, "num_speculative_tokens": 3}
        if method != "mtp":
            spec["model"] = draft[0]
        cmd += " --speculative-config '" + json.dumps(spec) + "'"
    return cmd


def _check(cmd: str, gpu: str, name: str = "") -> None:
    try:
        p = plan_command(cmd, PlanOptions(gpu=gpu, fixes=False))
    except UserError as exc:  # a one-line refusal, only in the engine's own words (or a listed gap)
        msg = str(exc)
        words = (*ENGINE_WORDS, KNOWN_GAPS[name]) if name in KNOWN_GAPS and "sglang" in cmd else ENGINE_WORDS
        assert "\n" not in msg and any(w in msg for w in words), f"{cmd} on {gpu}: {msg}"
        return
    assert p["status"] in ("ok", "fails"), cmd
    if p["status"] == "fails":
        assert p["error"], f"{cmd} on {gpu}: fails without the engine's error"
    assert p["reason"], cmd
    if p["engine"] == "sglang":  # the engine's error is said once (the reason says why no pool was planned)
        assert p["error"] != p["reason"], cmd


CASES = [(engine, n, tp) for n in TARGETS for engine in ("sglang", "vllm") for tp in sorted({1, _natural_tp(n)})]


@pytest.mark.parametrize("engine,name,tp", CASES, ids=[f"{e}-{n}-tp{t}" for e, n, t in CASES])
def test_every_bundled_model_plans_on_both_engines(engine, name, tp):
    for gpu in GPUS:
        _check(_command(engine, name.replace("__", "/", 1), tp, None), gpu, name)


@pytest.mark.parametrize("drafter", sorted(DRAFTERS))
@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_every_bundled_drafter_plans_with_its_target(engine, drafter):
    assert drafter in DRAFT_TARGET, f"{drafter}: name the target it drafts for"
    target, algo = DRAFT_TARGET[drafter]
    for tp in sorted({1, _natural_tp(target)}):
        for gpu in GPUS:
            _check(_command(engine, target.replace("__", "/", 1), tp, (drafter.replace("__", "/", 1), algo)), gpu)


def test_the_sweep_covers_every_bundled_config():
    assert set(TARGETS) | DRAFTERS == set(bundled_names()) and len(TARGETS) >= 40
