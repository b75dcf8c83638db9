"""`specbench plan` for vLLM: a pasted `vllm serve ...` command -> the plan contract (ARCHITECTURE.md).

Dispatched from `specbench.plan.api.plan_command_full` as `plan_vllm_command(argv, opts)`.

Device: the CPU rule set (vllm_cpu.py) when the command says CPU (`VLLM_CPU_KVCACHE_SPACE=..` or
`VLLM_TARGET_DEVICE=cpu` among the leading env words, `--device cpu`) or `opts.gpu == "cpu"`; the GPU rule set
(vllm_gpu.py) otherwise. Both feed the shared pool maths of vllm_common.py.

`max_running_requests` is defined as what the engine lets run at once at full length:
min(max_num_seqs, floor(Maximum concurrency)), where Maximum concurrency = num_blocks / blocks per request at
max_model_len, exactly as vLLM prints it. Shorter requests can run more (up to max_num_seqs).
"""

from __future__ import annotations

import ast
import dataclasses
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from specbench.engines import versions
from specbench.engines.vllm import cpu as vllm_cpu
from specbench.engines.vllm import gpu as vllm_gpu
from specbench.engines.vllm import sizing as C
from specbench.engines.vllm.args import VllmArgs, parse_vllm_argv
from specbench.engines.vllm.loglines import nondefault_args_text
from specbench.errors import UserError
from specbench.specs.gpu import GpuSpec, custom_gpu, find_gpu
from specbench.specs.header_weights import WEIGHTS_SOURCE, header_weight_bytes
from specbench.specs.model import ModelSpec
from specbench.specs.resolve import load_spec_for
from specbench.specs.weights import draft_model_bytes, mtp_draft_bytes, weight_bytes

DEFAULT_GPU = "H200"
MNS_SEARCH_MAX = 4096
U_GRID = tuple(round(0.30 + 0.01 * i, 2) for i in range(70))  # 0.30 .. 0.99


@dataclass(frozen=True)
class Context:
    """Everything besides the launch command that a plan depends on."""

    version_text: str
    version: C.Version
    device: str                      # cuda | cpu
    gpu: GpuSpec | None
    total_bytes: int | None          # GPU: T; CPU: node total (if known)
    weights_gib: float | None = None
    draft_weights_gib: float | None = None
    non_kv_gib: float | None = None
    free_at_start_gib: float | None = None   # GPU: measured F0 (--avail-before-load-gib)
    # CPU: the machine's features vLLM sizes by (vllm_cpu.CpuIsa); context_for reads them (pin or this machine)
    avx512_bf16: bool = True
    amx_tile: bool = False
    cpu_isa_source: str = "default: AVX512-BF16, no AMX"
    version_warning: str | None = None  # a release newer than the newest rule set (versions.rule_set_for)


@dataclass(frozen=True)
class VllmPlan:
    status: str
    error: str | None
    error_kind: str | None
    setup: C.Setup
    u: float
    kv_budget_bytes: int | None
    weights_bytes: int
    draft_weights_bytes: int
    num_blocks: int | None
    blocks_per_request: int | None
    max_concurrency: float | None
    kv_tokens: int | None
    max_running_requests: int | None
    max_model_len: int
    estimated_max_model_len: int | None
    block_size: int
    bytes_per_block: int | None
    group_size: int | None
    groups: tuple[dict, ...]
    mamba_page: int | None
    mamba_page_padded: int | None
    conv_bytes: int | None
    ssm_bytes: int | None
    mamba_layers: int
    budget: dict
    log_lines: tuple[str, ...]
    warnings: tuple[str, ...] = field(default=())


# ------------------------------------------------------------------------------------------ one plan


def _with_dtype(m: ModelSpec, dtype: str) -> ModelSpec:
    return dataclasses.replace(m, dtype=dtype) if m.dtype != dtype else m


