"""Preflight of a server tuple through the planner (`specbench.plan.api.plan_command`), and the dry run.

`launch` when the plan is not `fails`; `fixed` (with `auto_fix = true`) when the nearest working configuration
from the plan's `fixes` at the same tp plans ok and is launched instead; `skipped` with the planner's reason
otherwise. `dry_run` shows every cell's verdict and exact command without launching anything.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from specbench.contracts import PlannerError, PlanOutcome, PlanResult
from specbench.contracts_dryrun import DryRunRow, PlanLimits
from specbench.engines.base import Engine, Launch, ServerAdapter, engine
from specbench.errors import UserError
from specbench.load.prompt_checks import random_prompts_warning
from specbench.matrix.adapters import adapter_for
from specbench.matrix.expansion import ServerTuple, expand
from specbench.matrix.schema import MatrixSpec
from specbench.matrix.visits import policy_of
from specbench.plan.concurrency import cell_warning


@dataclass(frozen=True)
class Preflight:
    """The verdict on one server tuple and what would be launched."""

    server: ServerTuple
    verdict: str  # launch | fixed | skipped
    plan_status: str | None  # the planner's ok | fails for what is launched; None without a planner
    plan: PlanOutcome
    launch: Launch
    settings: dict[str, Any]  # effective settings (requested + fix)
    reason: str | None = None
    fix: dict[str, object] | None = None  # the planner fix applied ({flag: value}), `fixed` only
    notes: tuple[str, ...] = ()
    asked_plan: PlanOutcome = None  # `fixed`: the plan of the asked settings, the one that failed


def _apply_fix(settings: dict[str, Any], change: Mapping[str, object], eng: Engine) -> dict[str, Any]:
    """The settings with a planner fix applied: the engine names the matrix axis each changed argument sets."""
    out = {**settings, "flags": dict(settings.get("flags") or {})}
    for key, value in change.items():
        name = eng.fix_axis(key)
        if key.isupper() and not key.startswith("-"):  # an environment variable (e.g. VLLM_CPU_KVCACHE_SPACE)
            out["env"] = {**dict(settings.get("env") or {}), key: str(value)}
        elif name is not None:
            out[name] = value
        else:  # any other engine flag: set it as a flag of this tuple
            flag = key if key.startswith("-") else "--" + key.replace("_", "-")
            out["flags"][flag] = value
    return out


def plan_launch(adapter: ServerAdapter, spec: MatrixSpec, launch: Launch, fixes: bool = True) -> PlanOutcome:
    """The planner's verdict for an argv (a `PlanResult`; a `PlannerError` where the adapter tolerates one), or None when there is no planner for this engine (`fixes=False`: without
    the nearest-fix search, for readers that need only the plan, e.g. `specbench predict`)."""
    if adapter.plan_engine is None:
        return None
    from specbench.contracts_inputs import PlanOptions
    from specbench.plan.api import plan_result

    p = spec.plan
    version = p.engine_version or adapter.default_plan_version()
    opts = PlanOptions(
        model_config=p.model_config_, draft_config=p.draft_config, gpu=p.gpu, gpu_mem_gib=p.gpu_mem_gib,
        engine=adapter.plan_engine, engine_version=version,
        avail_before_load_gib=p.avail_before_load_gib, weights_gib=p.weights_gib,
        draft_weights_gib=p.draft_weights_gib, non_kv_gib=p.non_kv_gib, fixes=fixes,
    )
    # the server's environment is part of what it allocates (VLLM_CPU_KVCACHE_SPACE selects vLLM's CPU rules
    # and its KV space; SGLANG_* switches): hand it to the planner as the leading VAR=value words of the command
    env_words = [f"{k}={v}" for k, v in launch.env.items() if k.startswith(("VLLM_", "SGLANG_"))]
    try:
        return plan_result(env_words + list(launch.argv), opts)
    except (UserError, ImportError, NotImplementedError) as exc:
        if adapter.tolerate_plan_errors:  # e.g. the tiny CPU models may be outside what the planner models
            return PlannerError(f"{type(exc).__name__}: {exc}")
        if not isinstance(exc, UserError):
            raise
        raise UserError(f"planner cannot plan {launch.argv[:3]}...: {exc} (check the matrix's [plan] table)") from None


def plan_unless_fixing(adapter: ServerAdapter, spec: MatrixSpec, launch: Launch) -> PlanOutcome:
    """`plan_launch` without the nearest-fix search, which runs only where `preflight` reads its result: a launch
    that fails in a matrix that auto-fixes. For the dry run's rows, which carry no fix list: the search is ~100
    plans per launch (4.3 s of the 4.7 s `predict` took on examples/qwen36-27b-dflash-ddtree.toml)."""
    plan = plan_launch(adapter, spec, launch, fixes=False)
    if spec.auto_fix and isinstance(plan, PlanResult) and plan.status == "fails":
        return plan_launch(adapter, spec, launch, fixes=True)
    return plan


def preflight(spec: MatrixSpec, st: ServerTuple, adapter: ServerAdapter,
              planner: Callable[[ServerAdapter, MatrixSpec, Launch], PlanOutcome] = plan_launch) -> Preflight:
    settings = dict(st.settings)
    launch = adapter.launch(spec.target(), settings)
    notes = tuple(settings.get("notes") or ()) + launch.notes
    plan = planner(adapter, spec, launch)
    status = _status(plan)
    if not isinstance(plan, PlanResult) or status != "fails":
        return Preflight(st, "launch", status, plan, launch, settings, notes=notes + _cap_note(plan, settings))
    reason = _plan_reason(plan)
    if spec.auto_fix:
        for fix in plan.fixes:
            change = dict(fix.change)
            fixed = _apply_fix(settings, change, engine(adapter.plan_engine))
            if int(fixed["tp"]) != st.tp:  # a fix must keep the tuple in its phase
                continue
            fl = adapter.launch(spec.target(), fixed)
            replan = planner(adapter, spec, fl)
            if _status(replan) == "fails":
                continue
            return Preflight(st, "fixed", _status(replan), replan, fl, fixed,
                             reason=f"auto_fix {change} (planner: {reason})", fix=change,
                             notes=notes + fl.notes + _cap_note(replan, fixed), asked_plan=plan)
        reason = f"{reason}; no fix at tp={st.tp} plans ok"
    return Preflight(st, "skipped", status, plan, launch, settings, reason=reason, notes=notes)


def _status(plan: PlanOutcome) -> str | None:
    """The planner's ok | fails; None without a plan (no planner, or a tolerated planner error)."""
    return plan.status if isinstance(plan, PlanResult) else None


