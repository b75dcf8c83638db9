"""Config estimates of the weights (latent MoE, drafters, rope cache, MXFP4 padding, online fp8), the per-GPU context
overhead, and the engines' non-memory start checks, on the bundled real configs and the real H200 boot logs."""

from __future__ import annotations

import dataclasses
import re

import pytest

from paths import DATA, ROOT
from specbench.contracts import GIB
from specbench.contracts_inputs import PlanOptions
from specbench.engines.sglang.args import parse_sglang_argv
from specbench.engines.sglang.plan import plan_sglang
from specbench.engines.sglang.plan_stages import ROPE_ITEMSIZE, mxfp4_moe_pad
from specbench.engines.sglang.start_checks import derived_context_length
from specbench.plan.api import plan_command
from specbench.specs.gpu import CATALOG, context_overhead, find_gpu
from specbench.specs.model import load_config_file, model_spec_from_dict
from specbench.specs.weights import draft_model_bytes, weight_bytes

CONFIGS = ROOT / "src/specbench/data/configs"
BOOTS = DATA / "sglang-0.5.15.post1"
H200 = find_gpu("h200")


def spec(name: str):
    c, hq = load_config_file(str(CONFIGS / f"{name}.json"))
    return model_spec_from_dict(c, name=name, hf_quant_config=hq)


def logged_weights(log: str, model_type: str) -> float:
    """`Load weight end. ... type=<T>, ... mem usage=X GB.` of a real boot (GB in SGLang's log = GiB)."""
    text = (BOOTS / log).read_text()
    m = re.search(rf"Load weight end\..*type={model_type},.*mem usage=([\d.]+) GB", text)
    assert m, (log, model_type)
    return float(m.group(1))


@pytest.mark.parametrize("log,arch,config", [
    ("llama31_8b_mrr8.log", "LlamaForCausalLM", "meta-llama__Llama-3.1-8B-Instruct"),
    ("q35_27b_mrr16.log", "Qwen3_5ForConditionalGeneration", "Qwen__Qwen3.5-27B"),
    ("q36_35b_mrr8.log", "Qwen3_5MoeForConditionalGeneration", "Qwen__Qwen3.6-35B-A3B"),
])
def test_target_estimate_with_rope_cache_matches_the_boot(log, arch, config):
    m = spec(config)
    est = weight_bytes(m, 1, rope_itemsize=ROPE_ITEMSIZE) / GIB
    real = logged_weights(log, arch)
    assert abs(est - real) / real < 0.005, (est, real)
    # the fp32 rope cache is what closed the gap: without it Llama-3.1-8B is 0.06 GiB (0.4 %) low
    assert weight_bytes(m, 1, rope_itemsize=ROPE_ITEMSIZE) > weight_bytes(m, 1)


def test_dflash_drafter_estimate_matches_the_boot():
    d = spec("specforge__qwen3.6-27b-dflash")
    real = logged_weights("q36_27b_mrr8_df16_eb.log", "DFlashDraftModel")
    est = draft_model_bytes(d, 1, rope_itemsize=ROPE_ITEMSIZE) / GIB  # its own rope: 262144 x 128 x 4 B
    assert abs(est - real) / real < 0.03, (est, real)
    assert abs(draft_model_bytes(d, 1) / GIB - real) / real > 0.04  # the old estimate, without its rope cache


def test_nemotron_super_latent_moe():
    m = spec("nvidia__NVIDIA-Nemotron-3-Super-120B-A12B-FP8")
    assert m.moe is not None and m.moe.latent_size == 1024
    gib = weight_bytes(m, 1) / GIB
    # 120B parameters at ~1 byte (FP8 linears, bf16 embeddings/norms): 105-125 GiB; experts in hidden (4096)
    # instead of the latent (1024) would be ~4x that
    assert 105 < gib < 125, gib
    wide = dataclasses.replace(m, moe=dataclasses.replace(m.moe, latent_size=0))
    assert weight_bytes(wide, 1) / GIB > 3.5 * gib


def test_eagle3_drafter_counts_its_embedding_fc_and_draft_vocab():
    d = spec("specforge__qwen3-8b-eagle3")
    h, v, dv = 4096, 151936, 32000
    own = draft_model_bytes(d, 1)
    shared = draft_model_bytes(d, 1, shares_target_embed=True)
    # SGLang allocates its own embed_tokens (vLLM shares the target's) and still holds the qkv_proj/MLP its
    # LlamaDecoderLayer replaced at init (specs/weights.py::eagle3_replaced_module_bytes, measured on the H200)
    garbage = (h * (32 + 2 * 8) * 128 + 3 * h * 12288) * 2
    assert own - shared == v * h * 2 + garbage
    # fc over 3 hidden states, layer 0's qkv over 2h, lm_head over the 32,000-token draft vocabulary
    layer = (2 * h) * (32 + 2 * 8) * 128 + 32 * 128 * h + 3 * h * 12288
    expect = (v * h + dv * h + 3 * h * h + layer) * 2 + garbage
    assert abs(own - expect) / expect < 0.01
    assert own / GIB > 2.5 * 0.697  # the old estimate (0.697 GiB) missed embed_tokens