def plan_once(args: VllmArgs, m: ModelSpec, draft: ModelSpec | None, ctx: Context) -> VllmPlan:
    v = ctx.version
    warnings: list[str] = [ctx.version_warning] if ctx.version_warning else []
    if args.pp > 1:
        warnings.append("pipeline parallelism is planned as one stage holding every layer")
    _check_tp(m, args.tp)
    if ctx.device == "cpu":
        setup = vllm_cpu.cpu_setup(args, m, draft, v, avx512_bf16=ctx.avx512_bf16, amx_tile=ctx.amx_tile)
        warnings += vllm_cpu.cpu_warnings(m, draft, setup.spec_method)
    else:
        assert ctx.gpu is not None and ctx.total_bytes is not None
        setup = vllm_gpu.gpu_setup(args, m, draft, v, ctx.gpu, ctx.total_bytes)
    if m.quant.kv_cache_quant_algo and str(m.quant.kv_cache_quant_algo).upper().startswith("FP8") \
            and args.kv_cache_dtype == "auto":
        setup = dataclasses.replace(setup, kv_dtype_bytes=1)
    lines: list[str] = list(setup.notes)
    derived = C.derived_max_model_len(m)
    # weights per rank (vLLM loads in the resolved dtype; a float32 checkpoint is downcast)
    mw = _with_dtype(m, setup.model_dtype)
    W_t = weight_bytes(mw, args.tp)
    W_d = _draft_bytes(m, draft, args, setup)
    hw = header_weight_bytes(mw, args.tp)  # exact when the checkpoint's safetensors headers were reachable
    W_t, w_src = (hw, WEIGHTS_SOURCE) if hw is not None else (W_t, "estimated from config.json (specs/weights.py)")
    hd = header_weight_bytes(_with_dtype(draft, setup.model_dtype), _draft_tp(args), as_draft=True) \
        if W_d and draft is not None and draft is not m else None
    W_d = hd if hd is not None else W_d
    if ctx.weights_gib is not None:
        W_t = int(ctx.weights_gib * C.GIB)
        W_d = int(ctx.draft_weights_gib * C.GIB) if ctx.draft_weights_gib is not None else 0
    elif ctx.draft_weights_gib is not None:
        W_d = int(ctx.draft_weights_gib * C.GIB)
    u = args.gpu_memory_utilization if args.gpu_memory_utilization is not None else vllm_gpu.default_u(v)
    common: dict[str, Any] = dict(setup=setup, u=u, weights_bytes=W_t, draft_weights_bytes=W_d, block_size=setup.block_size,
                  mamba_layers=len(m.linear_layers))

    def failed(kind: str, text: str, K: int | None, budget: dict, extra_lines=()) -> VllmPlan:
        return VllmPlan("fails", text, kind, kv_budget_bytes=K, num_blocks=None, blocks_per_request=None,
                        max_concurrency=None, kv_tokens=None, max_running_requests=None,
                        max_model_len=setup.max_model_len, estimated_max_model_len=None, bytes_per_block=None,
                        group_size=None, groups=(), mamba_page=None, mamba_page_padded=None, conv_bytes=None,
                        ssm_bytes=None, budget=budget, log_lines=tuple(lines) + tuple(extra_lines),
                        warnings=tuple(warnings), **common)

    if args.max_model_len not in (None, -1) and args.max_model_len > derived:
        if (args.env_value("VLLM_ALLOW_LONG_MAX_MODEL_LEN") or "").lower() in ("1", "true"):
            warnings.append(f"max_model_len {args.max_model_len} is above the derived {derived}; allowed by "
                            f"VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (config/model.py warns only)")
        else:
            return failed("derived_max_len", C.derived_len_text(args.max_model_len, derived), None, {})

    # ---- budget K
    if ctx.device == "cpu":
        cb = vllm_cpu.kv_space_bytes(args, v, node_total_bytes=ctx.total_bytes,
                                     rss_bytes=int(ctx.non_kv_gib * C.GIB) if ctx.non_kv_gib is not None else None,
                                     gpu_memory_utilization=u)
        budget: dict[str, Any] = {"kv_cache_memory_bytes": cb.kv_bytes, "source": cb.source}
        if cb.line:
            lines.append(cb.line)
        if cb.failure is not None:
            return failed(cb.failure.kind, cb.failure.message, cb.kv_bytes, budget)
        if cb.kv_bytes is None:
            raise UserError(f"cannot plan the vLLM CPU KV space: {cb.source}")
        K = cb.kv_bytes
    else:
        nonkv = ctx.non_kv_gib
        gb = vllm_gpu.gpu_budget(args, mw, setup, ctx.total_bytes or 0, W_t + W_d, nonkv, ctx.free_at_start_gib)
        budget = {"total_gib": round(gb.total_bytes / C.GIB, 3), "gpu_memory_utilization": gb.u,
                  "requested_gib": round(gb.requested_bytes / C.GIB, 3),
                  "free_at_start_gib_estimate": round(gb.free_at_start_bytes / C.GIB, 3),
                  "weights_gib": round(gb.weights_bytes / C.GIB, 3),
                  "weights_source": "measured (--weights-gib)" if ctx.weights_gib is not None else w_src,
                  "non_kv_gib": round(gb.non_kv_bytes / C.GIB, 3),
                  "non_kv_measured": gb.non_kv_measured,
                  "cuda_graph_gib": round(gb.cuda_graph_bytes / C.GIB, 3),
                  "kv_cache_memory_bytes": gb.kv_bytes, "available_kv_gib": C.format_gib(gb.kv_bytes),
                  "source": gb.source}
        lines.extend(gb.lines)
        if gb.failure is not None:
            return failed(gb.failure.kind, gb.failure.message, gb.kv_bytes, budget)
        K = gb.kv_bytes
        if vllm_gpu.is_v0(v):
            if m.linear_layers:
                raise UserError("the V0 engine (vLLM < 0.8) rule set does not model hybrid Mamba models")
            p0 = vllm_gpu.v0_pool(m, setup, max(K, 0))
            lines.extend(p0.lines)
            mrr = min(setup.max_num_seqs, int(p0.max_concurrency)) if p0.failure is None else None
            return VllmPlan("fails" if p0.failure else "ok", p0.failure.message if p0.failure else None,
                            p0.failure.kind if p0.failure else None, kv_budget_bytes=K, num_blocks=p0.num_blocks,
                            blocks_per_request=C.cdiv(setup.max_model_len, setup.block_size),
                            max_concurrency=p0.max_concurrency, kv_tokens=p0.kv_tokens,
                            max_running_requests=mrr, max_model_len=setup.max_model_len,
                            estimated_max_model_len=None, bytes_per_block=p0.block_bytes,
                            group_size=len(m.attention_layers), groups=(),
                            mamba_page=None, mamba_page_padded=None, conv_bytes=None, ssm_bytes=None, budget=budget,
                            log_lines=tuple(lines), warnings=tuple(warnings), **common)

    # ---- pool
    lp = C.build_layer_specs(m, draft, setup, _draft_tp(args))
    lines.extend(lp.lines)
    setup_b = dataclasses.replace(setup, block_size=lp.block_size)
    charge = C.charge_for(setup_b)
    mamba_check = ctx.device == "cuda" and v >= (0, 20, 0) and args.full_cudagraphs
    if ctx.device == "cuda" and (0, 18, 0) <= v < (0, 20, 0) and m.linear_layers and args.full_cudagraphs:
        warnings.append("0.18-0.19 cap CUDA-graph capture sizes to the Mamba cache blocks instead of failing")
    grouping, pool = C.size_pool(list(lp.specs), K, charge, v, ctx.device,
                                 auto_fit=setup.auto_fit, max_num_seqs=setup.max_num_seqs, mamba_check=mamba_check,
                                 num_gpu_blocks_override=args.num_gpu_blocks_override)
    lines.extend(pool.log_lines)
    warnings.extend(pool.warnings)
    groups = tuple({"kind": g.kind, "layers": g.layers, "block_size": g.spec.block_size,
                    "page_bytes": g.spec.page, "bytes_per_block": g.bytes_per_block} for g in grouping.groups)
    # kv_cache_utils.py (scheduler block size, 0.30+): logged for more than one group, after the capacity line
    sizes = tuple(g.spec.block_size if (g.kind != "mamba" or charge.mamba_mode != "none") else pool.max_model_len
                  for g in grouping.groups)
    if len(sizes) > 1 and v >= (0, 30, 0) and (pool.failure is None or pool.failure.kind == "mamba_blocks"):
        lines.append(f"kv cache group sizes {sizes}")
        lines.append(f"kv lcm block sizes {C.lcm_all(sizes)}")
    failure = pool.failure
    mrr = None
    if failure is None:
        mrr = min(setup.max_num_seqs, math.floor(pool.max_concurrency))
        if mrr < 1:
            warnings.append("the pool holds less than one full-length request")
    return VllmPlan(
        "fails" if failure else "ok", failure.message if failure else None, failure.kind if failure else None,
        kv_budget_bytes=K, num_blocks=pool.num_blocks, blocks_per_request=pool.blocks_per_request,
        max_concurrency=pool.max_concurrency, kv_tokens=pool.kv_tokens, max_running_requests=mrr,
        max_model_len=pool.max_model_len, estimated_max_model_len=pool.estimated_max_model_len,
        bytes_per_block=grouping.bytes_per_block, group_size=grouping.group_size, groups=groups,
        mamba_page=lp.mamba_page, mamba_page_padded=lp.mamba_page_padded, conv_bytes=lp.conv_bytes,
        ssm_bytes=lp.ssm_bytes, budget=budget, log_lines=tuple(lines), warnings=tuple(warnings),
        **{**common, "block_size": lp.block_size})


