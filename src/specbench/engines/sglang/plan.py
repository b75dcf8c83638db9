"""SGLang startup memory plan: inputs (args, model, draft, GPU, measured values) -> `SglangPlan`. Pure.

Order of events (sglang/srt/managers/scheduler.py::Scheduler.init_model_worker@0.5.15.post1 loads the target, then
the draft worker, then init_memory_pools; sglang/srt/model_executor/model_runner.py::ModelRunner.initialize
@0.5.12.post1 sizes the pools inside the target's runner, before the draft exists; R in
sglang/srt/model_executor/model_runner_kv_cache_mixin.py::ModelRunnerKVCacheMixin._profile_available_bytes of both):
B = free memory before weights (`Load weight begin. avail mem=B`); target weights W load; from 0.5.14 the
draft weights load BEFORE the pools are sized (<= 0.5.13: after); then R = A − B·(1−f) with A the free memory
at sizing time; the Mamba pool takes its share; the KV pool gets the rest.

`plan_sglang` runs the stages in that order: `plan_stages.py` (setup -> weights -> budget), `plan_slots.py` (Mamba
strategy -> KV cell), `plan_alloc.py` (pools -> allocation sizes), `plan_verdict.py` (warnings, log lines); then
assembles the plan.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from specbench.contracts import MemorySplit
from specbench.engines.sglang.args import SglangArgs
from specbench.engines.sglang.formulas import kv_dtype
from specbench.engines.sglang.plan_alloc import allocation_sizes, plan_pools
from specbench.engines.sglang.plan_slots import Mamba, Refusal, choose_mamba, kv_cell
from specbench.engines.sglang.plan_stages import (
    Budget,
    Measured,
    Setup,
    Weights,
    no_memory_error,
    plan_budget,
    plan_weights,
    resolve_setup,
)
from specbench.engines.sglang.plan_verdict import log_lines, verdict_warnings
from specbench.engines.sglang.start_checks import check_mamba, model_warnings, start_outcome
from specbench.specs.gpu import GpuSpec
from specbench.specs.model_types import ModelSpec


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
    context_overhead_gib: float
    context_overhead_source: str
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
    swa_kv_tokens: int | None
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
    swa_k_size_gib: float | None = None   # hybrid SWA pool: K / V of the SWA layers (k_size_gib: the full layers')
    swa_v_size_gib: float | None = None
    # DFLASH (0.5.14+): the worker's copy of its drafter's K/V weights, taken from the free memory before the pools
    # are sized (plan_stages.py::dflash_kv_weight_copy_bytes); 0 for every other launch
    draft_kv_weight_copy_gib: float = 0.0

    def memory_split(self) -> MemorySplit:
        """Weights, drafter weights, the Mamba / GDN state pools (conv + ssm + the speculative intermediate state and
        conv window), the KV cache (K + V of the target and of the drafter: SGLang allocates the drafter's KV pool
        beside the target's, the render's "KV cache" row) and the GPU's total, GiB per GPU."""
        state = [x for x in (self.conv_state_gib, self.ssm_state_gib, self.intermediate_ssm_state_gib,
                             self.intermediate_conv_window_gib) if x is not None]
        kv = self.k_size_gib + self.v_size_gib + 2 * (self.draft_k_size_gib or 0.0)
        return MemorySplit(round(self.weights_gib, 3), round(self.draft_weights_gib, 3),
                           round(sum(state), 3) if state else None, round(kv, 2), self.gpu_total_gib)

    def contract(self) -> dict[str, object]:
        """The keys of the plan contract in docs/contracts.md (plus extras), in the order they are written."""
        d = asdict(self)
        out: dict[str, object] = {
            "status": self.status, "error": self.error, "engine": "sglang", "engine_version": self.engine_version,
            "mem_fraction_static": self.mem_fraction_static, "weights_gib": round(self.weights_gib, 3),
            "draft_weights_gib": round(self.draft_weights_gib, 3), "kv_tokens": self.kv_tokens,
            "k_size_gib": round(self.k_size_gib, 2), "v_size_gib": round(self.v_size_gib, 2),
            "max_mamba_cache_size": self.max_mamba_cache_size,
            "conv_state_gib": _r(self.conv_state_gib), "ssm_state_gib": _r(self.ssm_state_gib),
            "intermediate_ssm_state_gib": _r(self.intermediate_ssm_state_gib),
            "max_running_requests": self.max_running_requests,
            "memory": self.memory_split().to_json(),
        }
        for k, v in d.items():
            if k not in out:
                out[k] = list(v) if isinstance(v, tuple) else v
        return out


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


