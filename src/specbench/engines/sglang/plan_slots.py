"""Stages 4 and 5 of `plan_sglang`, after the budget: the units the pools are sized in. The hybrid model's Mamba
radix-cache strategy with its slots per request and its state per slot (or the engine's refusal of a configuration
before it sizes any pool), and the KV cell: bytes per token slot, the drafter's share folded in, split into a full and
a sliding-window pool where the model has one. Each stage is a pure function returning a frozen value; the formulas
they call live in `formulas.py`."""

from __future__ import annotations

import math
from dataclasses import dataclass

from specbench.engines.sglang.args import SglangArgs
from specbench.engines.sglang.formulas import (
    MambaState,
    draft_kv_cell_bytes,
    dtype_bytes,
    kv_cell_bytes,
    kv_dtype,
    kv_heads_per_rank,
    mamba_ratio,
    mamba_state,
)
from specbench.engines.sglang.plan_stages import DFLASH_FAMILY, EAGLE_FAMILY, Setup
from specbench.errors import FlagError
from specbench.specs.model_types import ModelSpec

# Targets whose EAGLE/NEXTN draft path defaults to the target checkpoint (arg_groups/speculative_hook.py
# ::_handle_eagle_family); only then (or with an explicit --speculative-draft-model-path) is the draft's KV folded
# into the cell (model_runner.py::ModelRunner.__init__ 0.5.15 / spec_aux_hidden_state.py 0.5.23).
_DRAFT_PATH_DEFAULT_ARCHS = ("DeepseekV32ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV4ForCausalLM",
                             "Glm4MoeForCausalLM", "Glm4MoeLiteForCausalLM", "GlmMoeDsaForCausalLM",
                             "BailingMoeForCausalLM", "BailingMoeV2ForCausalLM", "BailingMoeV2_5ForCausalLM",
                             "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration", "HYV3ForCausalLM",
                             "HYV4ForCausalLM", "Qwen4ExpForConditionalGeneration")

# Hybrid archs whose `auto` strategy resolves to extra_buffer (0.5.14+, overrides.py::_MAMBA_EXTRA_BUFFER_ARCHS).
_EXTRA_BUFFER_ARCHS = ("Qwen3Next", "Qwen3_5", "NemotronH", "FalconH1", "GraniteMoeHybrid")


# ------------------------------------------------------------------------------------------------ 4. Mamba strategy
@dataclass(frozen=True)
class Mamba:
    """The hybrid model's radix-cache strategy, slots per request and per-slot state (all None when not hybrid)."""
    strategy: str | None = None
    ratio: int | None = None
    state: MambaState | None = None


@dataclass(frozen=True)
class Refusal:
    """A configuration the engine refuses before it sizes any pool; `mamba` is as far as the choice got."""
    error: str
    kind: str
    mamba: Mamba = Mamba()


def choose_mamba(args: SglangArgs, m: ModelSpec, s: Setup) -> Mamba | Refusal:
    overlap = _overlap_schedule(args, s)
    if m.architecture.startswith("NemotronH") and (args.attention_backend or "").lower() == "triton" \
            and s.version >= (0, 5, 12):
        return Refusal(  # server_args.py::_handle_model_specific_adjustments
            "AssertionError: NemotronHForCausalLM does not support triton attention backend,as the first layer might "
            "not be an attention layer", "unsupported_backend")
    if not m.linear_layers:
        return Mamba()
    strategy = _mamba_strategy(args, m, s, overlap)
    if strategy == "no_buffer" and s.version >= (0, 5, 14):
        overlap = False  # no_buffer forces disable_overlap_schedule (overrides.py)
    if s.rules.spec_refuses_no_buffer_radix and s.spec.algorithm and strategy == "no_buffer" \
            and not args.disable_radix_cache:
        return Refusal(
            f"ValueError: Speculative decoding for {m.architecture} is not compatible with radix cache when using "
            f"--mamba-scheduler-strategy no_buffer.To use radix cache with speculative decoding, please use "
            f"--mamba-scheduler-strategy extra_buffer and set SGLANG_ENABLE_SPEC_V2=1.", "flag_conflict",
            Mamba(strategy))
    return Mamba(strategy, mamba_ratio(args, strategy, overlap), mamba_state(m, s.tp, args.mamba_ssm_dtype))


def _overlap_schedule(args: SglangArgs, s: Setup) -> bool:
    overlap = not args.disable_overlap_schedule
    if s.rules.dflash_without_overlap and s.spec.algorithm in DFLASH_FAMILY:
        overlap = False  # server_args.py (0.5.12): DFLASH always runs without the overlap scheduler
    if s.rules.eagle_overlap_needs_spec_v2 and s.spec.algorithm in ("EAGLE", "EAGLE3", "STANDALONE"):
        env = dict(args.env)
        spec_v2 = env.get("SGLANG_ENABLE_SPEC_V2", "1" if s.version >= (0, 5, 12) else "0").lower() in ("1", "true")
        overlap = overlap and spec_v2
    return overlap