def _check_tp(m: ModelSpec, tp: int) -> None:
    """vLLM's own divisibility checks (config/parallel.py::verify_with_model_config / the linear layers)."""
    if m.num_attention_heads and m.num_attention_heads % tp:
        raise UserError(f"Total number of attention heads ({m.num_attention_heads}) must be divisible by tensor "
                        f"parallel size ({tp}).")


def _draft_tp(args: VllmArgs) -> int:
    s = args.speculative
    return s.draft_tensor_parallel_size if s and s.draft_tensor_parallel_size else args.tp


def _draft_bytes(m: ModelSpec, draft: ModelSpec | None, args: VllmArgs, setup: C.Setup) -> int:
    method = setup.spec_method
    if not method or method in C.NO_DRAFT_METHODS:
        return 0
    if method in C.MTP_METHODS:
        return mtp_draft_bytes(_with_dtype(m, setup.model_dtype), args.tp)
    if draft is None:
        return 0
    d = _with_dtype(draft, setup.model_dtype)
    if method == "draft_model" or d.draft is None:
        return weight_bytes(d, _draft_tp(args))    # draft_model shares nothing with the target (§5.2)
    return draft_model_bytes(d, _draft_tp(args))


# ------------------------------------------------------------------------------------------ contract


def _gib(b: int | None, nd: int = 3) -> float | None:
    return None if b is None else round(b / C.GIB, nd)