def plan_sglang(args: SglangArgs, m: ModelSpec, draft: ModelSpec | None, gpu: GpuSpec, version_text: str,
                measured: Measured = Measured()) -> SglangPlan:
    outcome = start_outcome(args, m, draft, version_text)
    start = outcome.failure
    if start is not None and start.check in ("speculative_algorithm", "dflash_block"):
        args = args.with_(speculative_algorithm=None)  # the budget as far as it gets: without the refused spec
    s = resolve_setup(args, m, draft, gpu, version_text)
    w = plan_weights(args, m, draft, s, measured)
    m = w.model
    b = plan_budget(args, gpu, s, w, measured, draft)
    if start is not None:
        return _failed(_budget_plan(args, gpu, s, w, b, Mamba(), args.kv_cache_dtype or "auto"), start.error,
                       "start_check")
    mamba = choose_mamba(args, m, s)
    if isinstance(mamba, Refusal):
        return _failed(_budget_plan(args, gpu, s, w, b, mamba.mamba, kv_dtype(args, m)), mamba.error, mamba.kind)
    mcheck = check_mamba(args, m, mamba.strategy, s.spec.num_draft_tokens)
    if mcheck is not None:
        return _failed(_budget_plan(args, gpu, s, w, b, mamba, kv_dtype(args, m)), mcheck.error, "start_check")
    err = no_memory_error(s, b)
    if err is not None:
        return _failed(_budget_plan(args, gpu, s, w, b, mamba, kv_dtype(args, m)), err, "weights_leave_no_memory")
    cell = kv_cell(args, m, draft, s)
    pp = plan_pools(args, m, s, b, mamba, cell)
    sizes = allocation_sizes(args, m, draft, s, cell, mamba, pp)
    warnings = (verdict_warnings(args, s, w, b, mamba, pp, sizes, measured) + model_warnings(args, m, draft)
                + outcome.assumed)
    pools = pp.pools
    return replace(
        _budget_plan(args, gpu, s, w, b, mamba, cell.dtype, warnings, pp.notes),
        status="ok" if pools.error is None else "fails", error=pools.error, error_kind=pools.error_kind,
        kv_cell_bytes=cell.total, kv_tokens=pools.kv_tokens,
        swa_kv_tokens=sizes.swa_kv_tokens, swa_k_size_gib=_r(sizes.swa_k_gib), swa_v_size_gib=_r(sizes.swa_v_gib),
        k_size_gib=sizes.k_gib,
        v_size_gib=sizes.v_gib, draft_k_size_gib=_r(sizes.draft_k_gib), max_mamba_cache_size=pools.mamba_slots,
        mamba_full_memory_ratio=pp.full_memory_ratio if m.linear_layers else None, conv_state_gib=sizes.conv_gib,
        ssm_state_gib=sizes.ssm_gib, intermediate_ssm_state_gib=sizes.intermediate_ssm_gib,
        intermediate_conv_window_gib=sizes.intermediate_conv_gib, spec_scratch_gib=round(pools.scratch_gib, 3),
        spec_scratch_requests=pools.scratch_reqs, max_running_requests=pools.max_running_requests,
        requested_max_running_requests=pp.requested_mrr,
        log_lines=log_lines(s, w, b, cell.dtype, pp, sizes))


def _budget_plan(args: SglangArgs, gpu: GpuSpec, s: Setup, w: Weights, b: Budget, mamba: Mamba, kv_dtype: str,
                 more_warnings: tuple[str, ...] = (), more_notes: tuple[str, ...] = ()) -> SglangPlan:
    """What every plan states, failing or not (the inputs and the memory budget before the pools), with empty pools:
    a configuration the engine refuses before it sizes any pool is this plan with its error (`_failed`)."""
    st = mamba.state
    return SglangPlan(
        status="fails", error=None, error_kind=None, kv_dtype=kv_dtype, kv_cell_bytes=0, kv_tokens=0,
        swa_kv_tokens=None, k_size_gib=0.0, v_size_gib=0.0, draft_k_size_gib=None, max_mamba_cache_size=None,
        mamba_full_memory_ratio=None, conv_state_gib=None, ssm_state_gib=None, intermediate_ssm_state_gib=None,
        intermediate_conv_window_gib=None, spec_scratch_gib=0.0, spec_scratch_requests=0, max_running_requests=0,
        requested_max_running_requests=args.max_running_requests, log_lines=(),
        engine_version=s.version_text, era=s.rules.era, gpu=gpu.name, gpu_total_gib=round(gpu.total_gib, 2), tp=s.tp,
        mem_fraction_static=s.mem_fraction, mem_fraction_defaulted=args.mem_fraction_static is None,
        context_len=s.context_len, avail_before_load_gib=round(b.before_load_gib, 3),
        avail_before_load_source=b.before_load_source, context_overhead_gib=b.context_overhead_gib,
        context_overhead_source=b.context_overhead_source, weights_gib=w.gib, weights_source=w.source,
        weights_estimate_gib=round(w.estimate_gib, 3), draft_weights_gib=w.draft_gib,
        draft_weights_source=w.draft_source, draft_loaded_before_sizing=b.draft_before_sizing,
        avail_at_sizing_gib=round(b.at_sizing_gib, 3), slack_gib=round(b.slack_gib, 3), rest_gib=round(b.rest_gib, 3),
        draft_kv_weight_copy_gib=round(b.dflash_kv_copy_gib, 3),
        spec_algorithm=s.spec.algorithm, draft_tokens=s.spec.num_draft_tokens,
        chunked_prefill_size=s.defaults.chunked_prefill_size, cuda_graph_max_bs=s.defaults.decode_max_bs,
        graph_reserve_gib=round(s.defaults.graph_reserve_mb / 1024, 3),
        warnings=s.warnings + w.warnings + more_warnings, notes=s.notes + w.notes + more_notes,
        ignored_flags=args.ignored, weights_quant_label=w.model.quant.label,
        mamba_per_slot_bytes=st.per_slot if st else None, mamba_ratio=mamba.ratio, mamba_strategy=mamba.strategy)


def _failed(budget: SglangPlan, err: str, kind: str) -> SglangPlan:
    """A configuration the engine refuses before it sizes any pool: the budget as far as it got, empty pools."""
    return replace(budget, error=err, error_kind=kind)
