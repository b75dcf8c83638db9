"""The first stages of `plan_sglang`, in the engine's order: setup -> weights -> budget (the Mamba strategy and the KV
cell follow in `plan_slots.py`, the pools and the allocation sizes in `plan_alloc.py`). Each stage is a pure function
returning a frozen value; the formulas they call live in `formulas.py`."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from specbench.contracts import GIB
from specbench.engines import versions
from specbench.engines.sglang.args import SglangArgs
from specbench.engines.sglang.formulas import (
    SGLANG_RULE_SETS,
    Defaults,
    SpecSetup,
    Version,
    resolve_defaults,
    resolve_spec,
)
from specbench.engines.sglang.rules import SglangRules, rules_for
from specbench.engines.sglang.start_checks import derived_context_length
from specbench.specs.gpu import GpuSpec, context_overhead
from specbench.specs.header_weights import WEIGHTS_SOURCE, header_weight_bytes
from specbench.specs.int_values import int_group_value_bytes, marlin_fp8_value_bytes
from specbench.specs.model_types import ModelSpec
from specbench.specs.quant import Scheme, as_fp8_marlin, scheme_for_flag
from specbench.specs.weights import draft_model_bytes, mtp_draft_bytes, weight_bytes

# SGLang keeps the rotary cos/sin cache in fp32 on CUDA (layers/rotary_embedding/base.py@0.5.15.post1)
ROPE_ITEMSIZE = 4


def mxfp4_moe_pad(gpu: GpuSpec) -> tuple[int, int]:
    """(hidden, intermediate) alignment of MXFP4 routed experts by the MoE backend SGLang picks for gpt-oss
    (arg_groups/overrides.py::_gpt_oss_overrides@0.5.15.post1: sm100 -> flashinfer_mxfp4, sm120 -> marlin, else
    triton_kernel) as layers/quantization/mxfp4.py::Mxfp4MoEMethod.create_weights@0.5.15.post1 pads them:
    flashinfer on sm100: both to 256; marlin: intermediate 128, hidden 256; triton_kernels: intermediate 64."""
    if gpu.arch.startswith("sm10"):
        return (256, 256)
    if gpu.arch.startswith("sm12"):
        return (256, 128)
    return (1, 64)


# Free memory lost to the CUDA context (and NCCL at TP>1) before weights load: per GPU and TP in
# specs/gpu.py::OVERHEADS (`context_overhead`), each row with its source.

# Memory taken between `Load weight end` and pool sizing beyond the logged weights (workspaces, handles).
# Sources: the incident's two 0.5.12-era logs need 0.04 GiB (KV 87,061 / 11,893 tokens); the real 0.5.12.post1
# H200 boots (tests/data/sglang-0.5.12.post1/, all at --context-length 32768) behave as if 0.056 GiB is taken;
# 0.05 keeps both within 1.2 %. 0.5.15.post1 on the H200: with identical `Load weight end. avail mem=88.07 GB`,
# Qwen3.6-27B gets 175 Mamba slots at context 32,768 (A < 88.053 GiB at sizing) but 176 at context 4,096
# (A >= 88.053): the residue grows with the context length. Fit to both: 0.01 GiB + 0.9 KiB per context token
# (0.040 GiB at 32k, 0.014 GiB at 4k). 0.5.18+: not measured, taken as 0.5.15. The fixed 0.05 is the 0.5.12 row's
# `fixed_other_resident_gib` (rules.py).


def other_resident_gib(rules: SglangRules, context_len: int) -> float:
    if rules.fixed_other_resident_gib is not None:
        return rules.fixed_other_resident_gib
    return 0.01 + 0.9 * 1024 * context_len / GIB


# A measured weight size this far from the config's estimate is flagged (see `plan_weights`).
WEIGHT_MISMATCH = 0.15

EAGLE_FAMILY = ("EAGLE", "EAGLE3", "STANDALONE", "FROZEN_KV_MTP")
DFLASH_FAMILY = ("DFLASH", "DDTREE")


@dataclass(frozen=True)
class Measured:
    avail_before_load_gib: float | None = None
    weights_gib: float | None = None
    draft_weights_gib: float | None = None
    other_resident_gib: float | None = None


def era_of(version: Version) -> str:
    """The plan contract's `era` of a release: its rule row's name (rules.py)."""
    return rules_for(version).era


# ------------------------------------------------------------------------------------------------ 1. setup
@dataclass(frozen=True)
class Setup:
    """The targeted release, the TP layout, the speculative setup and the engine's defaults."""
    version_text: str
    version: Version
    rules: SglangRules           # the release line's rule row (rules.py)
    gpu: GpuSpec
    tp: int
    attn_tp: int
    spec: SpecSetup
    defaults: Defaults
    mem_fraction: float          # f
    context_len: int
    warnings: tuple[str, ...]
    notes: tuple[str, ...]


