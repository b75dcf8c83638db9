"""FP8 weights on SM 8.x (issue 36, item 6): vLLM runs them weight-only through Marlin. The public case
(vllm-project/vllm#22177): Qwen3-Coder-30B-A3B-Instruct-FP8 on 8 x 24 GB Ampere, TP 8 + EP, ran out of CUDA memory at
--gpu-memory-utilization 0.85 and started at 0.7 (24,003 of 24,564 MiB held, KV 12.11 GiB); the BF16 checkpoint
started at 0.85 (KV 12.22 GiB)."""

from __future__ import annotations

import pytest

from specbench.contracts_inputs import PlanOptions
from specbench.plan.api import plan_command

FP8 = "vllm serve Qwen/Qwen3-Coder-30B-A3B-Instruct-FP8 --enable-expert-parallel --tensor-parallel-size 8"
BF16 = "vllm serve Qwen/Qwen3-Coder-30B-A3B-Instruct --enable-expert-parallel --tensor-parallel-size 8"


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))


def _plan(cmd: str, gpu: str = "RTX 3090", **kw) -> dict:
    r = plan_command(cmd, PlanOptions(gpu=gpu, engine_version="0.10.0", **kw))
    return r if isinstance(r, dict) else r.to_dict()


def test_the_public_oom_at_085_is_predicted_with_the_largest_fraction_that_starts() -> None:
    d = _plan(FP8 + " --gpu-memory-utilization 0.85", fixes=True)
    assert d["status"] == "fails" and d["error_kind"] == "fp8_marlin_oom", d.get("error")
    assert "vllm#22177" in d["error"] and "out of memory" in d["error"]
    us = [fx["change"]["--gpu-memory-utilization"] for fx in d["fixes"]
          if set(fx["change"]) == {"--gpu-memory-utilization"}]
    assert us and 0.7 <= us[0] < 0.85, d["fixes"]  # the log started at 0.7


def test_the_same_launch_at_07_starts_with_the_caveat_and_the_measured_kv_within_5_percent() -> None:
    d = _plan(FP8 + " --gpu-memory-utilization 0.7")
    assert d["status"] == "ok", d.get("error")
    assert any("no FP8 tensor cores" in w and "Marlin" in w for w in d["warnings"]), d["warnings"]
    kv_gib = d["budget"]["kv_cache_memory_bytes"] / 2**30
    assert abs(kv_gib - 12.11) / 12.11 < 0.05, kv_gib


def test_the_bf16_checkpoint_and_a_gpu_with_fp8_are_untouched() -> None:
    assert _plan(BF16 + " --gpu-memory-utilization 0.85")["status"] == "ok"
    d = _plan(FP8 + " --gpu-memory-utilization 0.85", gpu="H100 80GB")
    assert d["status"] == "ok" and not any("FP8 tensor cores" in w for w in d["warnings"])


def test_a_dense_fp8_model_on_ampere_gets_the_caveat_only() -> None:
    d = _plan("vllm serve Qwen/Qwen3-8B-FP8 --gpu-memory-utilization 0.9", gpu="A100 80GB")
    assert d["status"] == "ok"
    assert any("no FP8 tensor cores" in w for w in d["warnings"]) and not any("outside the KV" in w
                                                                              for w in d["warnings"])
