"""Cases of ../shared/data/real-logs-dev.json (SGLang) whose model config is bundled, run through the planner with
the measured free memory and weights from each log. Cases that need a config we do not ship (Granite-4-H, Qwen3.8,
Qwen3-0.6B, Mistral v0.1) are listed in `SKIPPED` with the reason, so the coverage is explicit."""

import json

import pytest

from paths import DATA as TEST_DATA
from specbench.contracts_inputs import PlanOptions
from specbench.engines.sglang.formulas import mamba_state
from specbench.plan.api import plan_command
from specbench.specs.resolve import load_model_spec

# a copy of ../shared/data/real-logs-dev.json kept with the tests (CI reads only the project's files)
DATA = TEST_DATA / "real-logs-dev.json"
CASES = {c["id"]: c for c in json.loads(DATA.read_text())} if DATA.exists() else {}
SKIPPED = {
    "granite4-h-micro-16gb-bench-one-batch": "granite-4.0-h-micro config not bundled",
    "club3090-qwen38-27b-int4-2x3090-mtp4-K55": "Qwen3.8-27B config not bundled",
    "fail-qwen38-27b-nvfp4-gb10-memfrac045-mamba360": "Qwen3.8-27B config not bundled",
    "qwen38-27b-fp8-gb10-memfrac045": "Qwen3.8-27B config not bundled",
    "qwen3-0.6b-rtx5080": "Qwen3-0.6B config not bundled",
    "sglang-issue2468-mistral7b": "Mistral-7B v0.1 config not bundled and the log has no free-before-load figure",
}
needs_data = pytest.mark.skipif(not CASES, reason=f"{DATA} not present")


@needs_data
def test_every_sglang_case_is_covered_or_skipped_with_a_reason():
    covered = {"qwen3-8b-b200-tp1-reference", "qwen36-27b-bf16-a100-eagle-v0517", "fail-dp-attention-max-running-lt-dp",
               "sglang-qwopus36-27b-fp8-rtx6000ada-capped9"}
    for cid, c in CASES.items():
        if c["engine"] == "sglang":
            assert cid in covered or cid in SKIPPED, cid


@needs_data
def test_qwen3_8b_b200_kv_tokens():
    c = CASES["qwen3-8b-b200-tp1-reference"]
    o = c["observed"]
    r = plan_command("python -m sglang.launch_server --model-path Qwen/Qwen3-8B --page-size 64 "
                     "--attention-backend trtllm_mha",
                     PlanOptions(gpu="b200", avail_before_load_gib=o["avail_mem_before_load_gb"],
                                 weights_gib=o["weight_mem_gb"], fixes=False))
    assert r["status"] == "ok"
    assert abs(r["kv_tokens"] - o["kv_tokens"]) / o["kv_tokens"] < 0.02
    assert abs(r["k_size_gib"] - o["k_size_gb"]) / o["k_size_gb"] < 0.02
    assert r["chunked_prefill_size"] == o["chunked_prefill_size"]  # >= 160 GiB card -> 16384


@needs_data
def test_qwen36_eagle_allocation_sizes_from_logged_slots():
    """The log gives K=43 slots, N=171,008 tokens, bf16 ssm; D=6 and S=4 are inferred from its graph sizes.
    It has no free-before-load figure, so the pool split cannot be checked; the allocation formulas can."""
    c = CASES["qwen36-27b-bf16-a100-eagle-v0517"]
    o = c["observed"]
    m = load_model_spec("Qwen/Qwen3.5-27B")
    st = mamba_state(m, 1, "bfloat16")
    K, S, D, N = o["max_mamba_cache_size"], 4, 6, o["kv_tokens"]
    G = 2 ** 30
    assert round(st.layers * (K + 1) * st.conv_elems * 2 / G, 2) == o["conv_state_gb"]
    assert round(st.layers * (K + 1) * st.ssm_elems * 2 / G, 2) == o["ssm_state_gb"]
    assert round(st.layers * (S + 1) * D * st.ssm_elems * 2 / G, 2) == o["intermediate_ssm_state_gb"]
    assert round(st.layers * (S + 1) * st.conv_dim_rank * (D + st.conv_kernel - 2) * 2 / G, 2) == o["intermediate_conv_window_gb"]
    assert round(16 * (N + 1) * 4 * 256 * 2 / G, 2) == o["k_size_gb"]
    assert round(1 * (N + 1) * 4 * 256 * 2 / G, 2) == o["draft_k_size_gb"]


@needs_data
def test_dp_attention_max_running_below_dp_is_zero():
    c = CASES["fail-dp-attention-max-running-lt-dp"]
    assert "max_running_request is zero" in c["observed"]["failure_1"]
    cmd = ("python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8 --dp 8 --enable-dp-attention "
           "--max-running-requests 1 --cuda-graph-max-bs 1")
    for version in ("0.5.12", "0.5.15"):
        r = plan_command(cmd, PlanOptions(gpu="h200", engine_version=version, fixes=False))
        assert r["status"] == "fails" and r["error"] == "AssertionError: max_running_request is zero", version
    r = plan_command(cmd, PlanOptions(gpu="h200", engine_version="0.5.23", fixes=False))
    assert r["max_running_requests"] == 1  # 0.5.23 added max(1, mrr // attn_dp)


@needs_data
def test_qwopus_capped_by_mamba_slots():
    c = CASES["sglang-qwopus36-27b-fp8-rtx6000ada-capped9"]
    o = c["observed"]
    r = plan_command("python -m sglang.launch_server --model-path Qwen/Qwen3.5-27B --max-running-requests 32 "
                     f"--max-mamba-cache-size {o['max_mamba_cache_size']}",
                     PlanOptions(gpu="rtx-6000-ada", engine_version="0.5.19", weights_gib=27.5, fixes=False))
    assert r["mamba_ratio"] == o["state_slots_per_request"]
    assert r["max_running_requests"] == o["max_running_requests"]
    assert any("capped to 9 by the mamba state cache" in w for w in r["warnings"])