def resolve_setup(args: SglangArgs, m: ModelSpec, draft: ModelSpec | None, gpu: GpuSpec,
                  version_text: str) -> Setup:
    version, newer = versions.rule_set_for(version_text, SGLANG_RULE_SETS, "SGLang")
    tp = args.tp
    attn_tp = tp // (args.dp if args.enable_dp_attention else 1) or 1
    # head / KV-head divisibility is a start check (start_checks.py::check_divisibility): a failing plan
    warnings: list[str] = [newer] if newer else []
    notes: list[str] = []
    # flags as the targeted version spells them
    bad = flag_spelling_error(args, version)
    if bad:
        warnings.append(bad + "; planned with the flag's meaning, spell it as that release does")
    if "--mamba-scheduler-strategy" in args.flags_seen and (0, 5, 14) <= version < (0, 5, 23):
        notes.append("--mamba-scheduler-strategy is a deprecated alias of --mamba-radix-cache-strategy since 0.5.14")
    spec = resolve_spec(args, m, draft)
    if spec.unreleased:
        notes.append("DDTREE follows an unreleased SGLang PR (#29907): planned like DFLASH with budget+1 draft tokens")
    defaults = resolve_defaults(args, m, gpu, version)
    f = args.mem_fraction_static if args.mem_fraction_static is not None else defaults.mem_fraction_static
    ctx = args.context_length or derived_context_length(m.raw)
    return Setup(version_text, version, rules_for(version), gpu, tp, attn_tp, spec, defaults, f, ctx, tuple(warnings),
                 tuple(notes))


def flag_spelling_error(args: SglangArgs, version: Version) -> str | None:
    """argparse rejects a flag the targeted release does not have (server_args.py / arg_groups/fields/*.py). Only
    for a release past the newest flag list (cli_flags/): a release with its own list reports the flag as unknown
    (args.py) and needs no second warning."""
    if "--mamba-scheduler-strategy" in args.flags_seen and version >= (0, 5, 23):
        return ("SGLang 0.5.23 has no --mamba-scheduler-strategy (renamed --mamba-radix-cache-strategy in 0.5.14); the "
                "server would exit with 'unrecognized arguments'")
    return None


# ------------------------------------------------------------------------------------------------ 2. weights
@dataclass(frozen=True)
class Weights:
    """Target and draft weights per rank; `model` is the target as loaded (quantized online if asked)."""
    model: ModelSpec
    include_vision: bool
    estimate_gib: float
    gib: float                   # W
    source: str
    draft_gib: float             # Wd
    draft_source: str
    warnings: tuple[str, ...]
    notes: tuple[str, ...]