def test_mxfp4_experts_padded_per_gpu_backend():
    m = spec("openai__gpt-oss-20b")
    hopper = weight_bytes(m, 1, moe_pad=mxfp4_moe_pad(H200))
    blackwell = weight_bytes(m, 1, moe_pad=mxfp4_moe_pad(find_gpu("b200")))
    assert mxfp4_moe_pad(H200) == (1, 64) and mxfp4_moe_pad(find_gpu("b200")) == (256, 256)
    assert hopper == weight_bytes(m, 1)  # 2880 is a multiple of 64: triton_kernels pads nothing
    assert 1.08 < blackwell / hopper < 1.14  # flashinfer_mxfp4 pads 2880 -> 3072 on both expert dims


def test_context_overhead_table_and_plan_keys():
    assert context_overhead(H200, 1).gib == 1.27 and "measured" in context_overhead(H200, 1).source
    assert context_overhead(H200, 2).gib == 2.12
    assert context_overhead(find_gpu("rtx-pro-6000"), 1).gib == 1.35
    assert context_overhead(find_gpu("l4"), 1).source.startswith("estimate")
    names = {g.name for g in CATALOG}
    for n in ("B300", "GB200", "GB300", "H800", "A800", "L20", "L4", "MI300X", "MI325X", "MI355X"):
        assert n in names
        assert find_gpu(n).mib_source in ("measured", "public log", "spec")
    assert find_gpu("mi300x").vendor == "amd"
    d = plan_command("python -m sglang.launch_server --model-path Qwen/Qwen3-8B",
                     PlanOptions(gpu="H200", fixes=False))
    assert d["context_overhead_gib"] == 1.27 and d["avail_before_load_gib"] == pytest.approx(140.401 - 1.27, abs=1e-3)
    assert "tests/data" in d["context_overhead_source"]


def _plan(cmd: str, version: str = "0.5.15.post1", **kw) -> dict:
    return plan_command(cmd, PlanOptions(gpu="H200", fixes=False, engine_version=version, **kw))


L = "python -m sglang.launch_server --model-path "


@pytest.mark.parametrize("cmd,needle", [
    (L + "Qwen/Qwen3-8B --context-length 65536",
     "User-specified context_length (65536) is greater than the derived context_length (40960)"),
    (L + "meta-llama/Llama-3.1-8B-Instruct --speculative-algorithm EAGLE3 --speculative-draft-model-path "
     "specforge/llama3-8B-eagle3", "Target model's context_length (131072) is greater than the derived context_length "
     "(2048)"),
    (L + "Qwen/Qwen3.5-27B --tp 3", "total_num_kv_heads % tp_size == 0"),
    (L + "Qwen/Qwen3-8B --kv-cache-dtype fp8", "argument --kv-cache-dtype: invalid choice: 'fp8'"),
    (L + "Qwen/Qwen3-8B --speculative-algorithm MEDUSA", "Unknown speculative algorithm name: MEDUSA"),
    (L + "Qwen/Qwen3.6-27B-bf16-derived --speculative-algorithm DFLASH --speculative-draft-model-path "
     "specforge/qwen3.6-27b-dflash --speculative-num-draft-tokens 8 --speculative-dflash-block-size 16",
     "For DFLASH they must match"),
    (L + "Qwen/Qwen3.5-27B --page-size 16 --mamba-scheduler-strategy no_buffer",
     "no_buffer only supports page_size=1"),
])
def test_sglang_start_checks_fail_the_plan(cmd, needle):
    d = _plan(cmd)
    assert d["status"] == "fails" and d["error_kind"] == "start_check", d["error"]
    assert needle in d["error"]


def test_sglang_start_checks_pass_when_the_engine_would():
    ok = _plan(L + "Qwen/Qwen3-8B --context-length 40960")
    assert ok["status"] == "ok"
    env = _plan("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 " + L + "meta-llama/Llama-3.1-8B-Instruct "
                "--speculative-algorithm EAGLE3 --speculative-draft-model-path specforge/llama3-8B-eagle3")
    assert env["status"] == "ok", env["error"]
    short = _plan(L + "meta-llama/Llama-3.1-8B-Instruct --context-length 2048 --speculative-algorithm EAGLE3 "
                  "--speculative-draft-model-path specforge/llama3-8B-eagle3")
    assert short["status"] == "ok", short["error"]
    # a release whose --kv-cache-dtype list was not read here is not refused on it
    assert _plan(L + "Qwen/Qwen3-8B --kv-cache-dtype fp8_e4m3")["status"] == "ok"


