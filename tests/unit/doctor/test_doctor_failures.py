"""Known failures, each in the text the engine raises (research notes cite the raising function)."""

from __future__ import annotations

import pytest

from specbench.doctor.doctor import diagnose_text

TB = "Traceback (most recent call last):\n  File \"/x/scheduler.py\", line 1, in run_scheduler_process\n    main()\n"
BOOT = ("[2026-11-20 14:02:22 TP0] Load weight begin. avail mem=94.24 GB\n"
        "[2026-11-20 14:03:00 TP0] Load weight end. type=X, avail mem=43.19 GB, mem usage=51.05 GB.\n")
POOLS = ("[2026-11-20 14:03:00 TP0] KV Cache is allocated. #tokens: 87061, K size: 2.66 GB, V size: 2.66 GB\n"
         "[2026-11-20 14:03:00 TP0] Memory pool end. avail mem=22.82 GB\n")
READY = "[2026-11-20 14:03:16 TP0] max_total_num_tokens=87061, max_running_requests=4, context_len=32768\n"

CASES = [
    (BOOT + TB + "RuntimeError: Hybrid (mamba/linear-attention) state cache is too small to serve any requests. "
     "max_mamba_cache_size=3, mamba_ratio=5, resulting max_num_reqs=0", "mamba_state_cache_too_small", "failed"),
    (BOOT + TB + "RuntimeError: Not enough GPU memory for hybrid (mamba/linear-attention) state cache. Computed "
     "max_mamba_cache_size=0 (total_rest_memory=0.50 GB, mamba_cache_per_req=146.81 MB).",
     "mamba_state_cache_no_memory", "failed"),
    (BOOT + TB + "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: "
     "mem_fraction_static=0.5", "kv_pool_empty", "failed"),
    (BOOT + TB + "ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.45. "
     "Raise --mem-fraction-static above 0.473", "weights_leave_no_kv_memory", "failed"),
    (BOOT + POOLS + "[2026-11-20 14:03:05 TP0] Capture cuda graph begin. This can take up to several minutes. "
     "avail mem=1.10 GB\n" + TB + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has "
     "a total capacity of 95.59 GiB of which 1.02 GiB is free.", "cuda_graph_oom", "failed"),
    (BOOT + POOLS + TB + "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 1.00 GiB",
     "cuda_graph_oom", "failed"),
    ("[2026-11-20 14:02:22 TP0] Load weight begin. avail mem=20.00 GB\n" + TB
     + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 500.00 MiB.", "cuda_oom_load", "failed"),
    # after readiness: a run-time failure of a server that had started
    (BOOT + POOLS + READY + TB + "AssertionError: Not enough space for mamba ping pong idx",
     "mamba_ping_pong", "started"),
    (BOOT + POOLS + READY + "[2026-11-20 14:05:00] Error in request: The input (33012 tokens) is longer than the "
     "model's context length (32768 tokens).", "context_too_long", "started"),
    ("(EngineCore_DP0 pid=2) ERROR 11-30 02:29:10 [core.py:1] " + "ValueError: No available memory for the cache "
     "blocks. Try increasing `gpu_memory_utilization` when initializing the engine.", "vllm_no_kv_memory", "failed"),
    ("ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache is "
     "needed, which is larger than the available KV cache memory (8.50 GiB).", "vllm_max_model_len", "failed"),
    ("RuntimeError: Worker failed with error 'max_num_seqs (1024) exceeds available Mamba cache blocks (969). Each "
     "decode sequence requires one Mamba cache block'", "vllm_mamba_blocks", "failed"),
    (BOOT + TB + "KeyError: 'model.layers.0.linear_attn.A_log'", "exception", "failed"),
    (BOOT + POOLS + "[2026-11-20 14:03:30] scheduler_0 (pid=33237) crashed with exit code -11", "process_crashed",
     "failed"),
]


@pytest.mark.parametrize("text,kind,status", CASES, ids=[c[1] + str(i) for i, c in enumerate(CASES)])
def test_failure_is_named_with_the_engines_text(text: str, kind: str, status: str):
    d = diagnose_text(text, with_fixes=False)
    assert d.failure is not None
    assert d.failure.kind == kind
    assert d.status == status
    last = [ln for ln in text.splitlines() if ln.strip()][-1]
    assert d.failure.message in last  # the engine's own line, decorations stripped
    assert d.explanation


def test_weights_leave_no_memory_explains_the_minimum_fraction():
    text = ("[2026-09-20 10:00:00 TP0] server_args=ServerArgs(model_path='nvidia/Qwen3.8-27B-NVFP4', "
            "mem_fraction_static=0.45, tp_size=1)\n"
            "[2026-09-20 10:00:01 TP0] Load weight begin. avail mem=114.02 GB\n"
            "[2026-09-20 10:00:30 TP0] Load weight end. type=X, avail mem=60.41 GB, mem usage=53.61 GB.\n"
            + TB + "ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.45.")
    d = diagnose_text(text, with_fixes=False)
    # 1 - 60.41/114.02 = 0.470 (the engine's own hint formula, research sglang-memory.md §3)
    assert "1 − 60.41/114.02 = 0.470" in d.explanation
    assert "62.71 GiB" in d.explanation  # slack 114.02 × 0.55


def test_started_log_has_no_failure_and_unknown_when_cut():
    assert diagnose_text(BOOT + POOLS + READY, with_fixes=False).status == "started"
    cut = diagnose_text(BOOT + POOLS, with_fixes=False)
    assert cut.status == "unknown" and cut.failure is None


def test_mamba_cap_warning_is_explained():
    text = ("max_running_requests is capped to 9 by the mamba state cache (max_mamba_cache_size=47, 5 state slots per "
            "request). To raise it: increase --mamba-full-memory-ratio\n" + READY)
    d = diagnose_text(text, with_fixes=False)
    assert "capped to 9 by the Mamba state cache (47 slots / 5 per request)" in d.explanation


def test_dp_attention_mrr_below_dp_size():
    text = ("[2026-07-28 10:00:00] server_args=ServerArgs(model_path='m', tp_size=8, dp_size=8, "
            "enable_dp_attention=True, max_running_requests=1)\n" + TB
            + "AssertionError: max_running_request is zero\nRank 0 scheduler died during initialization\n"
            + "AssertionError: capture_bs=[]")
    d = diagnose_text(text, with_fixes=False)
    assert d.failure is not None and d.failure.kind == "max_running_requests_zero"
    assert "1 // 8 = 0" in d.explanation


def test_context_refusal_explained_with_the_requests_numbers():
    text = (BOOT + POOLS + READY + "[2026-11-20 15:01:00] Error in request: Requested token count exceeds the model's "
            "maximum context length of 32768 tokens. You requested a total of 32810 tokens: 32554 tokens from the "
            "input messages and 256 tokens for the completion. Please reduce the number of tokens in the input "
            "messages or the completion to fit within the limit.")
    d = diagnose_text(text, with_fixes=False)
    assert d.status == "started" and d.failure is not None and d.failure.kind == "context_too_long"
    assert "32,554 prompt tokens + 256 output tokens = 32,810 > context 32,768" in d.explanation


@pytest.mark.parametrize("message,expect", [
    ("ValueError: This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in "
     "the messages, 1000 in the completion). Please reduce the length of the messages or completion.",
     "4,000 prompt tokens + 1,000 output tokens = 5,000 > context 4,096"),
    ("ValueError: 'max_tokens' or 'max_completion_tokens' is too large: 1000. This model's maximum context length is "
     "4096 tokens and your request has 3500 input tokens (1000 > 4096 - 3500).",
     "3,500 prompt tokens + 1,000 output tokens = 4,500 > context 4,096"),
])
def test_vllm_context_refusals(message: str, expect: str):
    text = ("(APIServer pid=1) INFO 11-30 02:29:17 [api_server.py:1] Starting vLLM API server 0 on http://0.0.0.0:8000\n"
            f"(APIServer pid=1) ERROR 11-30 02:40:00 [serving_chat.py:1] {message}")
    d = diagnose_text(text, with_fixes=False)
    assert d.failure is not None and d.failure.kind == "context_too_long" and d.status == "started"
    assert expect in d.explanation