def _planned_cap(plan: PlanOutcome) -> int | None:
    return plan.max_running_requests if isinstance(plan, PlanResult) else None


def _cap_note(plan: PlanOutcome, settings: dict[str, Any]) -> tuple[str, ...]:
    """The planner's max_running_requests is below the asked value (SGLang caps to it; for vLLM it is the
    concurrency its KV cache holds at full context, above which it preempts)."""
    asked, planned = settings.get("max_running_requests"), _planned_cap(plan)
    if isinstance(asked, int) and isinstance(planned, int) and planned < asked:
        return (f"planner: max_running_requests {planned} for this launch (asked {asked})",)
    return ()


def _plan_reason(plan: PlanResult) -> str:
    return str(plan.error or plan.reason or "planner: would fail")



# ----------------------------------------------------------------------------- dry run


def dry_run(spec: MatrixSpec,
            planner: Callable[[ServerAdapter, MatrixSpec, Launch], PlanOutcome] = plan_unless_fixing
            ) -> list[DryRunRow]:
    """One object per cell: cell, server (incl. tp), client, verdict, plan_status, command; nothing launched."""
    adapter = adapter_for(spec)
    tuples, cells = expand(spec)
    pfs = {st.server_id: preflight(spec, st, adapter, planner) for st in tuples}
    out: list[DryRunRow] = []
    for c in cells:
        pf = pfs[c.server_id]
        server = {k: v for k, v in pf.settings.items() if k != "notes"}
        out.append({
            "cell": c.cell_id, "server_id": c.server_id, "phase": c.phase, "label": c.label,
            "server": server, "client": c.client, "verdict": pf.verdict, "plan_status": pf.plan_status,
            "reason": pf.reason, "fix": pf.fix, "notes": list(pf.notes),
            "command": list(pf.launch.argv), "env": dict(pf.launch.env),
            "max_running_requests_planned": _planned_cap(pf.plan),
            "effective_concurrency_planned": _effective(c.client.get("concurrency"), _planned_cap(pf.plan)),
            "concurrency_warning": cell_warning(pf.plan if isinstance(pf.plan, PlanResult) else None,
                                                c.client.get("concurrency"), c.client.get("prompt_tokens"),
                                                c.client.get("output_tokens")),
            "expected_load_s": expected_load_s(c.client), "duration_warning": duration_warning(c.client),
            "plan_limits": plan_limits(pf.plan), "plan_limits_asked": plan_limits(pf.asked_plan),
            "repeat_policy": policy_of(c.client).as_json(), "aa_of": server.get("aa_of"),
            "prompts_warning": random_prompts_warning(c.client, server),
        })
    return out