def contract(p: VllmPlan, ctx: Context) -> dict[str, Any]:
    hybrid = p.mamba_layers > 0
    per_req_conv = p.conv_bytes * p.mamba_layers if (hybrid and p.conv_bytes) else None
    per_req_ssm = p.ssm_bytes * p.mamba_layers if (hybrid and p.ssm_bytes) else None
    s = p.setup
    half = None
    if not hybrid and p.num_blocks and p.bytes_per_block and all(g["kind"] in ("full", "sliding") for g in p.groups):
        half = round(p.num_blocks * p.bytes_per_block / 2 / C.GIB, 2)
    return {
        "status": p.status, "error": p.error, "engine": "vllm", "engine_version": ctx.version_text,
        "device": ctx.device,
        "mem_fraction_static": p.u, "gpu_memory_utilization": p.u,
        "weights_gib": _gib(p.weights_bytes), "draft_weights_gib": _gib(p.draft_weights_bytes),
        "kv_tokens": p.kv_tokens,
        # vLLM logs no K/V sizes; for an attention-only, non-MLA pool K and V are each half of num_blocks x B
        "k_size_gib": half, "v_size_gib": half,
        # Mamba keys: vLLM keeps Mamba state in the shared block pool; every block can hold one state per layer of
        # its group, so the Mamba cache blocks (the number its max_num_seqs check prints) are num_blocks.
        "max_mamba_cache_size": p.num_blocks if hybrid else None,
        "conv_state_gib": _gib(per_req_conv, 6), "ssm_state_gib": _gib(per_req_ssm, 6),
        "intermediate_ssm_state_gib": None if not hybrid else 0.0,
        "max_running_requests": p.max_running_requests,
        "max_concurrency": round(p.max_concurrency, 4) if p.max_concurrency is not None else None,
        "max_concurrency_printed": f"{p.max_concurrency:.2f}x" if p.max_concurrency is not None else None,
        "num_blocks": p.num_blocks, "block_size": p.block_size, "bytes_per_block": p.bytes_per_block,
        "blocks_per_request": p.blocks_per_request, "group_size": p.group_size, "kv_cache_groups": list(p.groups),
        "kv_cache_memory_bytes": p.kv_budget_bytes, "available_kv_gib": _gib(p.kv_budget_bytes, 2),
        "kv_pool_gib": _gib(p.num_blocks * p.bytes_per_block if p.num_blocks and p.bytes_per_block else None),
        "max_model_len": p.max_model_len, "estimated_max_model_len": p.estimated_max_model_len,
        "max_num_seqs": s.max_num_seqs, "max_num_batched_tokens": s.max_num_batched_tokens,
        "mamba_cache_mode": s.mamba_mode if hybrid else None,
        "mamba_page_size": p.mamba_page, "mamba_page_size_padded": p.mamba_page_padded,
        "conv_state_bytes_per_layer": p.conv_bytes, "ssm_state_bytes_per_layer": p.ssm_bytes,
        "ssm_state_dtype": s.ssm_dtype if hybrid else None, "kv_dtype_bytes": s.kv_dtype_bytes,
        "num_speculative_tokens": s.k, "speculative_method": s.spec_method,
        "prefix_caching": s.prefix_caching, "error_kind": p.error_kind,
        "budget": p.budget, "log_lines": list(p.log_lines), "warnings": list(p.warnings),
    }


