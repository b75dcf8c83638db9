"""Every raw log excerpt in ../shared/data/real-logs-dev.json parses to the values its case lists.

For each case we name which `observed` keys its `raw_log` actually contains (the rest of `observed` comes from
elsewhere in the source, e.g. nvidia-smi) and compare the parsed value with the JSON file's own number.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from paths import DATA as TEST_DATA
from specbench.doctor.doctor import boot_budget_rows, diagnose_text
from specbench.logs.facts import LogFacts

# a copy of ../shared/data/real-logs-dev.json kept with the tests (CI reads only the project's files)
DATA = TEST_DATA / "real-logs-dev.json"


def _graph(label_has: str) -> Callable[[LogFacts], Any]:
    def get(f: LogFacts) -> Any:
        for g in f.graphs:
            if (label_has == "" and g.label.lower() == "cuda graph") or (label_has and label_has in g.label.lower()):
                return g.mem_usage_gib
        return None
    return get


def _free_end(f: LogFacts) -> Any:
    return {r.key: r.gib for r in boot_budget_rows(f)}.get("free_end")


# observed key -> how to read it from the facts
READ: dict[str, Callable[[LogFacts], Any]] = {
    "avail_mem_before_load_gb": lambda f: f.avail_before_load_gib,
    "avail_mem_after_load_gb": lambda f: f.avail_after_load_gib,
    "weight_mem_gb": lambda f: f.weights_gib,
    "weight_mem_gib": lambda f: f.weights_gib,
    "max_mamba_cache_size": lambda f: f.max_mamba_cache_size,
    "conv_state_gb": lambda f: f.conv_state_gib,
    "ssm_state_gb": lambda f: f.ssm_state_gib,
    "intermediate_ssm_state_gb": lambda f: f.intermediate_ssm_state_gib,
    "intermediate_conv_window_gb": lambda f: f.intermediate_conv_window_gib,
    "kv_tokens": lambda f: f.kv_tokens,
    "k_size_gb": lambda f: f.k_size_gib,
    "v_size_gb": lambda f: f.v_size_gib,
    "draft_k_size_gb": lambda f: f.draft_k_size_gib,
    "draft_v_size_gb": lambda f: f.draft_v_size_gib,
    "max_total_num_tokens": lambda f: f.max_total_num_tokens,
    "chunked_prefill_size": lambda f: f.chunked_prefill_size,
    "max_prefill_tokens": lambda f: f.max_prefill_tokens,
    "max_running_requests": lambda f: f.max_running_requests,
    "context_len": lambda f: f.context_len,
    "available_gpu_mem_after_gb": _free_end,
    "mem_pool_end_avail_gb": lambda f: f.memory_pool_end_gib,
    "cuda_graph_mem_gb": _graph(""),
    "piecewise_cuda_graph_mem_gb": _graph("piecewise"),
    "state_slots_per_request": lambda f: f.state_slots_per_request,
    "mamba_cache_blocks": lambda f: f.mamba_cache_blocks,
    "total_gpu_memory_gib": lambda f: f.total_gpu_memory_gib,
    "budget_gib": lambda f: f.budget_gib,
    "non_torch_gib": lambda f: f.non_torch_gib,
    "activation_peak_gib": lambda f: f.activation_peak_gib,
    "available_kv_memory_gib": lambda f: f.available_kv_gib,
    "gpu_blocks": lambda f: f.gpu_blocks,
    "cpu_blocks": lambda f: f.cpu_blocks,
    "max_concurrency": lambda f: f"{f.max_concurrency:.2f}x @ {f.max_concurrency_tokens}",
}

# case id -> the observed keys its raw_log holds
CASES: dict[str, tuple[str, ...]] = {
    "qwen36-27b-bf16-a100-eagle-v0517": (
        "max_mamba_cache_size", "conv_state_gb", "ssm_state_gb", "intermediate_ssm_state_gb",
        "intermediate_conv_window_gb", "kv_tokens", "k_size_gb", "v_size_gb", "draft_k_size_gb", "draft_v_size_gb",
        "max_total_num_tokens", "context_len", "available_gpu_mem_after_gb"),
    "granite4-h-micro-16gb-bench-one-batch": (
        "avail_mem_before_load_gb", "weight_mem_gb", "avail_mem_after_load_gb", "max_mamba_cache_size",
        "conv_state_gb", "ssm_state_gb", "kv_tokens", "k_size_gb", "v_size_gb", "mem_pool_end_avail_gb",
        "cuda_graph_mem_gb", "available_gpu_mem_after_gb", "max_total_num_tokens"),
    "vllm-llama3-8b-a100-40gb-v0": (
        "total_gpu_memory_gib", "budget_gib", "weight_mem_gib", "non_torch_gib", "activation_peak_gib",
        "available_kv_memory_gib", "gpu_blocks", "cpu_blocks", "max_concurrency"),
    "vllm-fail-mamba-blocks-h100-qwen38-27b": ("mamba_cache_blocks",),
    "club3090-qwen38-27b-int4-2x3090-mtp4-K55": ("max_mamba_cache_size", "kv_tokens"),
    "sglang-qwopus36-27b-fp8-rtx6000ada-capped9": (
        "max_mamba_cache_size", "state_slots_per_request", "max_running_requests"),
    "fail-qwen38-27b-nvfp4-gb10-memfrac045-mamba360": (),
    "qwen38-27b-fp8-gb10-memfrac045": (
        "avail_mem_before_load_gb", "avail_mem_after_load_gb", "weight_mem_gb", "max_mamba_cache_size", "kv_tokens",
        "k_size_gb", "v_size_gb"),
    "qwen3-0.6b-rtx5080": (
        "weight_mem_gb", "avail_mem_after_load_gb", "kv_tokens", "k_size_gb", "v_size_gb", "mem_pool_end_avail_gb",
        "cuda_graph_mem_gb", "max_total_num_tokens", "chunked_prefill_size", "max_prefill_tokens",
        "max_running_requests", "context_len", "available_gpu_mem_after_gb"),
    "qwen3-8b-b200-tp1-reference": (
        "avail_mem_before_load_gb", "weight_mem_gb", "avail_mem_after_load_gb", "kv_tokens", "k_size_gb", "v_size_gb",
        "mem_pool_end_avail_gb", "cuda_graph_mem_gb", "piecewise_cuda_graph_mem_gb", "available_gpu_mem_after_gb",
        "max_total_num_tokens", "chunked_prefill_size"),
    "sglang-issue2468-mistral7b": (
        "avail_mem_after_load_gb", "mem_pool_end_avail_gb", "max_total_num_tokens", "max_prefill_tokens",
        "max_running_requests", "context_len"),
    "fail-dp-attention-max-running-lt-dp": (),
}

# failures: case id -> (kind, observed key whose text starts with the engine's message)
FAILURES: dict[str, tuple[str, str]] = {
    "vllm-fail-mamba-blocks-h100-qwen38-27b": ("vllm_mamba_blocks", "failure"),
    "fail-qwen38-27b-nvfp4-gb10-memfrac045-mamba360": ("weights_leave_no_kv_memory", "failure"),
    "fail-dp-attention-max-running-lt-dp": ("max_running_requests_zero", "failure_1"),
}

# the vLLM V0 weights number is printed twice: 14.9595 (model_runner) and 14.96 (worker, rounded); observed has 14.96
TOLERANCE = {("vllm-llama3-8b-a100-40gb-v0", "weight_mem_gib"): 0.005}


def _cases() -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in json.loads(DATA.read_text())}


def test_every_case_is_covered():
    assert set(_cases()) == set(CASES)


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_raw_log_parses_to_observed(case_id: str):
    case = _cases()[case_id]
    d = diagnose_text("\n".join(case["raw_log"]), with_fixes=False)
    for key in CASES[case_id]:
        want = case["observed"][key]
        got = READ[key](d.facts)
        tol = TOLERANCE.get((case_id, key))
        if tol is not None:
            assert got == pytest.approx(want, abs=tol), key
        else:
            assert got == want, f"{case_id}: {key}: parsed {got!r}, case lists {want!r}"
    if case_id in FAILURES:
        kind, obs_key = FAILURES[case_id]
        assert d.status == "failed"
        assert d.failure is not None and d.failure.kind == kind
        assert case["observed"][obs_key].startswith(d.failure.message)
    elif case["case_kind"] == "startup_success":
        assert d.failure is None and d.status in ("started", "unknown")


def test_engine_is_recognised():
    for case_id, case in _cases().items():
        d = diagnose_text("\n".join(case["raw_log"]), with_fixes=False)
        if d.facts.lines and case_id != "club3090-qwen38-27b-int4-2x3090-mtp4-K55":
            assert d.facts.engine == case["engine_family"], case_id
