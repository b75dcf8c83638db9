"""vLLM's non-memory start checks: config validation that ends a boot before any weight loads.

Read from vLLM 0.32.0 (config/model.py, config/cache.py, config/speculative.py: pydantic `Literal` types, so a
value outside them fails `EngineArgs.create_engine_config` with a ValidationError). Each check returns the
engine's own complaint (or None); `first_failure` runs them in the order vLLM builds its configs.
"""

from __future__ import annotations

from specbench.engines.vllm.args import VllmArgs

# config/model.py::ModelDType@0.32.0
MODEL_DTYPES = ("auto", "half", "float16", "bfloat16", "float", "float32")
# config/cache.py::CacheDType@0.32.0
CACHE_DTYPES = ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla", "nvfp4_ds_mla",
                "turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc", "turboquant_3bit_nc",
                "ultraquant_4bit", "int4_per_token_head", "int8_per_token_head", "fp8_per_token_head", "nvfp4",
                "nvfp4_4over6")
# config/speculative.py::SpeculativeMethod@0.32.0 (MTPModelTypes expanded)
SPEC_METHODS = ("ngram", "medusa", "mlp_speculator", "draft_model", "suffix", "custom_class", "eagle", "eagle3",
                "extract_hidden_states", "dflash", "ngram_gpu", "dspark", "deepseek_mtp", "dots3_note_mtp",
                "mimo_mtp", "mimo_v2_mtp", "glm4_moe_mtp", "glm4_moe_lite_mtp", "glm_ocr_mtp", "ernie_mtp",
                "nemotron_h_mtp", "exaone_moe_mtp", "exaone4_5_mtp", "qwen3_next_mtp", "qwen4_exp_mtp",
                "qwen3_5_mtp", "longcat_flash_mtp", "bailing_hybrid_v3_mtp", "minimax_m3_mtp", "bailing_hybrid_mtp",
                "mtp", "kimi_k3_mtp", "pangu_ultra_moe_mtp", "step3p5_mtp", "hy_v3_mtp", "hy_v4_mtp", "gemma4_mtp",
                "inkling_mtp", "glm5_next_mtp")


def _literal_error(field: str, value: str, allowed: tuple[str, ...]) -> str:
    opts = ", ".join(f"'{a}'" for a in allowed)
    return f"pydantic ValidationError: {field}: Input should be {opts} [type=literal_error, input_value='{value}']"


def first_failure(args: VllmArgs) -> str | None:
    """--dtype (ModelConfig), --kv-cache-dtype (CacheConfig), the speculative method (SpeculativeConfig)."""
    if args.dtype is not None and args.dtype not in MODEL_DTYPES:
        return _literal_error("dtype", args.dtype, MODEL_DTYPES)
    if args.kv_cache_dtype is not None and args.kv_cache_dtype not in CACHE_DTYPES:
        return _literal_error("cache_dtype", args.kv_cache_dtype, CACHE_DTYPES)
    s = args.speculative
    if s is not None and s.method and s.method not in SPEC_METHODS:
        return _literal_error("method", s.method, SPEC_METHODS)
    return None
