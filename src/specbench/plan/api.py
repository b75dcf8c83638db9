"""The planner's one entry point: a pasted launch command + options -> the JSON contract (a dict).

Used by `specbench plan`, `specbench doctor` (fixes from measured values), the runner's preflight and the
benchmarks. The command is read as a shell would run it (`specbench.engines.command.read_command`: docker, env,
unsupported servers, shell variables); the engine is the one named (`--engine`) or the one that recognises the
command; its package plans it, with the models resolved at the command's `--revision` (`specs/resolve.py`).
"""

from __future__ import annotations

import os
from typing import Any

from specbench.contracts import CONCURRENCY_INPUTS, PlanOptions
from specbench.engines.command import read_command, revisions_of
from specbench.plan.concurrency import KEYS as CONCURRENCY_KEYS
from specbench.plan.concurrency import concurrency, overcommit_warning
from specbench.specs.gpu import DEFAULT_GPU


def plan_command(argv: list[str] | str, opts: PlanOptions = PlanOptions()) -> dict[str, Any]:
    return plan_command_full(argv, opts)[0]


def plan_command_full(argv: list[str] | str, opts: PlanOptions = PlanOptions()) -> tuple[dict[str, Any], list[Any]]:
    """Plan and (if opts.fixes) the per-TP table. Returns (contract dict, rows)."""
    from specbench.specs.resolve import quantization_flag, revisions

    cmd = read_command(argv, opts.engine)
    revs = revisions_of(cmd.argv)
    if opts.revision:
        revs["model"] = opts.revision
    with revisions(revs), quantization_flag(_quantization_of(cmd.argv)):
        out, rows = cmd.engine.plan(cmd.argv, opts)
        out.update(origin_keys(out, opts, cmd.notes))
    out.update(_concurrency_keys(out))
    for key in CONCURRENCY_KEYS:  # an engine whose rules do not state them yet says null (docs/contracts.md)
        out.setdefault(key, None)
    return out, rows


def _quantization_of(argv: list[str]) -> str | None:
    """The command's `--quantization` value (both engines spell it so; vLLM also `-q`): what a checkpoint whose
    config is out of reach carries (specs/standin.py)."""
    for i, w in enumerate(argv):
        flag, eq, val = w.partition("=")
        if flag in ("--quantization", "-q"):
            return val if eq else (argv[i + 1] if i + 1 < len(argv) else None)
    return None


def _concurrency_keys(out: dict[str, Any]) -> dict[str, Any]:
    """The concurrency keys from what the engine passed under CONCURRENCY_INPUTS (contracts.py; engines sit below
    the planner, so they hand over the numbers and plan/concurrency.py words them), and the over-commit warning."""
    given = out.pop(CONCURRENCY_INPUTS, None)
    if not given:
        return {}
    c = concurrency(given["cap"], given["context"], given["fits"])
    keys = c.keys()
    warning = overcommit_warning(given.get("asked"), c, given.get("kv_tokens") or 0, given["engine"])
    if warning:
        keys["warnings"] = [*(out.get("warnings") or []), warning]
    return keys


def origin_keys(out: dict[str, Any], opts: PlanOptions, command_notes: tuple[str, ...]) -> dict[str, Any]:
    """`model_source`, `draft_model_source`, `model_notes`: where the configs were found and what that means for
    the weights (docs/contracts.md, plan keys)."""
    from specbench.specs.header_weights import ESTIMATE_ERROR, WEIGHTS_SOURCE
    from specbench.specs.resolve import origin_for

    notes = list(command_notes)
    target = origin_for(opts.model_config or out.get("model"), "model")
    draft_name = out.get("draft_model")
    draft = origin_for(opts.draft_config or draft_name, "draft") if draft_name else None
    for o in (target, draft):
        if o is not None:
            notes += [n for n in o.notes if n not in notes]
    w_src = out.get("weights_source") or (out.get("budget") or {}).get("weights_source") or ""
    if w_src != WEIGHTS_SOURCE and not str(w_src).startswith("measured"):
        notes.append(ESTIMATE_ERROR)
    return {"model_stand_in": target.stand_in if target else None,
            "model_source": target.source if target else None,
            "draft_model_source": draft.source if draft else None, "model_notes": notes}


def env_gpu_default() -> str:
    return os.environ.get("SPECBENCH_GPU", DEFAULT_GPU)
