"""Weight estimates against real SGLang 0.5.15.post1 boots on an H200 with dummy weights (real shapes).

gpt-oss-20b: tests/data/sglang-0.5.15.post1/gpt_oss_20b_mrr8.log (tools/gpu/boot_one.sh; the command is in its
header). The Llama-3 8B EAGLE3 drafter: tests/data/h200-simulated-sglang-0.5.15.post1/report/logs/
h200-eagle3__server-srv-3b32fe24af89.log (a matrix server log; the second `Load weight end` is the draft).
The measured numbers are read with specbench's own log parser."""

from __future__ import annotations

import pytest

from paths import DATA
from specbench.contracts import GIB
from specbench.contracts_inputs import PlanOptions
from specbench.doctor.reading import log_reader
from specbench.plan.api import plan_command
from specbench.specs.resolve import load_model_spec
from specbench.specs.weights import (
    MXFP4_SWIZZLE_ALLOCATOR_RESIDUE,
    draft_model_bytes,
    eagle3_replaced_module_bytes,
    mxfp4_hopper_swizzle_extra_bytes,
    weight_bytes,
)

GPT_OSS_LOG = DATA / "sglang-0.5.15.post1" / "gpt_oss_20b_mrr8.log"
EAGLE3_LOG = DATA / "h200-simulated-sglang-0.5.15.post1" / "report" / "logs" / "h200-eagle3__server-srv-3b32fe24af89.log"

GPT_OSS_CMD = ("python3 -m sglang.launch_server --model-path /tmp/models/gpt_oss_20b --tp 1 --context-length 32768 "
               "--max-running-requests 8 --mem-fraction-static 0.75")
EAGLE3_CMD = ("python3 -m sglang.launch_server --model-path /tmp/models/llama31_8b --tp-size 1 "
              "--mem-fraction-static 0.85 --max-running-requests 64 --context-length 2048 --speculative-algorithm EAGLE3 "
              "--speculative-draft-model-path /tmp/models/l31_eagle3 --speculative-num-steps 3 "
              "--speculative-eagle-topk 1 --speculative-num-draft-tokens 4 --dtype bfloat16")


def _plan(cmd: str, model: str, draft: str | None = None) -> dict:
    return plan_command(cmd, PlanOptions(gpu="H200", fixes=False, engine_version="0.5.15.post1",
                                         model_config=model, draft_config=draft))


def _rel(a: float, b: float) -> float:
    return abs(a - b) / b


def test_gpt_oss_20b_weights_and_swa_pool_match_the_h200_boot():
    f = log_reader().facts_of_text(GPT_OSS_LOG.read_text())
    assert f.model_class == "GptOssForCausalLM" and f.weight_quant == "mxfp4"
    d = _plan(GPT_OSS_CMD, "openai/gpt-oss-20b")
    assert d["status"] == "ok", d["error"]
    assert _rel(d["weights_gib"], f.weights_gib) < 0.03, (d["weights_gib"], f.weights_gib)  # 15.02 GB logged
    # `SWAKVPool mem usage: 89.31 GB, swa size: 1734138, full size: 2167673`
    assert f.kv_tokens == f.max_total_num_tokens
    assert _rel(d["kv_tokens"], f.kv_tokens) < 0.02, (d["kv_tokens"], f.kv_tokens)
    assert _rel(d["swa_kv_tokens"], f.swa_kv_tokens) < 0.02, (d["swa_kv_tokens"], f.swa_kv_tokens)