def plan_limits(plan: PlanOutcome) -> PlanLimits | None:
    """The planner's running-request limits of a launch (docs/contracts.md, dry-run row `plan_limits`); None
    without a plan."""
    if plan is None:
        return None
    if isinstance(plan, PlannerError):
        return PlanLimits(status=None, error=None, engine_cap=None, max_running_requests=None,
                          requested_max_running_requests=None, kv_tokens=None, max_mamba_cache_size=None,
                          mamba_ratio=None, planner_error=plan.message)
    x = plan.extra  # SGLang's keys (null for an engine that does not emit them)
    return PlanLimits(status=plan.status, error=plan.error, engine_cap=plan.engine_cap,
                      max_running_requests=plan.max_running_requests,
                      requested_max_running_requests=x.get("requested_max_running_requests"),
                      kv_tokens=plan.kv_tokens, max_mamba_cache_size=plan.max_mamba_cache_size,
                      mamba_ratio=x.get("mamba_ratio"), planner_error=None)


# the plan keys a dry-run row carries for the "fastest setup that fits" table (plan/reach.py reads them)
LIMIT_KEYS = tuple(PlanLimits.__annotations__)


def _effective(concurrency: Any, cap: Any) -> int | None:
    """min(concurrency, the planner's max_running_requests): what the cell would run at once (load/integrity.py)."""
    if not isinstance(concurrency, int):
        return None
    return min(concurrency, cap) if isinstance(cap, int) and not isinstance(cap, bool) and cap > 0 else concurrency


# a cell whose arrivals alone are expected to take longer than this is named before anything runs
LONG_CELL_S = 600.0


def expected_load_s(client: dict[str, Any]) -> float | None:
    """Seconds the arrivals of a Poisson cell are expected to take: requests / rate per repeat (the mean of the
    sum of `num_requests` exponential gaps, load/schedule.py), times its planned repeats (a range: its min); None for
    a closed loop."""
    rate = client.get("request_rate")
    if not isinstance(rate, (int, float)) or isinstance(rate, bool) or rate <= 0 or rate == float("inf"):
        return None
    n = client.get("num_requests") or 0
    return float(n) / float(rate) * policy_of(client).min


def duration_warning(client: dict[str, Any]) -> str | None:
    """A one-line warning for a cell expected to run longer than LONG_CELL_S, None otherwise."""
    secs = expected_load_s(client)
    if secs is None or secs <= LONG_CELL_S:
        return None
    return (f"request_rate = {client.get('request_rate')} with {client.get('num_requests')} requests: the cell's "
            f"arrivals alone are expected to take {_duration(secs)}")


def _duration(secs: float) -> str:
    if secs < 3600:
        return f"~{secs / 60:.0f} min ({secs:,.0f} s)"
    if secs < 86400 * 2:
        return f"~{secs / 3600:.1f} h ({secs:,.0f} s)"
    return f"~{secs / 86400:.1f} days ({secs:,.0f} s)"


Row = TypeVar("Row", bound=Mapping[str, Any])


def iter_phases(rows: Sequence[Row]) -> Iterator[tuple[int, list[Row]]]:
    """The rows in runs of one phase each, in order (the dry run's rows, or the same with `predicted` added)."""
    phase: int | None = None
    group: list[Row] = []
    for r in rows:
        if r["phase"] != phase and group:
            yield phase or 0, group
            group = []
        phase = r["phase"]
        group.append(r)
    if group:
        yield phase or 0, group
