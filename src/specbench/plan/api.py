"""The planner's one entry point: a pasted launch command + options -> the plan (`PlanResult`; `plan_command`:
its JSON contract, a dict).

Used by `specbench plan`, `specbench doctor` (fixes from measured values), the runner's preflight and the
benchmarks. The command is read as a shell would run it (`specbench.engines.command.read_command`: docker, env,
unsupported servers, shell variables); the engine is the one named (`--engine`) or the one that recognises the
command; its package plans it, with the models resolved at the command's `--revision` (`specs/resolve.py`).
"""

from __future__ import annotations

import os
from typing import Any

from specbench.contracts import EnginePlan, PlanResult
from specbench.contracts_inputs import PlanOptions
from specbench.engines.command import read_command, revisions_of
from specbench.plan.concurrency import KEYS as CONCURRENCY_KEYS
from specbench.plan.concurrency import concurrency, overcommit_warning
from specbench.specs.gpu import DEFAULT_GPU


def plan_command(argv: list[str] | str, opts: PlanOptions = PlanOptions()) -> dict[str, Any]:
    """The plan as the JSON contract (`plan --json`, the runner's store, the doctor's `plan` key)."""
    return plan_result(argv, opts).to_json()


def plan_result(argv: list[str] | str, opts: PlanOptions = PlanOptions()) -> PlanResult:
    """The plan of a launch command: the engine's `PlanResult`, with where its configs came from and the
    concurrency said one way for every engine."""
    from specbench.specs.resolve import quantization_flag, revisions

    cmd = read_command(argv, opts.engine)
    revs = revisions_of(cmd.argv)
    if opts.revision:
        revs["model"] = opts.revision
    with revisions(revs), quantization_flag(_quantization_of(cmd.argv)):
        planned = cmd.engine.plan(cmd.argv, opts)
        _target_is_not_a_drafter(opts.model_config or planned.result.model)
        added = origin_keys(planned.result, opts, cmd.notes)
    added.update(_concurrency_keys(planned))
    for key in CONCURRENCY_KEYS:  # an engine whose rules do not state them yet says null (docs/contracts.md)
        added.setdefault(key, None)
    return planned.result.updated(added)


def _target_is_not_a_drafter(source: str | None) -> None:
    """Identity before numbers: a drafter's config (DFlash, EAGLE) never stands for the target it drafts for."""
    from specbench.errors import UserError
    from specbench.specs.resolve import load_model_spec

    if not source:
        return
    try:
        spec = load_model_spec(source)
    except UserError:
        return
    if spec.draft is not None:
        raise UserError(f"the target {source!r} resolves to a drafter's config ({spec.architecture}, a {spec.draft.kind} "
                        "draft model): a target is planned on its own config; pass --model-config PATH (its "
                        "config.json or model folder)")


def _quantization_of(argv: list[str]) -> str | None:
    """The command's `--quantization` value (both engines spell it so; vLLM also `-q`): what a checkpoint whose
    config is out of reach carries (specs/standin.py)."""
    for i, w in enumerate(argv):
        flag, eq, val = w.partition("=")
        if flag in ("--quantization", "-q"):
            return val if eq else (argv[i + 1] if i + 1 < len(argv) else None)
    return None


def _concurrency_keys(planned: EnginePlan) -> dict[str, Any]:
    """The concurrency keys from the numbers the engine handed over (contracts.py::ConcurrencyInputs; engines sit
    below the planner, so they hand over the numbers and plan/concurrency.py words them), and the over-commit
    warning."""
    given = planned.concurrency
    if given is None:
        return {}
    c = concurrency(given.cap, given.context, given.fits)
    keys = c.keys()
    warning = overcommit_warning(given.asked, c, given.kv_tokens or 0, given.engine)
    if warning:
        keys["warnings"] = [*planned.result.warnings, warning]
    return keys


def origin_keys(plan: PlanResult, opts: PlanOptions, command_notes: tuple[str, ...]) -> dict[str, Any]:
    """`model_source`, `draft_model_source`, `model_notes`: where the configs were found and what that means for
    the weights (docs/contracts.md, plan keys)."""
    from specbench.specs.header_weights import ESTIMATE_ERROR, WEIGHTS_SOURCE
    from specbench.specs.resolve import origin_for

    notes = list(command_notes)
    target = origin_for(opts.model_config or plan.model, "model")
    draft_name = plan.draft_model
    draft = origin_for(opts.draft_config or draft_name, "draft") if draft_name else None
    for o in (target, draft):
        if o is not None:
            notes += [n for n in o.notes if n not in notes]
    w_src = plan.extra.get("weights_source") or (plan.extra.get("budget") or {}).get("weights_source") or ""
    if w_src != WEIGHTS_SOURCE and not str(w_src).startswith("measured"):
        notes.append(ESTIMATE_ERROR)
    return {"model_stand_in": target.stand_in if target else None,
            "model_source": target.source if target else None,
            "draft_model_source": draft.source if draft else None, "model_notes": notes}


def env_gpu_default() -> str:
    return os.environ.get("SPECBENCH_GPU", DEFAULT_GPU)
