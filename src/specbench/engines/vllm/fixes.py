"""The nearest working vLLM configurations: per TP, the largest --max-num-seqs, the longest --max-model-len and the
smallest --gpu-memory-utilization (CPU: VLLM_CPU_KVCACHE_SPACE) that start, each found by re-planning
(engines/vllm/plan.py::plan_once)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypedDict

from specbench.engines.base import FixResultJson
from specbench.engines.search import last_true
from specbench.engines.vllm.args import VllmArgs
from specbench.engines.vllm.layout import derived_max_model_len
from specbench.engines.vllm.outcome import Context, VllmPlan
from specbench.errors import UserError
from specbench.specs.model_types import ModelSpec

MNS_SEARCH_MAX = 4096
U_GRID = tuple(round(0.30 + 0.01 * i, 2) for i in range(70))  # 0.30 .. 0.99
# failures that a smaller --gpu-memory-utilization cures (memory held beyond ceil(T x u): fp8_sm8x.py)
LOWER_U_HELPS = ("fp8_marlin_oom",)


class VllmFixResult(FixResultJson):
    """What a fixed vLLM launch plans to (plan JSON `fixes[].result`): the shared keys and its pool's numbers."""

    max_concurrency: float | None
    num_blocks: int | None
    max_model_len: int
    gpu_memory_utilization: float


def _result(p: VllmPlan) -> VllmFixResult:
    return {"status": p.status, "error": p.error, "kv_tokens": p.kv_tokens,
            "max_concurrency": round(p.max_concurrency, 2) if p.max_concurrency is not None else None,
            "num_blocks": p.num_blocks, "max_running_requests": p.max_running_requests,
            "max_model_len": p.max_model_len, "gpu_memory_utilization": p.u}


@dataclass(frozen=True)
class _Replan:
    """Plans the launch again with changed arguments, through the `plan_once` that plan.py hands in (this module
    does not import plan.py, which calls it)."""

    plan_once: Callable[[VllmArgs, ModelSpec, ModelSpec | None, Context], VllmPlan]
    m: ModelSpec
    draft: ModelSpec | None
    ctx: Context

    def plan(self, args: VllmArgs) -> VllmPlan:
        return self.plan_once(args, self.m, self.draft, self.ctx)

    def attempt(self, args: VllmArgs) -> VllmPlan | None:
        try:
            return self.plan(args)
        except UserError:
            return None

    def ok(self, args: VllmArgs) -> bool:
        p = self.attempt(args)
        return p is not None and p.status == "ok"