# What the Marlin repack of int-N group weights (AWQ / GPTQ / compressed-tensors wNa16: gptq_marlin_repack,
# awq_marlin_repack, awq_marlin_moe_repack in process_weights_after_loading@0.5.15.post1) leaves reserved in PyTorch's
# caching allocator beyond the created tensors, per byte of packed integer values. Measured, not read: fitted to the
# H200 boots tests/data/sglang-0.5.15.post1/qwen3_8b_{awq,gptq,w4a16,w4a16_asym}_mrr48.log (5.74/5.74/5.72/5.74 GB
# logged vs 5.699/5.699/5.674/5.699 GiB created: +1.3-1.4 % of 3.23 GiB of values) and qwen3_30b_a3b_awq_mrr48.log
# (15.80 vs 15.668: +0.95 % of 13.9 GiB); 1.1 % leaves each within 0.2 %. No allocator replay was made (unlike
# gpt-oss's MXFP4 residue, specs/weights.py), so other shapes may differ by a few tenths of a percent of the weights.
INT_MARLIN_ALLOCATOR_RESIDUE = 0.011


def plan_weights(args: SglangArgs, m: ModelSpec, draft: ModelSpec | None, s: Setup, measured: Measured) -> Weights:
    warnings: list[str] = []
    notes: list[str] = []
    include_vision = m.is_multimodal and not args.language_only
    if args.quantization and m.quant.method is None:
        # --quantization on an unquantized checkpoint quantizes online at load (model_config.py::_verify_quantization)
        online = scheme_for_flag(args.quantization)
        if online is not None:
            m = replace(m, quant=online)
            notes.append(f"weights planned as {online.label}: --quantization {args.quantization} quantizes at load")
        elif args.quantization.lower() != "unquant":
            warnings.append(f"--quantization {args.quantization} on an unquantized checkpoint is not modelled: the "
                            "weights are planned unquantized")
    fp8_marlin = bool(m.quant.method) and "fp8" in m.quant.label.lower() and s.gpu.arch in ("sm80", "sm86", "sm87")
    if fp8_marlin:
        # no FP8 tensor cores before SM89: layers/quantization/fp8.py::Fp8LinearMethod@0.5.15.post1 takes the
        # weight-only Marlin path (specs/quant.py::as_fp8_marlin: block scales become 16-bit group scales)
        m = replace(m, quant=as_fp8_marlin(m.quant))
        notes.append("FP8 on this GPU (no FP8 tensor cores) runs as weight-only FP8 Marlin: 1 byte per weight, block "
                     "scales as 16-bit groups of 128, the Marlin repack's allocator residue, 16-bit activations")
    pad = mxfp4_moe_pad(s.gpu) if m.quant.method == "mxfp4" else (1, 1)
    swz = m.quant.method == "mxfp4" and s.gpu.arch.startswith("sm9")  # triton_kernel backend: Hopper layouts
    marlin = s.gpu.vendor == "nvidia"  # the Marlin kernels (ROCm takes other int4 paths)
    marlin_values = int_group_value_bytes(m, s.tp, include_vision=include_vision) + (
        marlin_fp8_value_bytes(m, s.tp, include_vision=include_vision) if fp8_marlin else 0)
    # the FP8 Marlin path repacks with the same gptq_marlin_repack kernel (num_bits=8): the int-N residue is applied
    # to its values too, not boot-checked for FP8
    residue = INT_MARLIN_ALLOCATOR_RESIDUE * marlin_values / GIB \
        if marlin else 0.0
    w_est = weight_bytes(m, s.tp, include_vision=include_vision, moe_pad=pad, rope_itemsize=ROPE_ITEMSIZE,
                         mxfp4_hopper_swizzle=swz) / GIB + residue
    if measured.weights_gib is not None:
        W, w_src = measured.weights_gib, "measured"
        # the estimate is within 1 % for every logged checkpoint (README of tests/data/sglang-*); the quantization
        # schemes differ by 1.8x (fp8 vs bf16) to 3.5x (NVFP4 vs bf16), so a 15 % gap means another checkpoint
        if abs(W - w_est) / max(W, 1e-9) > WEIGHT_MISMATCH:
            warnings.append(f"measured weights {W:.2f} GiB differ from the {m.quant.label} estimate {w_est:.2f} GiB "
                            f"by {abs(W - w_est) / W:.0%}: is the checkpoint the quantization you think?")
    elif (hw := header_weight_bytes(m, s.tp, include_vision=include_vision)) is not None:
        W, w_src = hw / GIB + residue, WEIGHTS_SOURCE
    else:
        W, w_src = w_est, f"estimated from config ({m.quant.label})"
    hd = header_weight_bytes(draft, s.tp, as_draft=True) if draft is not None and draft is not m else None
    if measured.draft_weights_gib is not None:
        Wd, wd_src = measured.draft_weights_gib, "measured"
    elif hd is not None and s.spec.algorithm in EAGLE_FAMILY + DFLASH_FAMILY:
        Wd, wd_src = hd / GIB, WEIGHTS_SOURCE
    else:
        Wd, wd_src = _draft_estimate_gib(m, draft, s), "estimated from config" if s.spec.algorithm else "none"
    return Weights(m, include_vision, w_est, W, w_src, Wd, wd_src, tuple(warnings), tuple(notes))