def test_gpt_oss_hopper_swizzle_terms():
    m = load_model_spec("openai/gpt-oss-20b")
    plain = weight_bytes(m, 1, moe_pad=(1, 64), rope_itemsize=4)  # the replay builds the fp32 rope cache too
    extra = mxfp4_hopper_swizzle_extra_bytes(m, 1, (1, 64))
    assert weight_bytes(m, 1, moe_pad=(1, 64), rope_itemsize=4, mxfp4_hopper_swizzle=True) == plain + extra
    # the live part (padding, kept scales, fp32 biases) is what the replay's memory_allocated shows (13.64 GiB,
    # tests/data/sglang-0.5.15.post1/gpt_oss_20b_swizzle_replay.txt); the allocator residue is the rest
    values = 24 * 32 * (1472 * 5760 + 1472 * 2880)
    live = plain + extra - MXFP4_SWIZZLE_ALLOCATOR_RESIDUE * values
    assert abs(live / GIB - 13.639) < 0.01, live / GIB
    assert mxfp4_hopper_swizzle_extra_bytes(load_model_spec("Qwen/Qwen3-8B"), 1) == 0
    # only sm90 takes the triton_kernels Hopper layouts; a B200 plan does not add them
    b200 = plan_command(GPT_OSS_CMD, PlanOptions(gpu="B200", fixes=False, engine_version="0.5.15.post1",
                                                  model_config="openai/gpt-oss-20b"))
    assert b200["weights_gib"] < 15.02 * 0.97


def test_llama3_eagle3_draft_and_kv_match_the_h200_boot():
    f = log_reader().facts_of_text(EAGLE3_LOG.read_text())
    assert f.draft_weights_gib is not None and f.draft_loaded_before_pools
    d = _plan(EAGLE3_CMD, "meta-llama/Llama-3.1-8B-Instruct", "specforge/llama3-8B-eagle3")
    assert d["status"] == "ok", d["error"]
    assert _rel(d["weights_gib"], f.weights_gib) < 0.03
    assert _rel(d["draft_weights_gib"], f.draft_weights_gib) < 0.03, (d["draft_weights_gib"], f.draft_weights_gib)
    assert _rel(d["kv_tokens"], f.kv_tokens) < 0.02, (d["kv_tokens"], f.kv_tokens)  # 802,801


def test_eagle3_replaced_modules_are_counted_for_sglang_only():
    dr = load_model_spec("specforge/llama3-8B-eagle3")
    h, i = 4096, 14336
    assert eagle3_replaced_module_bytes(dr, 1) == (h * (32 + 16) * 128 + 3 * h * i) * 2  # 0.375 GiB
    own = draft_model_bytes(dr, 1)
    shared = draft_model_bytes(dr, 1, shares_target_embed=True)  # vLLM's path: no init garbage
    assert own - shared == 128256 * h * 2 + eagle3_replaced_module_bytes(dr, 1)
    assert eagle3_replaced_module_bytes(dr, 2) == pytest.approx(eagle3_replaced_module_bytes(dr, 1) / 2, rel=1e-9)


def test_the_qwen3_8b_eagle3_boot_predicted_without_its_log() -> None:
    """tests/data/sglang-0.5.15.post1/qwen3_8b_mrr48_eagle3.log was booted after the EAGLE3 rule was written from the
    Llama-3 8B drafter's log: the planner (no measured inputs) must land within 3% (weights) and 2% (KV tokens)."""
    import re
    import shlex


    path = DATA / "sglang-0.5.15.post1" / "qwen3_8b_mrr48_eagle3.log"
    text = path.read_text(errors="replace")
    facts = log_reader().facts_of_text(text)
    argv = shlex.split(re.search(r"^# command: (.*)$", text, re.M).group(1))  # type: ignore[union-attr]
    r = plan_command(argv, PlanOptions(engine_version="0.5.15.post1", gpu="H200", model_config="Qwen/Qwen3-8B",
                                       draft_config="specforge/qwen3-8b-eagle3", fixes=False))
    assert facts.weights_gib and facts.draft_weights_gib and facts.kv_tokens
    assert abs(r["weights_gib"] - facts.weights_gib) <= 0.03 * facts.weights_gib
    assert abs(r["draft_weights_gib"] - facts.draft_weights_gib) <= 0.03 * facts.draft_weights_gib
    assert abs(r["kv_tokens"] - facts.kv_tokens) <= 0.02 * facts.kv_tokens
    assert r["max_running_requests"] == facts.max_running_requests and r["status"] == "ok"
