"""SGLang startup memory plan: inputs (args, model, draft, GPU, measured values) -> `SglangPlan`. Pure.

Order of events (sglang-memory.md §1, verified in managers/scheduler.py / model_runner.py of each wheel):
B = free memory before weights (`Load weight begin. avail mem=B`); target weights W load; from 0.5.14 the
draft weights load BEFORE the pools are sized (<= 0.5.13: after); then R = A − B·(1−f) with A the free memory
at sizing time; the Mamba pool takes its share; the KV pool gets the rest.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any

from specbench.engines.sglang.args import SglangArgs
from specbench.errors import FlagError
from specbench.engines.sglang import formulas as C
from specbench.engines import versions
from specbench.engines.sglang.pools import PoolInputs, Pools, size_pools
from specbench.specs.gpu import GpuSpec
from specbench.specs.model import ModelSpec
from specbench.specs.quant import scheme_for_flag
from specbench.specs.weights import draft_model_bytes, mtp_draft_bytes, weight_bytes

GIB = float(1 << 30)

# Free memory lost to the CUDA context (and NCCL at TP>1) before weights load.
# Sources: the incident log (RTX PRO 6000: 97,887 MiB = 95.59 GiB total, `Load weight begin. avail mem=94.24 GB`)
# gives 1.35 GiB at TP1; the H200 boots (140.40 GiB total) give 139.13 at TP1 (1.27 GiB) and 138.28 at TP2, so
# TP>1 adds 0.85 GiB of NCCL / custom all-reduce buffers (tests/data/sglang-0.5.15.post1/q36_27b_tp2_*.log).
CONTEXT_OVERHEAD_GIB = 1.35
NCCL_OVERHEAD_GIB = 0.85

# Memory taken between `Load weight end` and pool sizing beyond the logged weights (workspaces, handles).
# Sources: the incident's two 0.5.12-era logs need 0.04 GiB (KV 87,061 / 11,893 tokens); the real 0.5.12.post1
# H200 boots (tests/data/sglang-0.5.12.post1/, all at --context-length 32768) behave as if 0.056 GiB is taken;
# 0.05 keeps both within 1.2 %. 0.5.15.post1 on the H200: with identical `Load weight end. avail mem=88.07 GB`,
# Qwen3.6-27B gets 175 Mamba slots at context 32,768 (A < 88.053 GiB at sizing) but 176 at context 4,096
# (A >= 88.053): the residue grows with the context length. Fit to both: 0.01 GiB + 0.9 KiB per context token
# (0.040 GiB at 32k, 0.014 GiB at 4k). 0.5.18+: not measured, taken as 0.5.15.
OTHER_RESIDENT_GIB = {"v0512": 0.05}


def other_resident_gib(era: str, context_len: int) -> float:
    if era in OTHER_RESIDENT_GIB:
        return OTHER_RESIDENT_GIB[era]
    return 0.01 + 0.9 * 1024 * context_len / GIB


# A measured weight size this far from the config's estimate is flagged (see the check in plan_sglang).
WEIGHT_MISMATCH = 0.15

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


@dataclass(frozen=True)
class Measured:
    avail_before_load_gib: float | None = None
    weights_gib: float | None = None
    draft_weights_gib: float | None = None
    other_resident_gib: float | None = None


@dataclass(frozen=True)
class SglangPlan:
    status: str
    error: str | None
    error_kind: str | None
    engine_version: str
    era: str
    gpu: str
    gpu_total_gib: float
    tp: int
    mem_fraction_static: float
    mem_fraction_defaulted: bool
    context_len: int
    avail_before_load_gib: float
    avail_before_load_source: str
    weights_gib: float
    weights_source: str
    weights_estimate_gib: float
    draft_weights_gib: float
    draft_weights_source: str
    draft_loaded_before_sizing: bool
    avail_at_sizing_gib: float
    slack_gib: float
    rest_gib: float
    kv_dtype: str
    kv_cell_bytes: int
    kv_tokens: int
    k_size_gib: float
    v_size_gib: float
    draft_k_size_gib: float | None
    max_mamba_cache_size: int | None
    mamba_per_slot_bytes: int | None
    mamba_ratio: int | None
    mamba_strategy: str | None
    mamba_full_memory_ratio: float | None
    conv_state_gib: float | None
    ssm_state_gib: float | None
    intermediate_ssm_state_gib: float | None
    intermediate_conv_window_gib: float | None
    spec_scratch_gib: float
    spec_scratch_requests: int
    spec_algorithm: str | None
    draft_tokens: int
    max_running_requests: int
    requested_max_running_requests: int | None
    chunked_prefill_size: int
    cuda_graph_max_bs: int
    graph_reserve_gib: float
    warnings: tuple[str, ...]
    notes: tuple[str, ...]
    ignored_flags: tuple[str, ...]
    log_lines: tuple[str, ...]
    weights_quant_label: str

    def contract(self) -> dict[str, Any]:
        """The keys of ARCHITECTURE.md's plan contract (plus extras)."""
        d = asdict(self)
        out = {
            "status": self.status, "error": self.error, "engine": "sglang", "engine_version": self.engine_version,
            "mem_fraction_static": self.mem_fraction_static, "weights_gib": round(self.weights_gib, 3),
            "draft_weights_gib": round(self.draft_weights_gib, 3), "kv_tokens": self.kv_tokens,
            "k_size_gib": round(self.k_size_gib, 2), "v_size_gib": round(self.v_size_gib, 2),
            "max_mamba_cache_size": self.max_mamba_cache_size,
            "conv_state_gib": _r(self.conv_state_gib), "ssm_state_gib": _r(self.ssm_state_gib),
            "intermediate_ssm_state_gib": _r(self.intermediate_ssm_state_gib),
            "max_running_requests": self.max_running_requests,
        }
        for k, v in d.items():
            if k not in out:
                out[k] = list(v) if isinstance(v, tuple) else v
        return out


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


