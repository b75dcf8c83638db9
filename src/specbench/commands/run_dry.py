"""What `specbench run --dry-run` prints without `--json`: the repeat policy, then per phase each server once (its
planner verdict, reason, notes and exact command, secrets masked by the caller) and each of its cells (concurrency,
prompt and output tokens, requests, rate, repeats, workload, predicted speedup, warnings), and a closing count.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

# rich and the matrix package are imported inside the functions, as in run.py.


def print_dry(rows: list[dict[str, Any]], console: Console, phases: list[str]) -> None:
    from rich.markup import escape

    from specbench.load.axes import extras_text
    from specbench.load.integrity import concurrency_text
    from specbench.matrix.preflight import iter_phases
    from specbench.matrix.repeat_metrics import request_count
    from specbench.predict.plan_matrix import predicted_text

    seen: set[str] = set()
    said: dict[str, str] = {}  # server id -> the prompts warning printed under its first cell
    counts = {"launch": 0, "fixed": 0, "skipped": 0}
    for text in dict.fromkeys(_policy_text(r.get("repeat_policy") or {}) for r in rows):
        console.print(f"repeats: {text}", highlight=False, markup=False)
    for phase, group in iter_phases(rows):
        srv = group[0]["server"]
        key = ", ".join(f"{a}={srv['label'] if a == 'spec' else srv.get(a)}" for a in phases)
        console.print(f"[bold]phase {phase}[/] ({key})", highlight=False)
        for r in group:
            sid = r["server_id"]
            if sid not in seen:
                seen.add(sid)
                counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
                colour = {"launch": "green", "fixed": "cyan", "skipped": "yellow"}[r["verdict"]]
                label = escape(str(r["label"]))
                console.print(f"  [{colour}]{r['verdict']:<7}[/] {label:<14} plan={r['plan_status'] or '-'}"
                              f" mrr={r['max_running_requests_planned'] if r['max_running_requests_planned'] is not None else '-'}"
                              f"  {sid}", highlight=False)
                if r["reason"]:
                    console.print(f"           reason: {r['reason']}", highlight=False, markup=False)
                if r.get("aa_of"):
                    console.print(f"           A/A check: the twin of {r['aa_of']}, launched the same way (the same "
                                  "configuration measured again; never the baseline of a speedup)",
                                  highlight=False, markup=False)
                for note in r["notes"]:
                    console.print(f"           note: {note}", highlight=False, markup=False)
                env = " ".join(f"{k}={shlex.quote(str(v))}" for k, v in r["env"].items())
                console.print(f"           $ {env + ' ' if env else ''}{shlex.join(r['command'])}",
                              highlight=False, markup=False, soft_wrap=True)
            c = r["client"]
            extra = extras_text(c)  # the workload axes beyond prompt + output tokens
            console.print(f"           cell {r['cell']}: concurrency="
                          f"{concurrency_text(c['concurrency'], r.get('effective_concurrency_planned'), 'planner')}"
                          f" prompt={c['prompt_tokens']}"
                          f" output={c['output_tokens']} requests={request_count(c)} rate={c['request_rate']}"
                          + _repeats_word(c)
                          + (f" {extra}" if extra else "") + f"{predicted_text(r)}",
                          highlight=False, markup=False)
            if r.get("concurrency_warning"):
                console.print(f"           warning: {r['concurrency_warning']}", highlight=False, markup=False)
            if r.get("duration_warning"):
                console.print(f"           warning: {r['duration_warning']}", highlight=False, markup=False)
            if r.get("prompts_warning") and r["prompts_warning"] != said.get(sid):  # once per server, not per cell
                said[sid] = r["prompts_warning"]
                console.print(f"           warning: {r['prompts_warning']}", highlight=False, markup=False)
    console.print(f"{len(rows)} cells on {len(seen)} servers: {counts['launch']} launch, {counts['fixed']} fixed,"
                  f" {counts['skipped']} skipped; nothing was launched (dry run)")


def _repeats_word(client: dict[str, Any]) -> str:
    """' repeats=2-8' / ' repeats=3' / '' (one repeat)."""
    lo, hi = client.get("repeats") or 1, client.get("repeats_max")
    return f" repeats={lo}-{hi}" if hi else (f" repeats={lo}" if lo != 1 else "")


def _policy_text(p: dict[str, Any]) -> str:
    """The dry run's repeat policy in words (matrix/visits.py RepeatPolicy.text)."""
    from specbench.matrix.visits import RepeatPolicy

    return RepeatPolicy(min=int(p.get("min") or 1), max=p.get("max"), across_boots=bool(p.get("across_boots"))).text()

