"""The fixes a diagnosis offers, in order: the failure's own numbers (the host's kill, the engine's message) or a
capped start's own fix, then the planner's nearest configurations for the logged launch, else the engine's model-free
fixes from the log's numbers; each change once; with the notes on where the planner and the log disagree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from specbench.contracts import Fix, PlanResult
from specbench.doctor.hostfixes import host_fixes
from specbench.doctor.replan import planner_result
from specbench.engines.base import engine
from specbench.logs.facts import LogFacts
from specbench.logs.failures import Failure
from specbench.logs.launch_model import facts_model_source
from specbench.logs.warnings import LogWarning


def diagnosis_fixes(facts: LogFacts, failure: Failure | None, status: str, warns: tuple[LogWarning, ...],
                    with_fixes: bool, engine_version: str | None, gpu: str | None, draft_config: str | None,
                    text: str) -> tuple[PlanResult | None, tuple[Fix, ...], list[str]]:
    """(the planner's result, the fixes, notes). A failure's own numbers give the first fixes (the engine's
    `failure_fixes`, the host's); the planner's nearest configurations follow; with neither, the engine's model-free
    `log_fixes`. A healthy start gets none: the planner's nearby configurations serve less than it already does."""
    notes: list[str] = []
    plan: PlanResult | None = None
    planned: list[Fix] = []
    why: str | None = None
    if with_fixes and facts.engine is not None:
        plan, why = planner_result(facts, engine_version, gpu, draft_config, text)
        if plan is not None:
            planned = list(plan.fixes)
            notes += _plan_vs_log(plan, facts)
    src = facts_model_source(facts)
    path = facts.server_args.get("model_path") or facts.server_args.get("model")
    if src and isinstance(path, str) and src != path and not facts.model_config:
        notes.append(f"The model path {path} is not on this machine; its config was resolved by name to the bundled "
                     f"{src}, as `specbench plan` does.")
    if not with_fixes or (failure is None and not any(w.cap for w in warns)):
        return plan, (), notes + ([f"No fixes: {why}."] if why and failure is not None else [])
    # a failure's own numbers; for a capped start, the cap's own fix (the value that lifts it) before the planner's
    own = [Fix.from_json(fx) for fx in (_failure_fixes(facts, failure) if failure is not None else [
        fx for w in warns if w.cap for fx in w.fixes if any(v is not None for v in (fx.get("change") or {}).values())])]
    fixes = _dedupe(own + planned)
    if not fixes and failure is not None and facts.engine is not None:
        fixes = [Fix.from_json(fx) for fx in _log_fixes(facts, failure.kind)]
        if fixes:
            notes.append("Fixes are log-derived: no model config resolved, so they come from the log's own numbers "
                         "(pool sizes, free memory, weights), not from the planner.")
            why = None
    if why and not own:
        notes.append(f"No fixes: {why}.")
    return plan, tuple(fixes), notes


def _failure_fixes(facts: LogFacts, failure: Failure) -> Sequence[Mapping[str, object]]:
    """The failure's own numbers: the host's kill, else the engine's message (`Engine.failure_fixes`)."""
    return host_fixes(failure) or engine(facts.engine).failure_fixes(facts, failure)


def _dedupe(fixes: list[Fix]) -> list[Fix]:
    """The first fix for each change (the failure's own before the planner's for the same flag and value)."""
    seen: set[str] = set()
    out = []
    for fx in fixes:
        key = repr(sorted(fx.change.items())) + str(fx.extra.get("kind"))
        if key not in seen:
            seen.add(key)
            out.append(fx)
    return out


def _log_fixes(facts: LogFacts, kind: str) -> Sequence[Mapping[str, object]]:
    """The engine's own fixes from the log's numbers (`Engine.log_fixes`), for when the planner cannot run."""
    return engine(facts.engine).log_fixes(facts, kind) if facts.engine is not None else []


def _plan_vs_log(plan: PlanResult, facts: LogFacts) -> list[str]:
    """Calibration: where the planner's prediction for the logged launch differs from what the log measured."""
    out = []
    for key in ("kv_tokens", "max_mamba_cache_size", "max_running_requests"):
        want, got = getattr(plan, key), getattr(facts, key)
        if not isinstance(want, (int, float)) or not isinstance(got, (int, float)) or want == got:
            continue
        if key == "kv_tokens" and abs(want - got) <= 0.01 * max(abs(got), 1):
            continue  # within 1 %: the planner's model of resident memory, not a different rule
        out.append(f"Planner ({plan.engine_version}) predicts {key}={want}, the log has {got}.")
    return out