def explain(p: VllmPlan, ctx: Context) -> str:
    where = "CPU KV space" if ctx.device == "cpu" else "KV budget"
    K = C.format_gib(p.kv_budget_bytes) if p.kv_budget_bytes is not None else "?"
    if p.status == "ok":
        s = (f"Starts: {where} {K} GiB = {p.num_blocks:,} blocks of {p.bytes_per_block:,} B (block size "
             f"{p.block_size}); a {p.max_model_len:,}-token request takes {p.blocks_per_request} blocks, so vLLM "
             f"prints {p.kv_tokens:,} tokens and {p.max_concurrency:.2f}x; max_running_requests="
             f"{p.max_running_requests} (max_num_seqs {p.setup.max_num_seqs}).")
        return s
    if p.error_kind == "mamba_blocks":
        return (f"The pool has {p.num_blocks} blocks and every running request pins one Mamba block, but "
                f"max_num_seqs is {p.setup.max_num_seqs}; vLLM 0.20+ refuses to capture FULL CUDA graphs then. "
                f"Lower --max-num-seqs, raise --gpu-memory-utilization, or use --enforce-eager.")
    if p.error_kind == "max_model_len":
        return (f"One {p.max_model_len:,}-token request does not fit the {where} of {K} GiB"
                + (f"; the longest that fits is {p.estimated_max_model_len:,}." if p.estimated_max_model_len
                   else "."))
    if p.error_kind == "no_memory":
        return f"Nothing is left for KV blocks ({where} {K} GiB is not more than one block)."
    return p.error or "fails"


def budget_rows(r: dict[str, Any]) -> list[tuple[str, float | None, str]]:
    """The memory plan as (item, GiB, where it comes from) rows, for a renderer."""
    b = r.get("budget") or {}
    rows: list[tuple[str, float | None, str]] = []
    if r.get("device") == "cpu":
        rows.append(("KV space K", r.get("available_kv_gib"), str(b.get("source", ""))))
    else:
        rows.append(("device total T", b.get("total_gib"), "GPU catalog / --gpu-mem-gib"))
        rows.append(("requested R = ceil(T·u)", b.get("requested_gib"),
                     f"gpu_memory_utilization={r.get('gpu_memory_utilization')}"))
        rows.append(("weights (target + draft)", b.get("weights_gib"), str(b.get("weights_source", ""))))
        rows.append(("non-KV (activation + non-torch + CUDA graphs)", b.get("non_kv_gib"), str(b.get("source", ""))))
        rows.append(("KV budget K = R - weights - non-KV", r.get("available_kv_gib"), "Available KV cache memory"))
    if r.get("num_blocks") is not None:
        rows.append(("KV pool (num_blocks x bytes per block)", r.get("kv_pool_gib"),
                     f"{r['num_blocks']:,} x {r.get('bytes_per_block'):,} B, block size {r.get('block_size')}"))
    return rows


# ------------------------------------------------------------------------------------------ fixes


def _result(p: VllmPlan) -> dict[str, Any]:
    return {"status": p.status, "error": p.error, "kv_tokens": p.kv_tokens,
            "max_concurrency": round(p.max_concurrency, 2) if p.max_concurrency is not None else None,
            "num_blocks": p.num_blocks, "max_running_requests": p.max_running_requests,
            "max_model_len": p.max_model_len, "gpu_memory_utilization": p.u}