def _mamba_strategy(args: SglangArgs, m: ModelSpec, s: Setup, overlap: bool) -> str:
    req = (args.mamba_strategy or "auto").lower()
    if req != "auto":
        return req
    if s.version <= (0, 5, 13):  # `auto` was no_buffer up to 0.5.13 (server_args.py@0.5.12.post1 / 0.5.13)
        return "no_buffer"
    arch_ok = m.architecture.startswith(_EXTRA_BUFFER_ARCHS)
    return "extra_buffer" if arch_ok and (overlap or (args.page_size or 1) > 1) else "no_buffer"


# ------------------------------------------------------------------------------------------------ 5. KV cell
@dataclass(frozen=True)
class KvCell:
    """Bytes per token slot: the target's cell plus the draft's share folded in."""
    dtype: str
    target: int                  # c
    draft: int
    total: int
    layers: int                  # L, the target's attention layers
    swa_ratio: float | None = None   # hybrid SWA pool: swa_layer_tokens = full_layer_tokens x ratio


# configs/model_config.py::is_hybrid_swa_model@0.5.15.post1 (the archs with a first-class SWA pool; Gemma2/3 and
# Exaone disable it in arg_groups/overrides.py); --swa-full-tokens-ratio default 0.8 (server_args.py@0.5.15.post1)
HYBRID_SWA_ARCHS = ("GptOssForCausalLM", "MiMoV2FlashForCausalLM", "MiMoV2ForCausalLM", "Step3p5ForCausalLM",
                    "Gemma4ForCausalLM", "Gemma4ForConditionalGeneration", "Llama4ForConditionalGeneration")
SWA_FULL_TOKENS_RATIO = 0.8


def swa_cell(m: ModelSpec, attn_tp: int, kvd: str, draft_full_layers: int = 0, *,
             ratio: float | None = None, disabled: bool = False) -> tuple[int, float] | None:
    """model_executor/pool_configurator.py::HybridSWAPoolConfigurator.__init__@0.5.15.post1: bytes per token of
    max_total_num_tokens = full_per_token·(full layers + EAGLE draft layers) + ratio·swa_per_token·swa layers
    (the SWA pool holds ratio x the full pool's tokens; `ratio` = --swa-full-tokens-ratio). None when the model
    has no hybrid SWA pool, or `--disable-hybrid-swa-memory` (configs/model_config.py::_derive_hybrid_model
    @0.5.15.post1: is_hybrid_swa needs `not disable_hybrid_swa_memory`; every layer then holds full tokens)."""
    if m.architecture not in HYBRID_SWA_ARCHS or not m.sliding_layers or disabled:
        return None
    ns = len(m.sliding_layers)
    nf = len(m.attention_layers) - ns
    per = kv_heads_per_rank(m, attn_tp) * (m.head_dim + m.v_head_dim) * int(dtype_bytes(kvd))
    r = SWA_FULL_TOKENS_RATIO if ratio is None else ratio
    cell = per * (nf + draft_full_layers) + r * per * ns if nf else per * ns + per * draft_full_layers
    return int(math.ceil(cell)), (r if nf else 1.0)


def kv_cell(args: SglangArgs, m: ModelSpec, draft: ModelSpec | None, s: Setup) -> KvCell:
    spec, rules = s.spec, s.rules
    kvd = kv_dtype(args, m)
    c = kv_cell_bytes(m, s.attn_tp, kvd)
    L = len(m.attention_layers)
    draft_c = 0
    if spec.algorithm in DFLASH_FAMILY and draft is not None and L > 0:
        if rules.dflash_draft_cell == "own_dtype":
            dkv = args.speculative_draft_kv_cache_dtype or kvd
            draft_c = draft_kv_cell_bytes(draft, s.attn_tp, dkv)
            c_total = c + draft_c
        else:  # dflash_utils.py::scale_kv_cell_size_per_token_for_dflash (layer-scaled, ceil)
            c_total = (c * (L + spec.draft_layers) + L - 1) // L
            draft_c = c_total - c
    elif spec.algorithm in EAGLE_FAMILY and rules.eagle_draft_cell != "none" \
            and s.version >= (0, 5, 14) and L > 0 \
            and (args.speculative_draft_model_path or m.architecture in _DRAFT_PATH_DEFAULT_ARCHS):
        if rules.eagle_draft_cell == "floor_share":
            draft_c = (c * spec.draft_layers) // L  # c += floor(c·Ld/L)
        else:
            draft_c = int(c * (1 + spec.draft_layers / L)) - c  # pool_configurator.py (0.5.15)
        c_total = c + draft_c
    else:
        c_total = c
    if c_total <= 0 and not (rules.sizes_kv_less_models and m.linear_layers):
        raise FlagError(f"{m.name}: no KV-holding layers (pure recurrent models are not planned for SGLang "
                        f"{s.version_text}; 0.5.18+ sizes them: engines/sglang/pools.py::_kv_tokens)")
    swa = swa_cell(m, s.attn_tp, kvd, spec.draft_layers if draft_c and spec.algorithm in EAGLE_FAMILY else 0,
                   ratio=args.swa_full_tokens_ratio, disabled=args.disable_hybrid_swa_memory)
    if swa is not None and s.version >= (0, 5, 15):
        return KvCell(kvd, c, draft_c, swa[0], L, swa[1])
    return KvCell(kvd, c, draft_c, c_total, L)
