"""`specbench plan` for vLLM: a pasted `vllm serve ...` command -> the plan contract (docs/contracts.md).

Dispatched from `specbench.plan.api.plan_result` as `plan_vllm_command(argv, opts)`. One plan
(`plan_once`) runs its stages in order, each a small function returning a frozen value: the setup the engine
resolves and the weights (`_start`, plan_start.py), the max-model-length check, the KV budget K (`_cpu_budget` /
`_gpu_budget`), then the pool (`_pool_plan`; the V0 engine's own pool `_v0_plan`). `plan_vllm_command` assembles the
contract (a `PlanResult`) from it (contract.py), and the nearest working configurations re-plan through `plan_once`
(fixes.py).

Device: the CPU rule set (cpu.py) when the command says CPU (`VLLM_CPU_KVCACHE_SPACE=..` or
`VLLM_TARGET_DEVICE=cpu` among the leading env words, `--device cpu`) or `opts.gpu == "cpu"`; the GPU rule set
(gpu.py) otherwise. Both feed the shared pool maths of pool.py.

`max_running_requests` is defined as what the engine lets run at once at full length:
min(max_num_seqs, floor(Maximum concurrency)), where Maximum concurrency = num_blocks / blocks per request at
max_model_len, exactly as vLLM prints it. Shorter requests can run more (up to max_num_seqs).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

from specbench.contracts import GIB, ConcurrencyInputs, EnginePlan, PlanResult
from specbench.engines import versions
from specbench.engines.cli_flags import fail_on_unknown, unknown_flags_failure, unknown_flags_warning
from specbench.engines.vllm import cpu as vllm_cpu
from specbench.engines.vllm import gpu as vllm_gpu
from specbench.engines.vllm import start_checks as vllm_start
from specbench.engines.vllm.args import VllmArgs, parse_vllm_argv
from specbench.engines.vllm.common import NEWEST_VLLM, VLLM_RULE_SETS, Version, cdiv, format_gib
from specbench.engines.vllm.contract import contract, plan_budget_rows, plan_reason
from specbench.engines.vllm.fp8_sm8x import fp8_on_sm8x
from specbench.engines.vllm.gpu_fit import budget_terms, vllm_total_bytes
from specbench.engines.vllm.knobs import FLAG_LISTS, release_flags
from specbench.engines.vllm.layout import (
    MTP_METHODS,
    NO_DRAFT_METHODS,
    build_layer_specs,
    charge_for,
    derived_len_text,
    derived_max_model_len,
)
from specbench.engines.vllm.not_modelled import ep_start_failure, not_modelled
from specbench.engines.vllm.outcome import Context, VllmBudget, VllmPlan
from specbench.engines.vllm.plan_start import _draft_tp, _Start, _start
from specbench.engines.vllm.pool import Charge, Grouping, Pool, PoolFailure, blocks_per_request, lcm_all, size_pool
from specbench.engines.vllm.spec_checks import spec_start_failure
from specbench.errors import UserError
from specbench.specs.assumed import CONTEXT, demoted
from specbench.specs.estimate_error import estimate_error_keys
from specbench.specs.gpu import gpu_for
from specbench.specs.model_types import ModelSpec
from specbench.specs.resolve import load_spec_for

# ------------------------------------------------------------------------------------------ one plan


@dataclass(frozen=True)
class _Budget:
    """The KV budget stage: K (bytes per worker), the contract's `budget` dict, its log lines, a start-up failure."""

    K: int | None
    budget: VllmBudget
    lines: tuple[str, ...]
    failure: PoolFailure | None


def _failed(st: _Start, kind: str, text: str, K: int | None, budget: VllmBudget) -> VllmPlan:
    return VllmPlan("fails", text, kind, kv_budget_bytes=K, num_blocks=None, blocks_per_request=None,
                    max_concurrency=None, kv_tokens=None, max_running_requests=None,
                    max_model_len=st.setup.max_model_len, estimated_max_model_len=None, bytes_per_block=None,
                    group_size=None, groups=(), mamba_page=None, mamba_page_padded=None, conv_bytes=None,
                    ssm_bytes=None, budget=budget, log_lines=st.lines, warnings=st.warnings, **st.common())