def _bsearch_last(lo: int, hi: int, ok) -> int | None:
    """Largest x in [lo, hi] with ok(x) (ok true then false); the search `plan/solve.py` uses for SGLang."""
    from specbench.engines.sglang.fixes import _bsearch_last as search

    return None if hi < lo else search(lo, hi, ok)


def _try(args: VllmArgs, m, draft, ctx: Context) -> VllmPlan | None:
    try:
        return plan_once(args, m, draft, ctx)
    except UserError:
        return None


def _ok(args, m, draft, ctx) -> bool:
    p = _try(args, m, draft, ctx)
    return p is not None and p.status == "ok"


def per_tp_fixes(args: VllmArgs, m, draft, ctx: Context, tp_sizes: tuple[int, ...]) -> tuple[list[dict], list[dict]]:
    """Per TP: the largest --max-num-seqs, the longest --max-model-len and the smallest --gpu-memory-utilization
    (CPU: the smallest VLLM_CPU_KVCACHE_SPACE) that start. Returns (fixes nearest first, per-TP table)."""
    fixes: list[dict] = []
    table: list[dict] = []
    order = [args.tp] + [t for t in tp_sizes if t != args.tp]
    derived = C.derived_max_model_len(m)
    for tp in order:
        a = args.with_(tp=tp)
        base = {} if tp == args.tp else {"--tensor-parallel-size": tp}
        at = _try(a, m, draft, ctx)
        if at is None:
            try:
                plan_once(a, m, draft, ctx)
            except UserError as exc:
                table.append({"tp": tp, "error": str(exc)})
            continue
        mns_hi = max(MNS_SEARCH_MAX, at.setup.max_num_seqs)
        best_mns = _bsearch_last(1, mns_hi, lambda x, a=a: _ok(a.with_(max_num_seqs=x), m, draft, ctx))
        L0 = at.max_model_len
        len_hi = derived
        if (a.env_value("VLLM_ALLOW_LONG_MAX_MODEL_LEN") or "").lower() in ("1", "true"):
            len_hi = max(derived, L0)
        best_len = _bsearch_last(1, len_hi, lambda x, a=a: _ok(a.with_(max_model_len=x), m, draft, ctx))
        min_u = None
        min_space = None
        if ctx.device == "cpu":
            if a.env_value("VLLM_CPU_KVCACHE_SPACE") not in (None, ""):
                env = tuple((k, v) for k, v in a.env if k != "VLLM_CPU_KVCACHE_SPACE")
                for g in range(1, 257):
                    if _ok(a.with_(env=env + (("VLLM_CPU_KVCACHE_SPACE", str(g)),)), m, draft, ctx):
                        min_space = g
                        break
        elif a.kv_cache_memory_bytes is None:
            for u in U_GRID:
                if _ok(a.with_(gpu_memory_utilization=u), m, draft, ctx):
                    min_u = u
                    break
        table.append({"tp": tp, "error": None, "status_as_requested": at.status,
                      "max_num_seqs": best_mns, "max_model_len": best_len, "min_gpu_memory_utilization": min_u,
                      "min_cpu_kvcache_space_gib": min_space,
                      # the SGLang-shaped names the plan renderer reads (vLLM's analogues)
                      "max_running_requests": best_mns, "min_mem_fraction_static": min_u,
                      "max_context_length": best_len, "max_draft_tokens": None})
        cands: list[dict] = []
        if base and at.status == "ok":
            cands.append(dict(base))
        if best_mns is not None and best_mns != at.setup.max_num_seqs:
            if at.status != "ok" or best_mns < at.setup.max_num_seqs or args.max_num_seqs is not None:
                cands.append({**base, "--max-num-seqs": best_mns})
        if best_len is not None and best_len != L0 and (at.status != "ok" or best_len > L0):
            cands.append({**base, "--max-model-len": best_len})
        if min_u is not None and (at.status != "ok" or min_u != at.u):
            cands.append({**base, "--gpu-memory-utilization": min_u})
        if min_space is not None:
            cur = a.env_value("VLLM_CPU_KVCACHE_SPACE")
            if cur is None or str(min_space) != cur:
                cands.append({**base, "VLLM_CPU_KVCACHE_SPACE": min_space})
        for ch in cands:
            p = _try(_apply(a, ch), m, draft, ctx)
            if p is not None and p.status == "ok":
                fixes.append({"change": ch, "result": _result(p)})
    return fixes, table