def per_tp_fixes(plan_once: Callable[[VllmArgs, ModelSpec, ModelSpec | None, Context], VllmPlan], args: VllmArgs,
                 m: ModelSpec, draft: ModelSpec | None, ctx: Context,
                 tp_sizes: tuple[int, ...]) -> tuple[list[VllmFix], list[VllmTpJson]]:
    """Per TP: the largest --max-num-seqs, the longest --max-model-len and the smallest --gpu-memory-utilization
    (CPU: the smallest VLLM_CPU_KVCACHE_SPACE) that start, each by re-planning with `plan_once`
    (plan.py::plan_once). Returns (fixes nearest first, per-TP table)."""
    r = _Replan(plan_once, m, draft, ctx)
    fixes: list[VllmFix] = []
    table: list[VllmTpJson] = []
    order = [args.tp] + [t for t in tp_sizes if t != args.tp]
    derived = derived_max_model_len(m, ctx.version, args.hf_overrides_dict)
    gpus = args.tp * max(1, args.dp)  # with data parallelism, another TP keeps the GPUs the launch has
    if args.dp > 1:
        order = [t for t in order if gpus % t == 0]
    for tp in order:
        dp = gpus // tp if args.dp > 1 else args.dp
        a = args.with_(tp=tp, dp=dp)
        base: dict[str, int] = {} if tp == args.tp else {"--tensor-parallel-size": tp}
        if base and args.dp > 1:
            base["--data-parallel-size"] = dp
        at = r.attempt(a)
        if at is None:
            try:
                r.plan(a)
            except UserError as exc:
                table.append({"tp": tp, "error": str(exc)})
            continue
        mns_hi = max(MNS_SEARCH_MAX, at.setup.max_num_seqs)
        best_mns = last_true(1, mns_hi, lambda x: r.ok(a.with_(max_num_seqs=x)))  # noqa: B023 (searched at once)
        L0 = at.max_model_len
        len_hi = derived
        if (a.env_value("VLLM_ALLOW_LONG_MAX_MODEL_LEN") or "").lower() in ("1", "true"):
            len_hi = max(derived, L0)
        best_len = last_true(1, len_hi, lambda x: r.ok(a.with_(max_model_len=x)))  # noqa: B023 (searched at once)
        min_u = None
        min_space = None
        if ctx.device == "cpu":
            if a.env_value("VLLM_CPU_KVCACHE_SPACE") not in (None, ""):
                env = tuple((k, v) for k, v in a.env if k != "VLLM_CPU_KVCACHE_SPACE")
                for g in range(1, 257):
                    if r.ok(a.with_(env=env + (("VLLM_CPU_KVCACHE_SPACE", str(g)),))):
                        min_space = g
                        break
        elif a.kv_cache_memory_bytes is None and at.error_kind in LOWER_U_HELPS:
            # memory held outside the budget: the fix is the largest fraction below the asked one that starts
            min_u = next((u for u in reversed(U_GRID) if u < at.u and r.ok(a.with_(gpu_memory_utilization=u))), None)
        elif a.kv_cache_memory_bytes is None:
            for u in U_GRID:
                if r.ok(a.with_(gpu_memory_utilization=u)):
                    min_u = u
                    break
        table.append({"tp": tp, "error": None, "status_as_requested": at.status,
                      "max_num_seqs": best_mns, "max_model_len": best_len, "min_gpu_memory_utilization": min_u,
                      "min_cpu_kvcache_space_gib": min_space,
                      # the SGLang-shaped names the plan renderer reads (vLLM's analogues)
                      "max_running_requests": best_mns, "min_mem_fraction_static": min_u,
                      "max_context_length": best_len, "max_draft_tokens": None})
        cands: list[dict[str, int | float]] = []
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
            p = r.attempt(_apply(a, ch))
            if p is not None and p.status == "ok":
                fixes.append({"change": ch, "result": _result(p)})
    return fixes, table


class VllmFix(TypedDict):
    """One nearest working configuration (plan JSON `fixes[]`): the flags (or VLLM_CPU_KVCACHE_SPACE) it changes and
    what the launch then plans to."""

    change: dict[str, int | float]
    result: VllmFixResult


class VllmTpJson(TypedDict, total=False):
    """One row of the per-TP table (plan JSON `per_tp[]`; contracts_per_tp.py::VllmTpRow reads it back): a TP that
    cannot be planned has only `tp` and `error`."""

    tp: int
    error: str | None
    status_as_requested: str
    max_num_seqs: int | None
    max_model_len: int | None
    min_gpu_memory_utilization: float | None
    min_cpu_kvcache_space_gib: int | None
    max_running_requests: int | None
    min_mem_fraction_static: float | None
    max_context_length: int | None
    max_draft_tokens: int | None


class _Changed(TypedDict, total=False):
    """The VllmArgs fields a fix's change sets (`VllmArgs.with_` keywords)."""

    max_num_seqs: int
    max_model_len: int
    gpu_memory_utilization: float
    tp: int
    dp: int
    env: tuple[tuple[str, str], ...]


def _apply(a: VllmArgs, ch: Mapping[str, int | float]) -> VllmArgs:
    kw: _Changed = {}
    for k, val in ch.items():
        if k == "--max-num-seqs":
            kw["max_num_seqs"] = int(val)
        elif k == "--max-model-len":
            kw["max_model_len"] = int(val)
        elif k == "--gpu-memory-utilization":
            kw["gpu_memory_utilization"] = float(val)
        elif k == "--tensor-parallel-size":
            kw["tp"] = int(val)
        elif k == "--data-parallel-size":
            kw["dp"] = int(val)
        elif k == "VLLM_CPU_KVCACHE_SPACE":
            kw["env"] = tuple((x, y) for x, y in a.env if x != k) + ((k, str(val)),)
    return a.with_(**kw)