def _too_long(args: VllmArgs, derived: int) -> tuple[str | None, str | None]:
    """(the engine's error, or a warning) for a --max-model-len above the model's derived length."""
    if args.max_model_len in (None, -1) or args.max_model_len <= derived:
        return None, None
    if (args.env_value("VLLM_ALLOW_LONG_MAX_MODEL_LEN") or "").lower() in ("1", "true"):
        return None, (f"max_model_len {args.max_model_len} is above the derived {derived}; allowed by "
                      f"VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (config/model.py warns only)")
    return derived_len_text(args.max_model_len, derived), None


def _cpu_budget(args: VllmArgs, ctx: Context, st: _Start) -> _Budget:
    """K = the CPU KV space (VLLM_CPU_KVCACHE_SPACE, --kv-cache-memory-bytes, or the node's memory; cpu.py)."""
    cb = vllm_cpu.kv_space_bytes(args, ctx.version, node_total_bytes=ctx.total_bytes,
                                 rss_bytes=int(ctx.non_kv_gib * GIB) if ctx.non_kv_gib is not None else None,
                                 gpu_memory_utilization=st.u)
    budget: VllmBudget = {"kv_cache_memory_bytes": cb.kv_bytes, "source": cb.source}
    lines = (cb.line,) if cb.line else ()
    if cb.failure is None and cb.kv_bytes is None:
        raise UserError(f"cannot plan the vLLM CPU KV space: {cb.source}")
    return _Budget(cb.kv_bytes, budget, lines, cb.failure)


def _gpu_budget(args: VllmArgs, ctx: Context, st: _Start) -> _Budget:
    """K = ceil(T·u) - weights - non-KV (gpu.py), with the budget rows' numbers."""
    assert ctx.gpu is not None
    gb = vllm_gpu.gpu_budget(args, st.loaded, st.setup, ctx.gpu, ctx.total_bytes or 0,
                             st.weights_bytes + st.draft_weights_bytes, ctx.non_kv_gib, ctx.free_at_start_gib)
    budget: VllmBudget = {"total_gib": round(gb.total_bytes / GIB, 3), "total_source": ctx.total_source,
              "gpu_memory_utilization": gb.u,
              "requested_gib": round(gb.requested_bytes / GIB, 3),
              "free_at_start_gib_estimate": round(gb.free_at_start_bytes / GIB, 3),
              "weights_gib": round(gb.weights_bytes / GIB, 3),
              "weights_source": "measured (--weights-gib)" if ctx.weights_gib is not None else st.weights_source,
              "non_kv_gib": round(gb.non_kv_bytes / GIB, 3),
              "non_kv_measured": gb.non_kv_measured,
              "cuda_graph_gib": round(gb.cuda_graph_bytes / GIB, 3),
              "activation_gib": round(gb.activation_bytes / GIB, 3) if not gb.non_kv_measured else None,
              "kv_cache_memory_bytes": gb.kv_bytes, "available_kv_gib": format_gib(gb.kv_bytes),
              "source": gb.source}
    # additive: per term, where its number comes from and its held-out (k-fold) error (gpu_fit.py::budget_terms)
    budget["terms"] = budget_terms(ctx.gpu, weights_measured=ctx.weights_gib is not None,
                                   non_kv_measured=gb.non_kv_measured, graph_applied=gb.cuda_graph_bytes > 0,
                                   gdn=getattr(st.loaded, "gdn", None) is not None,
                                   kv_bytes_given=args.kv_cache_memory_bytes is not None
                                   and not vllm_gpu.is_v0(st.setup.version))
    return _Budget(gb.kv_bytes, budget, tuple(gb.lines), gb.failure)