def _apply(a: VllmArgs, ch: dict) -> VllmArgs:
    kw: dict[str, Any] = {}
    for k, val in ch.items():
        if k == "--max-num-seqs":
            kw["max_num_seqs"] = int(val)
        elif k == "--max-model-len":
            kw["max_model_len"] = int(val)
        elif k == "--gpu-memory-utilization":
            kw["gpu_memory_utilization"] = float(val)
        elif k == "--tensor-parallel-size":
            kw["tp"] = int(val)
        elif k == "VLLM_CPU_KVCACHE_SPACE":
            kw["env"] = tuple((x, y) for x, y in a.env if x != k) + ((k, str(val)),)
    return a.with_(**kw)


# ------------------------------------------------------------------------------------------ entry point


def detect_device(args: VllmArgs, gpu_opt: str | None) -> str:
    if (gpu_opt or "").strip().lower() == "cpu":
        return "cpu"
    if (args.device or "").lower() == "cpu":
        return "cpu"
    if args.env_value("VLLM_CPU_KVCACHE_SPACE") is not None:
        return "cpu"
    if (args.env_value("VLLM_TARGET_DEVICE") or "").lower() == "cpu":
        return "cpu"
    return "cuda"


def load_models(args: VllmArgs, opts) -> tuple[ModelSpec, ModelSpec | None]:
    if not args.model and not opts.model_config:
        raise UserError("the launch command names no model (vllm serve MODEL / --model; or pass --model-config PATH)")
    m = load_spec_for(opts.model_config, args.model, "the model", "--model-config")
    assert m is not None
    draft = None
    s = args.speculative
    if s is not None and s.kind not in C.NO_DRAFT_METHODS and s.kind not in C.MTP_METHODS:
        if s.model and s.model == args.model and not opts.draft_config:
            draft = m
        else:
            draft = load_spec_for(opts.draft_config, s.model, "the draft model", "--draft-config")
    return m, draft


def context_for(args: VllmArgs, opts) -> Context:
    version_text = opts.engine_version or C.NEWEST_VLLM
    v, newer = versions.rule_set_for(version_text, C.VLLM_RULE_SETS, "vLLM")
    device = detect_device(args, opts.gpu)
    for name, val in (("--weights-gib", opts.weights_gib), ("--draft-weights-gib", opts.draft_weights_gib),
                      ("--non-kv-gib", opts.non_kv_gib)):
        if val is not None and val < 0:
            raise UserError(f"{name} must not be negative, got {val}")
    if device == "cpu":
        total = int(opts.gpu_mem_gib * C.GIB) if opts.gpu_mem_gib else None
        isa = getattr(opts, "cpu_isa", None) or vllm_cpu.cpu_isa(args)
        return Context(version_text, v, "cpu", None, total, opts.weights_gib, opts.draft_weights_gib, opts.non_kv_gib,
                       avx512_bf16=isa.avx512_bf16, amx_tile=isa.amx_tile, cpu_isa_source=isa.source,
                       version_warning=newer)
    gpu = custom_gpu(opts.gpu_mem_gib) if opts.gpu_mem_gib is not None else find_gpu(opts.gpu or DEFAULT_GPU)
    total = gpu.total_mib * (1 << 20)
    return Context(version_text, v, "cuda", gpu, total, opts.weights_gib, opts.draft_weights_gib, opts.non_kv_gib,
                   getattr(opts, "avail_before_load_gib", None), version_warning=newer)


def plan_vllm_command(argv: list[str], opts) -> dict[str, Any]:
    """The contract dict for a vLLM launch command (see module docstring)."""
    args = parse_vllm_argv(list(argv))
    m, draft = load_models(args, opts)
    ctx = context_for(args, opts)
    p = plan_once(args, m, draft, ctx)
    out = contract(p, ctx)
    out["model"] = m.name
    out["model_kind"] = m.kind_label
    out["draft_model"] = draft.name if draft is not None else None
    out["ignored_flags"] = list(args.ignored)
    out["reason"] = explain(p, ctx)
    out["gpu"] = "CPU node" if ctx.device == "cpu" else (ctx.gpu.name if ctx.gpu else None)
    out["cpu_isa"] = ({"avx512_bf16": ctx.avx512_bf16, "amx_tile": ctx.amx_tile, "source": ctx.cpu_isa_source}
                      if ctx.device == "cpu" else None)
    out["tp"] = args.tp
    out["era"] = f"vLLM {'CPU' if ctx.device == 'cpu' else 'GPU'} {'V0' if vllm_gpu.is_v0(ctx.version) else 'V1'}"
    out["budget_rows"] = budget_rows(out)
    if getattr(opts, "fixes", True):
        fixes, table = per_tp_fixes(args, m, draft, ctx, tuple(getattr(opts, "tp_sizes", (1, 2, 4, 8))))
        out["fixes"] = fixes
        out["per_tp"] = table
    else:
        out["fixes"] = []
    return out