def _draft_estimate_gib(m: ModelSpec, draft: ModelSpec | None, s: Setup) -> float:
    """The drafter as SGLang allocates it, its own rope cache included (a distinct rope key: the drafter's
    max_position_embeddings, raised to the context length when SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN lets
    configs/model_config.py::_derive_context_length override it)."""
    if draft is not None and s.spec.algorithm in EAGLE_FAMILY + DFLASH_FAMILY:
        pos = max(int(draft.max_position_embeddings or 0), s.context_len)
        return draft_model_bytes(draft, s.tp, rope_itemsize=ROPE_ITEMSIZE, max_positions=pos) / GIB
    if s.spec.algorithm in EAGLE_FAMILY:
        return mtp_draft_bytes(m, s.tp) / GIB  # shares the target's rope (same get_rope key)
    return 0.0


# ------------------------------------------------------------------------------------------------ 3. budget
@dataclass(frozen=True)
class Budget:
    """B (free before weights), A (free at pool sizing), the slack B·(1−f) and the rest R for the pools."""
    before_load_gib: float       # B
    before_load_source: str
    context_overhead_gib: float  # GPU total - B as modelled (None-like 0.0 when B was measured)
    context_overhead_source: str
    draft_before_sizing: bool
    at_sizing_gib: float         # A
    slack_gib: float
    rest_gib: float              # R
    dflash_kv_copy_gib: float = 0.0  # the DFLASH worker's copy of its drafter's K/V weights (taken from A)