def era_of(version: C.Version) -> str:
    if version <= (0, 5, 12):
        return "v0512"
    if version <= (0, 5, 17):
        return "v0515"
    return "v0523"


def plan_sglang(args: SglangArgs, m: ModelSpec, draft: ModelSpec | None, gpu: GpuSpec, version_text: str,
                measured: Measured = Measured()) -> SglangPlan:
    version, newer = versions.rule_set_for(version_text, C.SGLANG_RULE_SETS, "SGLang")
    era = era_of(version)
    tp = args.tp
    attn_tp = tp // (args.dp if args.enable_dp_attention else 1) or 1
    _check_divisibility(m, tp, attn_tp)
    warnings: list[str] = [newer] if newer else []
    notes: list[str] = []

    # flags as the targeted version spells them
    bad = _flag_spelling_error(args, version)
    if bad:
        warnings.append(bad + "; planned with the flag's meaning, spell it as that release does")
    if "--mamba-scheduler-strategy" in args.flags_seen and (0, 5, 14) <= version:
        notes.append("--mamba-scheduler-strategy is a deprecated alias of --mamba-radix-cache-strategy since 0.5.14")
    spec = C.resolve_spec(args, m, draft)
    if spec.unreleased:
        notes.append("DDTREE follows an unreleased SGLang PR (#29907): planned like DFLASH with budget+1 draft tokens")
    defaults = C.resolve_defaults(args, m, gpu, version)
    f = args.mem_fraction_static if args.mem_fraction_static is not None else defaults.mem_fraction_static
    ctx = args.context_length or int(m.max_position_embeddings or 4096)

    # ---- B: free before weights
    if measured.avail_before_load_gib is not None:
        B, b_src = measured.avail_before_load_gib, "measured"
    else:
        B = gpu.total_gib - CONTEXT_OVERHEAD_GIB - (NCCL_OVERHEAD_GIB if tp > 1 else 0.0)
        b_src = "modelled: GPU total − CUDA context" + (" − NCCL" if tp > 1 else "")

    # ---- weights
    include_vision = m.is_multimodal and not args.language_only
    if args.quantization and m.quant.method is None:
        # --quantization on an unquantized checkpoint quantizes online at load (model_config.py::_verify_quantization)
        online = scheme_for_flag(args.quantization)
        if online is not None:
            m = replace(m, quant=online)
            notes.append(f"weights planned as {online.label}: --quantization {args.quantization} quantizes at load")
    w_est = weight_bytes(m, tp, include_vision=include_vision) / GIB
    if measured.weights_gib is not None:
        W, w_src = measured.weights_gib, "measured"
        # the estimate is within 1 % for every logged checkpoint (README of tests/data/sglang-*); the quantization
        # schemes differ by 1.8x (fp8 vs bf16) to 3.5x (NVFP4 vs bf16), so a 15 % gap means another checkpoint
        if abs(W - w_est) / max(W, 1e-9) > WEIGHT_MISMATCH:
            warnings.append(f"measured weights {W:.2f} GiB differ from the {m.quant.label} estimate {w_est:.2f} GiB "
                            f"by {abs(W - w_est) / W:.0%}: is the checkpoint the quantization you think?")
    else:
        W, w_src = w_est, f"estimated from config ({m.quant.label})"
    wd_est = 0.0
    if spec.algorithm in ("EAGLE", "EAGLE3", "STANDALONE", "FROZEN_KV_MTP"):
        wd_est = (draft_model_bytes(draft, tp) if draft is not None else mtp_draft_bytes(m, tp)) / GIB
    elif spec.algorithm in ("DFLASH", "DDTREE") and draft is not None:
        wd_est = draft_model_bytes(draft, tp) / GIB
    if measured.draft_weights_gib is not None:
        Wd, wd_src = measured.draft_weights_gib, "measured"
    else:
        Wd, wd_src = wd_est, "estimated from config" if spec.algorithm else "none"
    draft_before = version >= (0, 5, 14)
    other = measured.other_resident_gib if measured.other_resident_gib is not None else other_resident_gib(era, ctx)
    A = B - W - (Wd if draft_before else 0.0) - other
    slack = B * (1 - f)
    # kv_cache_configurator.py::mm_runtime_reservation_gb (0.5.18+): SGLANG_VLM_CACHE_SIZE_MB, default 100 MB, kept
    # back for multimodal models (the feature-cache term only applies to cuda_ipc/cuda_vmm transports)
    mm = 100 / 1024 if (m.is_multimodal and include_vision and era == "v0523") else 0.0
    R = A - slack - mm

    def budget() -> dict[str, Any]:
        """The fields every plan states, failing or not: the inputs and the memory budget before the pools."""
        return dict(
            engine_version=version_text, era=era, gpu=gpu.name, gpu_total_gib=round(gpu.total_gib, 2), tp=tp,
            mem_fraction_static=f, mem_fraction_defaulted=args.mem_fraction_static is None, context_len=ctx,
            avail_before_load_gib=round(B, 3), avail_before_load_source=b_src, weights_gib=W, weights_source=w_src,
            weights_estimate_gib=round(w_est, 3), draft_weights_gib=Wd, draft_weights_source=wd_src,
            draft_loaded_before_sizing=draft_before, avail_at_sizing_gib=round(A, 3), slack_gib=round(slack, 3),
            rest_gib=round(R, 3), spec_algorithm=spec.algorithm, draft_tokens=spec.num_draft_tokens,
            chunked_prefill_size=defaults.chunked_prefill_size, cuda_graph_max_bs=defaults.decode_max_bs,
            graph_reserve_gib=round(defaults.graph_reserve_mb / 1024, 3), warnings=tuple(warnings),
            notes=tuple(notes), ignored_flags=args.ignored, weights_quant_label=m.quant.label,
            mamba_per_slot_bytes=st.per_slot if st else None, mamba_ratio=rho, mamba_strategy=strategy)

    # ---- strategy, overlap, ratio
    overlap = not args.disable_overlap_schedule
    strategy = None
    rho = None
    st = None
    hybrid = bool(m.linear_layers)
    if era == "v0512" and spec.algorithm in ("DFLASH", "DDTREE"):
        overlap = False  # server_args.py (0.5.12): DFLASH always runs without the overlap scheduler
    env = dict(args.env)
    if era == "v0512" and spec.algorithm in ("EAGLE", "EAGLE3", "STANDALONE"):
        spec_v2 = env.get("SGLANG_ENABLE_SPEC_V2", "1" if version >= (0, 5, 12) else "0").lower() in ("1", "true")
        overlap = overlap and spec_v2
    if m.architecture.startswith("NemotronH") and (args.attention_backend or "").lower() == "triton" \
            and version >= (0, 5, 12):
        return _failed(budget(), C.kv_dtype(args, m), args.max_running_requests,
            "AssertionError: NemotronHForCausalLM does not support triton attention backend,as the first layer might "
            "not be an attention layer", "unsupported_backend")  # server_args.py::_handle_model_specific_adjustments
    if hybrid:
        req = (args.mamba_strategy or "auto").lower()
        if req == "auto":
            if era == "v0512" or version <= (0, 5, 13):
                strategy = "no_buffer"
            else:
                arch_ok = m.architecture.startswith(_EXTRA_BUFFER_ARCHS)
                strategy = "extra_buffer" if arch_ok and (overlap or (args.page_size or 1) > 1) else "no_buffer"
        else:
            strategy = req
        if strategy == "no_buffer" and version >= (0, 5, 14):
            overlap = False  # no_buffer forces disable_overlap_schedule (overrides.py)
        if era == "v0512" and spec.algorithm and strategy == "no_buffer" and not args.disable_radix_cache:
            return _failed(budget(), C.kv_dtype(args, m), args.max_running_requests,
                f"ValueError: Speculative decoding for {m.architecture} is not compatible with radix cache when using "
                f"--mamba-scheduler-strategy no_buffer.To use radix cache with speculative decoding, please use "
                f"--mamba-scheduler-strategy extra_buffer and set SGLANG_ENABLE_SPEC_V2=1.", "flag_conflict")
        rho = C.mamba_ratio(args, strategy, overlap)
        st = C.mamba_state(m, tp, args.mamba_ssm_dtype)

    # ---- R <= 0 before the pools (0.5.14+: ValueError naming the weights)
    if R <= 0 and era != "v0512":
        need = (1 - A / B)
        sug = math.ceil(need * 1000) / 1000
        err = (f"ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static={f}. "
               f"Raise --mem-fraction-static above {sug:.3f} (minimum viable = 1 - available/pre = "
               f"1 - {A:.2f}/{B:.2f}). If using speculative decoding, draft weights are now counted.")
        return _failed(budget(), C.kv_dtype(args, m), args.max_running_requests, err, "weights_leave_no_memory")

    # ---- KV cell (target + draft)
    kvd = C.kv_dtype(args, m)
    c = C.kv_cell_bytes(m, attn_tp, kvd)
    L = len(m.attention_layers)
    draft_c = 0
    if spec.algorithm in ("DFLASH", "DDTREE") and draft is not None and L > 0:
        if era == "v0523":
            dkv = args.speculative_draft_kv_cache_dtype or kvd
            draft_c = C.draft_kv_cell_bytes(draft, attn_tp, dkv)
            c_total = c + draft_c
        else:  # dflash_utils.py::scale_kv_cell_size_per_token_for_dflash (layer-scaled, ceil)
            c_total = (c * (L + spec.draft_layers) + L - 1) // L
            draft_c = c_total - c
    elif spec.algorithm in ("EAGLE", "EAGLE3", "STANDALONE", "FROZEN_KV_MTP") and era != "v0512" \
            and version >= (0, 5, 14) and L > 0 \
            and (args.speculative_draft_model_path or m.architecture in _DRAFT_PATH_DEFAULT_ARCHS):
        if era == "v0523":
            draft_c = (c * spec.draft_layers) // L  # c += floor(c·Ld/L)
        else:
            draft_c = int(c * (1 + spec.draft_layers / L)) - c  # pool_configurator.py (0.5.15)
        c_total = c + draft_c
    else:
        c_total = c
    if c_total <= 0:
        raise FlagError(f"{m.name}: no KV-holding layers (pure recurrent models are not planned for SGLang yet)")

    # ---- requested max_running_requests (speculative handlers default it to 48)
    mrr_req = args.max_running_requests
    if mrr_req is None and spec.algorithm in ("EAGLE", "EAGLE3", "STANDALONE", "DFLASH", "DDTREE", "NGRAM",
                                              "FROZEN_KV_MTP"):
        mrr_req = 48
        notes.append("max_running_requests defaults to 48 for speculative decoding (speculative_hook.py)")
    page = args.page_size or 1
    reserves = bool(spec.algorithm) and spec.algorithm != "NGRAM" and not (
        args.enable_linear_replayssm_spec and m.gdn is not None)
    r = args.mamba_full_memory_ratio if args.mamba_full_memory_ratio is not None else 0.9
    pools = size_pools(PoolInputs(
        era=era, rest_gib=R, per_slot=st.per_slot if st else 0, draft_tokens=spec.num_draft_tokens,
        ratio=rho or 1, mamba_full_memory_ratio=r, mrr=mrr_req, max_mamba_cache_size=args.max_mamba_cache_size,
        disable_radix_cache=args.disable_radix_cache, cell=c_total, page=page, max_total_tokens=args.max_total_tokens,
        context_len=ctx, dp=args.dp if args.enable_dp_attention else 1, reserves_spec_state=reserves))

    # ---- allocation sizes as logged
    n = max(pools.kv_tokens, 0)
    nk = C.kv_heads_per_rank(m, attn_tp)
    isz = C.dtype_bytes(kvd)
    if m.mla is not None:
        k_size = L * (n + page) * (m.mla.kv_lora_rank + m.mla.qk_rope_head_dim) * isz / GIB
        v_size = 0.0
    else:
        k_size = L * (n + page) * nk * m.head_dim * isz / GIB
        v_size = L * (n + page) * nk * (m.v_head_dim if m.gdn is None else m.head_dim) * isz / GIB
    dk = None
    if draft_c and draft is not None and spec.algorithm in ("DFLASH", "DDTREE"):
        dn = max(1, draft.num_kv_heads // attn_tp)
        dk = draft.num_layers * (n + page) * dn * draft.head_dim * C.dtype_bytes(args.speculative_draft_kv_cache_dtype
                                                                                   or kvd) / GIB
    elif draft_c:
        dk = spec.draft_layers * (n + page) * nk * m.head_dim * isz / GIB
    conv_g = ssm_g = ism_g = icw_g = None
    K = pools.mamba_slots
    S = max(pools.max_running_requests, 0)
    if st is not None and K is not None and K > 0:
        conv_g = st.layers * (K + 1) * st.conv_elems * st.conv_bytes / GIB
        ssm_g = st.layers * (K + 1) * st.ssm_elems * st.ssm_bytes / GIB
        if spec.algorithm and reserves:
            D = spec.num_draft_tokens
            ism_g = st.layers * (S + 1) * D * st.ssm_elems * st.ssm_bytes / GIB
            if era == "v0512" or spec.topk > 1:
                icw_g = st.layers * (S + 1) * D * st.conv_elems * st.conv_bytes / GIB
            else:  # deduplicated sliding window (0.5.14+, CUDA, topk <= 1)
                icw_g = st.layers * (S + 1) * st.conv_dim_rank * (D + st.conv_kernel - 2) * st.conv_bytes / GIB

    status = "ok" if pools.error is None else "fails"
    if status == "ok":
        if n < ctx:
            warnings.append(f"KV pool holds {n} tokens, fewer than --context-length {ctx}: one request can use at most "
                            f"{min(ctx - 1, n - 1)} tokens")
        if pools.mrr_capped_by_mamba:
            warnings.append(f"max_running_requests is capped to {pools.max_running_requests} by the mamba state cache "
                            f"(max_mamba_cache_size={K}, {rho} state slots per request)")
        elif mrr_req is not None and pools.max_running_requests < mrr_req:
            warnings.append(f"max_running_requests was reduced from the requested {mrr_req} to "
                            f"{pools.max_running_requests} by the KV cache capacity")
    graph_gib = defaults.graph_reserve_mb / 1024
    # the engine's own estimate of what runs outside the static pools (memory_hook.py / server_args.py
    # _handle_gpu_memory_settings): 512 MB + 1.5 MB per chunked-prefill token + CUDA-graph terms, before its
    # 10 GiB floor; a slack below it is where graph capture and prefill activations run out of memory
    runtime_gib = (512 + 1.5 * max(defaults.chunked_prefill_size, 2048)) / 1024 + graph_gib
    if status == "ok" and slack < runtime_gib:
        warnings.append(f"runtime slack B·(1−f) = {slack:.2f} GiB is below the engine's own estimate for CUDA graphs "
                        f"and activations (~{runtime_gib:.2f} GiB): CUDA graph capture may run out of memory")
    if measured.weights_gib is None and m.quant.method is None and "nvfp4" in (args.model_path or "").lower():
        warnings.append("the model path says NVFP4 but the config has no quantization_config: weights are planned "
                        "as unquantized")

    log = _log_lines(era, K, conv_g, ssm_g, ism_g, icw_g, n, kvd, k_size, v_size, dk, pools, ctx, defaults, B, W, Wd,
                     spec)
    return SglangPlan(
        **budget(),
        status=status, error=pools.error, error_kind=pools.error_kind, kv_dtype=kvd, kv_cell_bytes=c_total,
        kv_tokens=pools.kv_tokens, k_size_gib=k_size, v_size_gib=v_size, draft_k_size_gib=_r(dk),
        max_mamba_cache_size=K, mamba_full_memory_ratio=r if hybrid else None, conv_state_gib=conv_g,
        ssm_state_gib=ssm_g, intermediate_ssm_state_gib=ism_g, intermediate_conv_window_gib=icw_g,
        spec_scratch_gib=round(pools.scratch_gib, 3), spec_scratch_requests=pools.scratch_reqs,
        max_running_requests=pools.max_running_requests, requested_max_running_requests=mrr_req,
        log_lines=tuple(log))


def _flag_spelling_error(args: SglangArgs, version: C.Version) -> str | None:
    """argparse rejects a flag the targeted release does not have (server_args.py / arg_groups/fields/*.py)."""
    if "--mamba-radix-cache-strategy" in args.flags_seen and version <= (0, 5, 13):
        return ("SGLang <= 0.5.13 has no --mamba-radix-cache-strategy (it was --mamba-scheduler-strategy); the server "
                "would exit with 'unrecognized arguments'")
    if "--mamba-scheduler-strategy" in args.flags_seen and version >= (0, 5, 23):
        return ("SGLang 0.5.23 has no --mamba-scheduler-strategy (renamed --mamba-radix-cache-strategy in 0.5.14); the "
                "server would exit with 'unrecognized arguments'")
    return None


def _check_divisibility(m: ModelSpec, tp: int, attn_tp: int) -> None:
    if m.num_attention_heads and m.num_attention_heads % attn_tp:
        raise FlagError(f"--tp {tp} does not divide {m.name}'s {m.num_attention_heads} attention heads")
    if m.num_kv_heads and m.num_kv_heads > attn_tp and m.num_kv_heads % attn_tp:
        raise FlagError(f"--tp {tp} does not divide {m.name}'s {m.num_kv_heads} KV heads")


def _failed(budget: dict[str, Any], kv_dtype: str, requested_mrr: int | None, err: str, kind: str) -> SglangPlan:
    """A configuration the engine refuses before it sizes any pool: the budget as far as it got, empty pools."""
    return SglangPlan(
        **budget, status="fails", error=err, error_kind=kind, kv_dtype=kv_dtype, kv_cell_bytes=0, kv_tokens=0,
        k_size_gib=0.0, v_size_gib=0.0, draft_k_size_gib=None, max_mamba_cache_size=None, mamba_full_memory_ratio=None,
        conv_state_gib=None, ssm_state_gib=None, intermediate_ssm_state_gib=None, intermediate_conv_window_gib=None,
        spec_scratch_gib=0.0, spec_scratch_requests=0, max_running_requests=0,
        requested_max_running_requests=requested_mrr, log_lines=())


def _log_lines(era, K, conv_g, ssm_g, ism_g, icw_g, n, kvd, k_size, v_size, dk, pools: Pools, ctx, defaults, B, W, Wd,
               spec) -> list[str]:
    """The lines the engine would print (memory_pool.py / model_runner.py f-strings)."""
    lines = [f"Load weight begin. avail mem={B:.2f} GB", f"Load weight end. ... avail mem={B - W:.2f} GB, mem usage={W:.2f} GB."]
    if Wd:
        lines.append(f"[draft] Load weight end. ... mem usage={Wd:.2f} GB.")
    if K is not None and conv_g is not None:
        line = (f"Mamba Cache is allocated. max_mamba_cache_size: {K}, conv_state size: {conv_g:.2f}GB, "
                f"ssm_state size: {ssm_g:.2f}GB ")
        if ism_g is not None:
            line += f"intermediate_ssm_state_cache size: {ism_g:.2f}GB intermediate_conv_window_cache size: {icw_g:.2f}GB "
        lines.append(line)
    torch_dt = {"bfloat16": "torch.bfloat16", "float16": "torch.float16", "fp8_e4m3": "torch.float8_e4m3fn",
                "fp8_e5m2": "torch.float8_e5m2"}.get(kvd, kvd)
    if n > 0:
        lines.append(f"KV Cache is allocated. dtype: {torch_dt}, #tokens: {n}, K size: {k_size:.2f} GB, V size: {v_size:.2f} GB")
        if dk is not None:
            lines.append(f"KV Cache is allocated. dtype: {torch_dt}, #tokens: {n}, K size: {dk:.2f} GB, V size: {dk:.2f} GB   (draft)")
        if pools.error is None:
            lines.append(f"max_total_num_tokens={n}, chunked_prefill_size={defaults.chunked_prefill_size}, "
                         f"max_prefill_tokens=16384, max_running_requests={pools.max_running_requests}, context_len={ctx}")
    if pools.error:
        lines.append(pools.error)
    return lines