# ------------------------------------------------------------------------------------------ from a log

_EXPLICIT = re.compile(r"Explicitly set \(([\d.]+)/([\d.]+)\) GiB for KV cache on node")
_FLAG_OF = {"model_tag": None, "model": None, "host": None, "port": None, "served_model_name": None}


_SSM_RESET = "Reset SSM cache type to float32 for accelerated GDN mamba backend"
_SSM_KEPT = "SSM state storage for the CPU accelerated GDN backend"


def avx512_bf16_from_log(text: str) -> bool | None:
    """Whether the CPU that produced a vLLM CPU log has AVX512-BF16, from the engine's own lines: 0.30+
    vllm/platforms/cpu.py::CpuPlatform.check_and_update_config@0.32.0 logs "Reset SSM cache type to float32 ..."
    (or "Using ... SSM state storage for the CPU accelerated GDN backend.") exactly when
    torch.cpu._is_avx512_bf16_supported() and the SSM dtype was not float32 already. None when the log cannot
    tell (not a CPU boot past its config, or --mamba-ssm-cache-dtype float32)."""
    if _SSM_RESET in text or _SSM_KEPT in text:
        return True
    if "device_config=cpu" not in text or "mamba_ssm_cache_dtype': 'float32'" in text:
        return None
    return False


def argv_from_vllm_log(text: str) -> list[str] | None:
    """The launch words (env + `vllm serve MODEL flags`) a vLLM log implies, for re-planning it: the engine's own
    "non-default args: {...}" dump (api_utils.py), plus the CPU KV space from "Explicitly set (X/Y) GiB for KV
    cache" when no --kv-cache-memory-bytes was given, and VLLM_ALLOW_LONG_MAX_MODEL_LEN when the engine warned
    about it. None when the log has no argument dump."""
    args: dict[str, Any] | None = None
    cpu = False
    space: str | None = None
    allow_long = False
    for line in text.splitlines():
        if args is None and (dump := nondefault_args_text(line) or "").endswith("}"):
            try:
                val = ast.literal_eval(dump)
            except (ValueError, SyntaxError):
                continue
            if isinstance(val, dict):
                args = val
        elif (m := _EXPLICIT.search(line)):
            cpu, space = True, m.group(1)
        elif "CPU KV cache size:" in line or "device_config=cpu" in line:
            cpu = True
        elif "VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme caution" in line and "warn" in line.lower():
            allow_long = True
        elif "User-specified max_model_len" in line and "WARNING" in line:
            allow_long = True
    if args is None:
        return None
    words: list[str] = []
    if allow_long:
        words.append("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1")
    if cpu and (bf16 := avx512_bf16_from_log(text)) is not None and args.get("mamba_ssm_cache_dtype") != "float32":
        words.append(f"{vllm_cpu.AVX512_BF16_ENV}={int(bf16)}")   # the machine the log came from
    if cpu and space is not None and args.get("kv_cache_memory_bytes") is None:
        gib = float(space)
        words.append(f"VLLM_CPU_KVCACHE_SPACE={int(gib) if gib.is_integer() else gib}")
    elif cpu:
        words.append("VLLM_TARGET_DEVICE=cpu")
    words += ["vllm", "serve", str(args.get("model") or args.get("model_tag") or "MODEL")]
    for key, val in args.items():
        if key in _FLAG_OF or val is None or val is False:
            continue
        flag = "--" + key.replace("_", "-")
        if key == "speculative_config" and isinstance(val, dict):
            words += [flag, json.dumps(val)]
        elif val is True:
            words.append(flag)
        elif isinstance(val, (int, float, str)):
            words += [flag, str(val)]
    return words