def _v0_plan(st: _Start, m: ModelSpec, K: int, budget: VllmBudget) -> VllmPlan:
    """The V0 engine (vLLM < 0.8): its own block pool (gpu.py::v0_pool)."""
    if m.linear_layers:
        raise UserError("the V0 engine (vLLM < 0.8) rule set does not model hybrid Mamba models")
    setup = st.setup
    p0 = vllm_gpu.v0_pool(m, setup, max(K, 0))
    st = st.more(lines=tuple(p0.lines))
    mrr = min(setup.max_num_seqs, int(p0.max_concurrency)) if p0.failure is None else None
    return VllmPlan("fails" if p0.failure else "ok", p0.failure.message if p0.failure else None,
                    p0.failure.kind if p0.failure else None, kv_budget_bytes=K, num_blocks=p0.num_blocks,
                    blocks_per_request=cdiv(setup.max_model_len, setup.block_size),
                    max_concurrency=p0.max_concurrency, kv_tokens=p0.kv_tokens,
                    max_running_requests=mrr, max_model_len=setup.max_model_len,
                    estimated_max_model_len=None, bytes_per_block=p0.block_bytes,
                    group_size=len(m.attention_layers), groups=(),
                    mamba_page=None, mamba_page_padded=None, conv_bytes=None, ssm_bytes=None, budget=budget,
                    log_lines=st.lines, warnings=st.warnings, **st.common())


def _group_lines(grouping: Grouping, charge: Charge, pool: Pool, v: Version) -> tuple[str, ...]:
    """kv_cache_utils.py (scheduler block size, 0.30+): logged for more than one group, after the capacity line."""
    sizes = tuple(g.spec.block_size if (g.kind != "mamba" or charge.mamba_mode != "none") else pool.max_model_len
                  for g in grouping.groups)
    if len(sizes) > 1 and v >= (0, 30, 0) and (pool.failure is None or pool.failure.kind == "mamba_blocks"):
        return (f"kv cache group sizes {sizes}", f"kv lcm block sizes {lcm_all(sizes)}")
    return ()


def _pool_plan(st: _Start, args: VllmArgs, m: ModelSpec, draft: ModelSpec | None, ctx: Context, K: int,
               budget: VllmBudget) -> VllmPlan:
    """The V1 pool: layer specs -> groups -> num_blocks, the capacity vLLM prints and its checks (pool.py)."""
    v, setup = ctx.version, st.setup
    lp = build_layer_specs(m, draft, setup, _draft_tp(args))
    st = st.more(lines=tuple(lp.lines))
    charge = charge_for(dataclasses.replace(setup, block_size=lp.block_size))
    mamba_check = ctx.device == "cuda" and v >= (0, 20, 0) and args.full_cudagraphs
    if ctx.device == "cuda" and (0, 18, 0) <= v < (0, 20, 0) and m.linear_layers and args.full_cudagraphs:
        st = st.more(warnings=("0.18-0.19 cap CUDA-graph capture sizes to the Mamba cache blocks instead of failing",))
    grouping, pool = size_pool(list(lp.specs), K, charge, v, ctx.device,
                                 auto_fit=setup.auto_fit, max_num_seqs=setup.max_num_seqs, mamba_check=mamba_check,
                                 num_gpu_blocks_override=args.num_gpu_blocks_override,
                                 disable_hma=bool(args.disable_hybrid_kv_cache_manager))
    st = st.more(lines=tuple(pool.log_lines), warnings=tuple(pool.warnings))
    groups = tuple({"kind": g.kind, "layers": g.layers, "block_size": g.spec.block_size,
                    "page_bytes": g.spec.page, "bytes_per_block": g.bytes_per_block} for g in grouping.groups)
    st = st.more(lines=_group_lines(grouping, charge, pool, v))
    failure = pool.failure
    mrr = None
    if failure is None:
        mrr = min(setup.max_num_seqs, math.floor(pool.max_concurrency))
        if mrr < 1:
            st = st.more(warnings=("the pool holds less than one full-length request",))
    return VllmPlan(
        "fails" if failure else "ok", failure.message if failure else None, failure.kind if failure else None,
        kv_budget_bytes=K, num_blocks=pool.num_blocks, blocks_per_request=pool.blocks_per_request,
        max_concurrency=pool.max_concurrency, kv_tokens=pool.kv_tokens, max_running_requests=mrr,
        max_model_len=pool.max_model_len, estimated_max_model_len=pool.estimated_max_model_len,
        bytes_per_block=grouping.bytes_per_block, group_size=grouping.group_size, groups=groups,
        mamba_page=lp.mamba_page, mamba_page_padded=lp.mamba_page_padded, conv_bytes=lp.conv_bytes,
        ssm_bytes=lp.ssm_bytes, budget=budget, log_lines=st.lines, warnings=st.warnings,
        fits=_fits(grouping, charge, pool.num_blocks) if failure is None else None,
        **st.common(lp.block_size))


