"""vLLM's own refusals of `--quantization` and `--speculative-config` before any weight loads (issue 37, items 7
and 8; read in vLLM 0.32.0: config/model.py::_verify_quantization, model_loader/weight_utils.py::get_quant_config,
config/speculative.py::SpeculativeConfig). The planner says them in vLLM's words instead of planning a start."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specbench.contracts_inputs import PlanOptions
from specbench.engines.vllm.quant_checks import QUANTIZATION_METHODS, quantization_failure
from specbench.errors import UserError
from specbench.plan.api import plan_command
from specbench.specs.resolve import bundled_dir


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))


def _plan(cmd: str) -> dict:
    r = plan_command(cmd, PlanOptions(gpu="H100 80GB", fixes=False))
    return r if isinstance(r, dict) else r.to_dict()


def _awq_folder(tmp_path: Path) -> Path:
    cfg = json.loads((bundled_dir() / "Qwen__Qwen3-8B.json").read_text(encoding="utf-8"))
    cfg["quantization_config"] = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True,
                                  "version": "gemm"}
    folder = tmp_path / "Qwen3-8B-AWQ"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    return folder


@pytest.mark.parametrize("q, said", [
    ("magic", "Unknown quantization method: magic"),
    ("awq", "Cannot find the config file for awq"),
    ("gptq_marlin", "Cannot find the config file for gptq_marlin"),
    ("modelopt", "Cannot find the config file for modelopt"),
    ("compressed-tensors", "CompressedTensorsConfig.__init__() missing"),
    ("fbgemm_fp8", "deprecated"),
])
def test_a_quantization_a_bf16_checkpoint_cannot_take_is_vllms_failure(q: str, said: str) -> None:
    d = _plan(f"vllm serve Qwen/Qwen3-8B --quantization {q}")
    assert d["status"] == "fails" and d["error_kind"] == "start_check" and said in d["error"], d.get("error")


def test_online_fp8_on_a_bf16_checkpoint_still_starts() -> None:
    assert _plan("vllm serve Qwen/Qwen3-8B --quantization fp8")["status"] == "ok"


def test_an_awq_checkpoint_takes_its_overrides_and_refuses_fp8(tmp_path: Path) -> None:
    folder = _awq_folder(tmp_path)  # the checkpoint's own config.json: no stand-in, its text decides
    for ok in ("awq", "awq_marlin", "marlin", "moe_wna16"):
        assert _plan(f"vllm serve {folder} --quantization {ok}")["status"] == "ok", ok
    d = _plan(f"vllm serve {folder} --quantization fp8")
    assert d["status"] == "fails" and "model config (awq) does not match" in d["error"] and "(fp8)" in d["error"]


def test_every_method_of_the_release_is_known_and_none_invented() -> None:
    assert len(QUANTIZATION_METHODS) == len(set(QUANTIZATION_METHODS)) == 30
    assert quantization_failure("fp8", None) is None and quantization_failure(None, "awq") is None
    assert quantization_failure("fbgemm_fp8", None, allow_deprecated=True) is None


@pytest.mark.parametrize("spec", [
    {"method": "eagle3", "num_speculative_tokens": 3},
    {"method": "draft_model", "num_speculative_tokens": 2},
])
def test_a_method_that_needs_a_draft_model_without_one_is_vllms_failure(spec: dict) -> None:
    d = _plan(f"vllm serve Qwen/Qwen3-8B --speculative-config '{json.dumps(spec)}'")
    assert d["status"] == "fails" and "without speculative model" in d["error"]


def test_model_free_proposers_start_without_a_draft_model() -> None:
    for spec in ({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4},
                 {"method": "suffix", "num_speculative_tokens": 3}):
        assert _plan(f"vllm serve Qwen/Qwen3-8B --speculative-config '{json.dumps(spec)}'")["status"] == "ok"


@pytest.mark.parametrize("k", [2.5, "3.5", True])
def test_a_fractional_token_count_is_refused_not_rounded(k: object) -> None:
    spec = json.dumps({"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_max": 4})
    with pytest.raises(UserError, match="num_speculative_tokens must be an integer") as exc:
        _plan(f"vllm serve Qwen/Qwen3-8B --speculative-config '{spec}'")
    assert "--speculative-config: --speculative-config" not in str(exc.value)