def test_derived_context_length_follows_the_engine():
    c, _ = load_config_file(str(CONFIGS / "openai__gpt-oss-20b.json"))
    assert derived_context_length(c) == 131072  # yarn with original_max_position_embeddings: factor not applied
    assert derived_context_length({"max_position_embeddings": 4096, "rope_scaling": {"factor": 4.0}}) == 16384
    assert derived_context_length({}) == 2048


def test_vllm_online_fp8_and_start_checks():
    base = plan_command("vllm serve Qwen/Qwen3-8B", PlanOptions(gpu="H200", fixes=False))
    fp8 = plan_command("vllm serve Qwen/Qwen3-8B --quantization fp8", PlanOptions(gpu="H200", fixes=False))
    # linears to 1 byte, embed_tokens and lm_head stay bf16 (2 x 151936 x 4096 x 2 B = 2.32 GiB)
    assert fp8["weights_gib"] == pytest.approx((base["weights_gib"] - 2.318) / 2 + 2.318, abs=0.05)
    bad = plan_command("vllm serve Qwen/Qwen3-8B --speculative-config '{\"method\": \"medusa2\", \"num_speculative_tokens\": 3}'",
                       PlanOptions(gpu="H200", fixes=False))
    assert bad["status"] == "fails" and bad["error_kind"] == "start_check" and "medusa2" in bad["error"]


def test_sglang_args_parse_env_prefix_for_checks():
    a = parse_sglang_argv("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 sglang serve --model-path x".split(), None)
    assert dict(a.env).get("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN") == "1"
    m = spec("meta-llama__Llama-3.1-8B-Instruct")
    p = plan_sglang(a.with_(context_length=200000), m, None, H200, "0.5.15.post1")
    assert p.status == "ok"  # the env lets the engine go on with a warning


def test_gpt_oss_hybrid_swa_pool():
    """pool_configurator.py::HybridSWAPoolConfigurator@0.5.15.post1 on the bundled gpt-oss-20b config: 12 full +
    12 sliding layers, 8 KV heads x (64 + 64) x 2 B = 2048 B per layer-token; cell = 2048·12 + 0.8·2048·12."""
    d = _plan(L + "openai/gpt-oss-20b --tp 1 --mem-fraction-static 0.85")
    assert d["status"] == "ok" and d["kv_cell_bytes"] == 44237
    assert d["swa_kv_tokens"] == int(d["kv_tokens"] * 0.8)
    # the engine's order (model_runner.py, swa_memory_pool.py@0.5.15.post1): weights, the pool line, SWA K/V, full K/V
    i = next(i for i, t in enumerate(d["log_lines"]) if t.startswith("Use sliding window memory pool."))
    assert d["log_lines"][i - 1].startswith("Load weight end.")
    assert d["log_lines"][i] == (f"Use sliding window memory pool. full_layer_tokens={d['kv_tokens']}, "
                                 f"swa_layer_tokens={d['swa_kv_tokens']}")
    assert f"#tokens: {d['swa_kv_tokens']}," in d["log_lines"][i + 1]
    assert f"#tokens: {d['kv_tokens']}," in d["log_lines"][i + 2]
    # K of 12 layers each: full = 12 x (n + 1) x 8 x 64 x 2 B, SWA the same over its own tokens
    assert d["k_size_gib"] == round(12 * (d["kv_tokens"] + 1) * 1024 / GIB, 2)
    assert d["swa_k_size_gib"] == round(12 * (d["swa_kv_tokens"] + 1) * 1024 / GIB, 2)
    # the same budget over a cell of all 24 layers (the old plan) holds 1/0.9 fewer full tokens
    assert d["kv_tokens"] > 1.1 * (d["rest_gib"] * GIB) // (2048 * 24)
    dense = _plan(L + "Qwen/Qwen3-8B")
    assert dense["swa_kv_tokens"] is None


def test_a_flag_the_release_lacks_is_reported_once():
    """0.5.12's flag list has no --mamba-radix-cache-strategy: one 'unknown' warning, not a second spelling one."""
    d = _plan(L + "Qwen/Qwen3.5-27B --mamba-radix-cache-strategy no_buffer", version="0.5.12")
    about = [w for w in d["warnings"] if "mamba-radix-cache-strategy" in w]
    assert len(about) == 1 and about[0].startswith("unknown to SGLang 0.5.12")
    assert d["unknown_flags"] == ["--mamba-radix-cache-strategy no_buffer"]