def _fits(grouping: Grouping, charge: Charge, num_blocks: int) -> Callable[[int], int]:
    """Requests of `ctx` tokens that run at once: the blocks of the pool over the blocks one is charged
    (kv_cache_utils.py::get_max_concurrency_for_kv_cache_config@0.32.0 at that length; the scheduler admits by free
    blocks, v1/core/sched/scheduler.py)."""
    return lambda ctx: num_blocks // max(1, blocks_per_request(grouping, charge, ctx))


def plan_once(args: VllmArgs, m: ModelSpec, draft: ModelSpec | None, ctx: Context) -> VllmPlan:
    """One plan of one command: setup -> length check -> KV budget K -> the pool (V0: its own pool)."""
    st = _start(args, m, draft, ctx)
    # the engine's own non-memory checks (start_checks.py; the expert-parallel ones: not_modelled.py): the flags,
    # then the model's and the drafter's configs
    model_error, assumed = vllm_start.model_outcome(args, m, draft)
    start_error = (vllm_start.first_failure(args) or ep_start_failure(args) or spec_start_failure(args)
                   or model_error)
    if start_error is not None:
        return _failed(st, "start_check", start_error, None, {})
    st = st.more(warnings=vllm_start.model_warnings(args, m, draft) + assumed)
    error, warning = _too_long(args, derived_max_model_len(m, ctx.version, args.hf_overrides_dict))
    if error is not None and (late := demoted(error, (CONTEXT,), (m,))) is not None:
        error, warning = None, late  # the derived length of a stand-in's assumed context decides nothing
    if error is not None:
        return _failed(st, "derived_max_len", error, None, {})
    if warning is not None:
        st = st.more(warnings=(warning,))
    b = _cpu_budget(args, ctx, st) if ctx.device == "cpu" else _gpu_budget(args, ctx, st)
    st = st.more(lines=b.lines)
    if b.failure is not None:
        return _failed(st, b.failure.kind, b.failure.message, b.K, b.budget)
    assert b.K is not None
    f8 = fp8_on_sm8x(args, st.loaded, ctx.gpu, ctx.total_bytes or 0, st.u, ctx.version) \
        if ctx.device != "cpu" else None
    if f8 is not None:
        st = st.more(warnings=f8.warnings)
        if f8.failure is not None:
            return _failed(st, "fp8_marlin_oom", f8.failure, b.K, b.budget)
    if ctx.device != "cpu" and vllm_gpu.is_v0(ctx.version):
        return _v0_plan(st, m, b.K, b.budget)
    return _pool_plan(st, args, m, draft, ctx, b.K, b.budget)




# ------------------------------------------------------------------------------------------ entry point


def _concurrency(args: VllmArgs, p: VllmPlan) -> ConcurrencyInputs:
    """What the planner needs to state concurrency (plan/concurrency.py): the engine's own cap (max_num_seqs,
    SchedulerConfig), the asked context (max_model_len), how many requests of c tokens the pool holds (`fits`: the
    blocks of the pool over one request's charge), the asked --max-num-seqs and the KV tokens for the over-commit
    warning. None values when the plan fails."""
    ok = p.status == "ok" and p.fits is not None
    return ConcurrencyInputs("vLLM", p.setup.max_num_seqs if ok else None, p.max_model_len, p.fits if ok else None,
                             args.max_num_seqs, p.kv_tokens or 0)


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
    if s is not None and s.kind not in NO_DRAFT_METHODS and s.kind not in MTP_METHODS:
        if s.model and s.model == args.model and not opts.draft_config:
            draft = m
        else:
            draft = load_spec_for(opts.draft_config, s.model, "the draft model", "--draft-config")
    return m, draft