def dflash_kv_weight_copy_bytes(draft: ModelSpec | None, s: Setup, gpu: GpuSpec) -> int:
    """What the DFLASH worker allocates after the drafter's `Load weight end` and before the target pool is sized.

    scheduler.py::Scheduler.init_model_worker@0.5.15.post1 builds the draft worker (maybe_init_draft_worker) before
    init_memory_pools; speculative/dflash_worker_v2.py::DFlashWorkerV2.__init__ -> _init_fused_kv_helper@0.5.15.post1
    builds speculative/triton_ops/fused_kv_materialize.py::FusedKVMaterializeHelper.__init__@0.5.15.post1, which keeps
    `flat_kv_weight_t = torch.stack(kv_weights).reshape(n_layers*2*kv_size, -1).transpose(0, 1).contiguous()`: a
    copy of every draft layer's K and V rows of qkv_proj, n_layers x 2*kv_heads_per_rank*head_dim x hidden in the
    drafter's dtype (kv_heads_per_rank = max(1, H_kv // tp): models/dflash.py::DFlashAttention.__init__@0.5.15.post1).
    The torch.stack temporary is freed and handed back by get_available_gpu_memory's empty_cache before
    model_runner_kv_cache_mixin.py::_profile_available_bytes@0.5.15.post1 reads the free memory; k_norm_weights
    ([n_layers, head_dim]) and eps are a few KiB. The rope rows `_ensure_rope_cache(context_len + block - 1)` may add
    were already reserved at load (utils/common.py::reserve_rope_cache_for_long_sequences@0.5.15.post1), inside the
    logged draft weights.
    Only where the fused path is taken: CUDA or ROCm, a drafter class that supports it (DFlashDraftModel;
    DFlashLagunaForCausalLM sets supports_fused_context_kv = False), every qkv_proj unquantized and without bias
    (speculative/dflash_utils.py::can_dflash_use_fused_qkv_proj@0.5.15.post1), neox-style rope. Checked on the
    recorded boots: Qwen3.6-27B + its SpecForge 5-layer drafter (100 MiB at TP 1, 50 MiB per rank at TP 2) and
    Qwen3-8B + its drafter (80 MiB), tests/golden/test_sglang_dflash_kv_copy.py."""
    # 0.5.13 (planned by 0.5.15's row) still loads the drafter after the pool is sized, as plan_budget's draft_before
    if not (s.rules.dflash_kv_weight_copy and s.spec.algorithm in DFLASH_FAMILY and draft is not None
            and s.version >= (0, 5, 14)):
        return 0
    if draft.architecture == "DFlashLagunaForCausalLM" or draft.quant.method is not None or draft.attention_bias:
        return 0
    raw = draft.raw or {}
    if not bool(raw.get("rope_is_neox_style", raw.get("is_neox_style", True))):
        return 0
    if gpu.vendor not in ("nvidia", "amd") or draft.num_layers <= 0:
        return 0
    kv_heads = max(1, draft.num_kv_heads // max(1, s.tp))
    itemsize = Scheme.dense(draft.dtype).bytes_per_param
    return int(draft.num_layers * 2 * kv_heads * draft.head_dim * draft.hidden_size * itemsize)


def plan_budget(args: SglangArgs, gpu: GpuSpec, s: Setup, w: Weights, measured: Measured,
                draft: ModelSpec | None = None) -> Budget:
    tp = s.tp
    ov = context_overhead(gpu, tp)
    if measured.avail_before_load_gib is not None:
        B, b_src = measured.avail_before_load_gib, "measured"
        ov_gib, ov_src = gpu.total_gib - B, "measured (GPU total − the given avail before load)"
    else:
        B = gpu.total_gib - ov.gib
        b_src = "modelled: GPU total − CUDA context" + (" − NCCL" if tp > 1 else "")
        ov_gib, ov_src = ov.gib, ov.source
    # from 0.5.14 the draft weights load BEFORE the pools are sized (<= 0.5.13: after)
    draft_before = s.version >= (0, 5, 14)
    other = measured.other_resident_gib if measured.other_resident_gib is not None \
        else other_resident_gib(s.rules, s.context_len)
    # the DFLASH worker's copy of its drafter's K/V weights, made before the pool is sized (dflash_kv_weight_copy_bytes)
    copy = dflash_kv_weight_copy_bytes(draft, s, gpu) / GIB
    A = B - w.gib - (w.draft_gib if draft_before else 0.0) - other - copy
    slack = B * (1 - s.mem_fraction)
    # kv_cache_configurator.py::mm_runtime_reservation_gb (0.5.18+): SGLANG_VLM_CACHE_SIZE_MB, default 100 MB, kept
    # back for multimodal models (the feature-cache term only applies to cuda_ipc/cuda_vmm transports)
    mm = s.rules.vlm_cache_reserve_gib if (w.model.is_multimodal and w.include_vision) else 0.0
    return Budget(B, b_src, round(ov_gib, 3), ov_src, draft_before, A, slack, A - slack - mm, copy)


def no_memory_error(s: Setup, b: Budget) -> str | None:
    """R <= 0 before the pools: 0.5.14+ raise a ValueError naming the weights (<= 0.5.12 fail in the pools)."""
    if b.rest_gib > 0 or not s.rules.no_memory_checked_first:
        return None
    A, B = b.at_sizing_gib, b.before_load_gib
    need = (1 - A / B)
    sug = math.ceil(need * 1000) / 1000
    return (f"ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static="
            f"{s.mem_fraction}. Raise --mem-fraction-static above {sug:.3f} (minimum viable = 1 - available/pre = "
            f"1 - {A:.2f}/{B:.2f}). If using speculative decoding, draft weights are now counted.")
