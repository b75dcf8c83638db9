"""vLLM's non-memory start checks: config validation that ends a boot before any weight loads.

Read from vLLM 0.32.0 (config/model.py, config/cache.py, config/speculative.py: pydantic `Literal` types, so a
value outside them fails `EngineArgs.create_engine_config` with a ValidationError). Each check returns the
engine's own complaint (or None); `first_failure` runs them in the order vLLM builds its configs.
"""

from __future__ import annotations

from specbench.engines.vllm.args import VllmArgs
from specbench.engines.vllm.quant_checks import quantization_failure
from specbench.specs import assumed as A
from specbench.specs.model import draft_vocab_warning, moe_without_experts_warning
from specbench.specs.model_types import ModelSpec

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


# -- the model's own config and the drafter against its target (#23). Read from vLLM 0.32.0.

# model_executor/models/registry.py::_SPECULATIVE_DECODING_MODELS@0.32.0: the EAGLE / EAGLE3 draft classes
EAGLE_DRAFT_CLASSES = ("EagleCohereForCausalLM", "EagleLlamaForCausalLM", "EagleLlama4ForCausalLM",
                       "EagleMiniCPMForCausalLM", "EagleMistralForCausalLM", "EagleMistralLarge3ForCausalLM",
                       "EagleDeepSeekMTPModel", "Eagle3LlamaForCausalLM", "Eagle3MiniMaxM2ForCausalLM",
                       "LlamaForCausalLMEagle3", "Eagle3Qwen3vlForCausalLM", "Eagle3Qwen3ForCausalLM",
                       "Eagle3DeepseekV2ForCausalLM", "Eagle3DeepseekV3ForCausalLM")


def eagle_class(method: str, arch: str) -> str:
    """transformers_utils/configs/eagle.py::EAGLEConfig.__init__@0.32.0: the class name vLLM looks up for a drafter
    architecture (`Eagle` / `Eagle3` prefixed unless the name already carries it)."""
    if method == "eagle":
        return arch if arch.startswith("Eagle") else f"Eagle{arch}"
    return arch if arch.startswith("Eagle3") or arch.endswith("Eagle3") else f"Eagle3{arch}"


def _model_failures(args: VllmArgs, m: ModelSpec, draft: ModelSpec | None) -> list[tuple[tuple[str, ...], str]]:
    """What vLLM refuses in the model's own config or the drafter's, before any weight loads, with the field groups
    each reads (specs/assumed.py):
    - --quantization against the checkpoint's quantization (quant_checks.py);
    - AWQ of other than 4 bits: model_executor/layers/quantization/auto_awq.py::AWQMarlinConfig.__init__@0.32.0
      (TYPE_MAP holds 4 only);
    - an EAGLE / EAGLE3 drafter whose class vLLM has none of: model_executor/models/registry.py::
      _ModelRegistry._raise_for_unsupported@0.32.0."""
    from specbench.specs.quant import awq_bits  # the config's own keys, read alike by both engines

    out: list[tuple[tuple[str, ...], str]] = []
    quant = quantization_failure(args.quantization, m.quant.method,
                                 allow_deprecated="--allow-deprecated-quantization" in args.flags_seen)
    if quant is not None:
        out.append(((A.QUANTIZATION,), quant))
    bits = awq_bits(m.raw)
    if bits is not None and bits != 4:
        out.append(((A.QUANTIZATION,), f"ValueError: Unsupported num_bits = {bits}. Supported: 4. For 8-bit AWQ, use "
                    "Marlin backend by setting backend='awq:marlin' or backend='marlin'."))
    s = args.speculative
    if draft is not None and s is not None and s.kind in ("eagle", "eagle3"):
        cls = eagle_class(s.kind, draft.architecture)
        if cls not in EAGLE_DRAFT_CLASSES:
            out.append(((A.ARCHITECTURE,), f"ValueError: Model architectures ['{cls}'] are not supported for now. "
                        f"(the drafter's {draft.architecture} has no {s.kind.upper()} draft class in vLLM)"))
    return out


def model_outcome(args: VllmArgs, m: ModelSpec, draft: ModelSpec | None) -> tuple[str | None, tuple[str, ...]]:
    """(the first model failure that stands, the failures that rest on a stand-in's assumption: warnings)."""
    assumed: list[str] = []
    for reads, error in _model_failures(args, m, draft):
        warning = A.demoted(error, reads, (m, draft))
        if warning is None:
            return error, tuple(assumed)
        assumed.append(warning)
    return None, tuple(assumed)


def model_failure(args: VllmArgs, m: ModelSpec, draft: ModelSpec | None) -> str | None:
    return model_outcome(args, m, draft)[0]


def model_warnings(args: VllmArgs, m: ModelSpec, draft: ModelSpec | None) -> tuple[str, ...]:
    """What vLLM serves but the operator should hear:
    - MoE top-k 0: no config check reads it (only FlashInfer's MoE finalize raises `top_k must be positive.`,
      model_executor/layers/fused_moe/moe_output.py@0.32.0);
    - an EAGLE drafter of another width keeps its own embedding (v1/spec_decode/llm_base_proposer.py@0.32.0 logs
      "Target embedding dim (%d) differs from draft embedding dim (%d). Keeping separate embedding weights.");
    - a drafter vocabulary that is not the target's."""
    out = []
    if m.moe is not None and m.moe.experts_per_tok <= 0:
        out.append(f"the config routes each token to {m.moe.experts_per_tok} experts (num_experts_per_tok): no vLLM "
                   "start check reads it; every MoE layer adds nothing; the config is wrong")
    if draft is not None and draft.hidden_size != m.hidden_size:
        out.append(f"Target embedding dim ({m.hidden_size}) differs from draft embedding dim ({draft.hidden_size}). "
                   "Keeping separate embedding weights. (vLLM serves it; the drafter must bring its own embedding)")
    if (no_experts := moe_without_experts_warning(m)) is not None:
        out.append(no_experts)
    vocab = draft_vocab_warning(m, draft)
    return (*out, vocab) if vocab else tuple(out)