def context_for(args: VllmArgs, opts) -> Context:
    version_text = opts.engine_version or NEWEST_VLLM
    # the V0 rules (gpu.py::v0_pool, worker/worker.py of the 0.6 line) are the oldest vLLM code read
    v, newer = versions.rule_set_for(version_text, VLLM_RULE_SETS, "vLLM", oldest="0.6.0")
    device = detect_device(args, opts.gpu)
    for name, val in (("--weights-gib", opts.weights_gib), ("--draft-weights-gib", opts.draft_weights_gib),
                      ("--non-kv-gib", opts.non_kv_gib)):
        if val is not None and val < 0:
            raise UserError(f"{name} must not be negative, got {val}")
    if device == "cpu":
        total = int(opts.gpu_mem_gib * GIB) if opts.gpu_mem_gib else None
        isa = getattr(opts, "cpu_isa", None) or vllm_cpu.cpu_isa(args)
        return Context(version_text, v, "cpu", None, total, opts.weights_gib, opts.draft_weights_gib, opts.non_kv_gib,
                       avx512_bf16=isa.avx512_bf16, amx_tile=isa.amx_tile, cpu_isa_source=isa.source,
                       version_warning=newer)
    gpu = gpu_for(opts.gpu, opts.gpu_mem_gib)
    total, total_source = vllm_total_bytes(gpu)  # the total vLLM sees (torch's), not nvidia-smi's (gpu_fit.py)
    return Context(version_text, v, "cuda", gpu, total, opts.weights_gib, opts.draft_weights_gib, opts.non_kv_gib,
                   getattr(opts, "avail_before_load_gib", None), version_warning=newer, total_source=total_source)


def plan_vllm_command(argv: list[str], opts) -> EnginePlan:
    """The plan of a vLLM launch command (see module docstring), read as `--engine-version`'s release reads it: its
    unknown flags are reported, not planned."""
    args = parse_vllm_argv(list(argv), getattr(opts, "engine_version", None))
    m, draft = load_models(args, opts)
    ctx = context_for(args, opts)
    p = plan_once(args, m, draft, ctx)
    out = contract(p, ctx)
    out["model"] = m.name
    out["model_kind"] = m.kind_label
    out["draft_model"] = draft.name if draft is not None else None
    w_src = str(p.budget.get("weights_source") or out.get("weights_source") or "")  # p.budget is out["budget"]
    draft_gib = out.get("draft_weights_gib")
    out.update(estimate_error_keys(m, draft, w_src, w_src, draft_gib if isinstance(draft_gib, float) else None))
    out["ignored_flags"] = list(args.ignored)
    out["not_modelled"] = not_modelled(args)
    out["unknown_flags"] = list(args.unknown)
    flags = release_flags(getattr(opts, "engine_version", None))
    warning = unknown_flags_warning("vLLM", flags.release, args.unknown)
    if warning:
        prior = out.get("warnings")
        out["warnings"] = [*(prior if isinstance(prior, list) else []), warning]
    out["reason"] = plan_reason(p, ctx)
    out["gpu"] = "CPU node" if ctx.device == "cpu" else (ctx.gpu.name if ctx.gpu else None)
    out["cpu_isa"] = ({"avx512_bf16": ctx.avx512_bf16, "amx_tile": ctx.amx_tile, "source": ctx.cpu_isa_source}
                      if ctx.device == "cpu" else None)
    out["tp"] = args.tp
    out["dp"], out["pp"] = args.dp, args.pp  # the launch's GPUs: tp x dp x pp (the headline says them)
    out["era"] = f"vLLM {'CPU' if ctx.device == 'cpu' else 'GPU'} {'V0' if vllm_gpu.is_v0(ctx.version) else 'V1'}"
    out["budget_rows"] = plan_budget_rows(out)
    if getattr(opts, "fixes", True):
        from specbench.engines.vllm.fixes import per_tp_fixes

        fixes, table = per_tp_fixes(plan_once, args, m, draft, ctx, tuple(getattr(opts, "tp_sizes", (1, 2, 4, 8))))
        out["fixes"] = fixes
        out["per_tp"] = table
    else:
        out["fixes"] = []
    # the memory plan above is what it would be without them; the server itself never gets there
    fail_on_unknown(out, unknown_flags_failure("vLLM", FLAG_LISTS, getattr(opts, "engine_version", None),
                                               args.unknown))
    return EnginePlan(PlanResult.from_json(out), _concurrency(args, p))  # the planner words the concurrency
