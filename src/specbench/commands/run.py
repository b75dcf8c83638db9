"""`specbench run MATRIX`: run (or resume) a benchmark matrix; `--dry-run` shows cells, verdicts, commands."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

# The matrix package (runner, HTTP clients, adapters) and rich are imported inside the functions: `specbench --help`
# and the other commands do not pay for them.


def _fmt(v: Any, digits: int = 1) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def summary_rows(store_path: Path, cell_ids: set[str] | None = None) -> list[dict[str, Any]]:
    """One row per cell of the store (only `cell_ids` when given: the matrix as it is now)."""
    from specbench.load.metric_table import run_row_keys
    from specbench.matrix.store import Store

    with Store(store_path) as store:
        cells = store.cells()
        counts = store.repeat_counts()
    rows = []
    for c in cells:
        if cell_ids is not None and c["cell_id"] not in cell_ids:
            continue
        m = c.get("metrics") or {}
        cl = c.get("client") or {}
        rows.append({
            "cell": c["cell_id"], "phase": c["phase"], "tp": c["tp"], "label": c["label"],
            "concurrency": cl.get("concurrency"), "running_cap": m.get("running_cap"),
            "effective_concurrency": m.get("effective_concurrency"), "prompt_tokens": (c.get("clamp") or {}).get("prompt_tokens",
                                                                                           cl.get("prompt_tokens")),
            "output_tokens": (c.get("clamp") or {}).get("output_tokens", cl.get("output_tokens")),
            "status": c["status"], "attempts": c["attempts"],
            **{k: m.get(k) for k in run_row_keys()},  # load/metric_table.py
            "speedup": m.get("speedup"),
            "workload": _workload(cl, with_rate=True),
            # the derived keys the runner stored (load/speedup.py): intervals, latency speedups, lead, decision
            **{k: m.get(k) for k in DERIVED_KEYS},
            "reason": c.get("reason"),
            "stream_warning": m.get("stream_warning"),
            "client_warning": m.get("client_warning"),
            "spread": m.get("spread"),
            # the repeats stored (repeat_runs; a store older than it: the spread's count), the planned count and the
            # most a repeat-until-decided cell may get (matrix/visits.py)
            "repeats_done": counts.get(c["cell_id"])
            or (sp.get("repeats") if isinstance(sp := m.get("spread"), dict) else None)
            or (1 if c["status"] == "done" else 0),
            "repeats_min": cl.get("repeats") or 1, "repeats_max": cl.get("repeats_max"),
        })
    return rows


DERIVED_KEYS = ("output_throughput_ci95", "output_throughput_cv", "speedup_ci95", "speedup_decision", "tpot_speedup",
                "tpot_speedup_ci95", "tpot_speedup_decision", "e2e_speedup", "e2e_speedup_ci95", "speedup_lead",
                "decision")


def _workload(client: dict[str, Any], with_rate: bool = False) -> str:
    """The workload axes beyond prompt + output tokens (load/axes.py): 'cat=code temp=0.7' (and 'rate=4')."""
    from specbench.load.axes import extras_text, workload_text

    if with_rate:
        return workload_text(client, skip=("num_requests", "prompt_tokens", "output_tokens"))
    return extras_text(client)


def _c(r: dict[str, Any]) -> str:
    """A summary row's concurrency, with the one that ran when the server's cap was below it."""
    from specbench.load.integrity import concurrency_text

    return concurrency_text(r["concurrency"], r.get("running_cap"))


def _pair(a: Any, b: Any, digits: int) -> str:
    return f"{_fmt(a, digits)}/{_fmt(b, digits)}"


def _ci(ci: Any, digits: int) -> str:
    """' [lo, hi]': a stored 95% interval (load/speedup.py), '' without one (a cell measured once)."""
    return f" [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]" if isinstance(ci, list) and len(ci) == 2 else ""


def _speedup_text(r: dict[str, Any]) -> str:
    """The lead speedup (closed loop: throughput; rate cells: AR TPOT / TPOT, marked 'tpot') with its interval."""
    lead = r.get("speedup_lead") or "throughput"
    key = "tpot_speedup" if lead == "tpot" else "speedup"
    v = r.get(key)
    if v is None:
        return "-"
    return f"{v:.2f}x{_ci(r.get(key + '_ci95'), 2)}" + (" tpot" if lead == "tpot" else "")


def summary_table(rows: list[dict[str, Any]], title: str) -> Table:
    """Throughput (pooled over the repeats, with its 95% interval), TTFT and TPOT p50/p99 (ms), mean accept length,
    the lead speedup over AR with its interval and decision, and the CV of the per-repeat throughputs, one row per
    cell: the stored numbers (load/speedup.py), as the report and the export show them."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=escape(title), box=box.SIMPLE_HEAD, pad_edge=False)
    left = ("cell", "status", "decision")
    for col in ("tp", "cell", "c", "in+out", "status", "tok/s", "TTFT ms p50/99", "TPOT ms p50/99", "accept",
                "speedup", "decision", "CV", "reps"):
        t.add_column(col, justify="left" if col in left else "right", no_wrap=True)
    for r in rows:
        status = r["status"]
        style = {"done": "green", "partial": "red", "failed": "red", "skipped": "yellow"}.get(status, "")
        cv = r.get("output_throughput_cv")
        t.add_row(
            _fmt(r["tp"]), escape(str(r["label"])), _c(r),
            escape(f"{r['prompt_tokens']}+{r['output_tokens']}"
                   + (f" {r['workload']}" if r.get("workload") else "")),
            f"[{style}]{status}[/]" if style else status,
            _fmt(r["output_throughput"]) + _ci(r.get("output_throughput_ci95"), 1),
            _pair(r["ttft_ms_p50"], r["ttft_ms_p99"], 1),
            _pair(r["tpot_ms_p50"], r["tpot_ms_p99"], 2), _fmt(r["accept_length_mean"], 2),
            _speedup_text(r), escape(r.get("decision") or "-"),
            f"{100 * cv:.1f}%" if isinstance(cv, (int, float)) else "-",
            _reps(r),
        )
    return t


def _print_answers(store_path: Path, console: Console) -> None:
    """The store's answers (report/decisions.py, what the report's 'Which setup to run' shows), one line per
    workload and concurrency."""
    from specbench.report.decisions import questions
    from specbench.report.tables import cell_rows
    from specbench.stored.read import load_store

    store = load_store(store_path)
    for q in questions(cell_rows([store])):
        where = f"tp={q.tp} c={q.concurrency}" + (f" {q.workload}" if q.workload else "")
        console.print(f"  answer {where}: {q.decision.headline.text}", highlight=False, markup=False)


def _reps(r: dict[str, Any]) -> str:
    """'4 (2-8)': the repeats stored, and the range of a cell that repeats until decided."""
    done = r.get("repeats_done")
    rng = f" ({r.get('repeats_min')}-{r['repeats_max']})" if r.get("repeats_max") else ""
    return f"{done if done is not None else '-'}{rng}"


def round_lines(report: Any) -> list[str]:
    """What each round of repeat-until-decided did and why (matrix/rounds.py RoundInfo)."""
    out = []
    for info in report.rounds:
        if not info.reasons:
            continue
        out.append(f"round {info.round}: one more repeat for {len(info.reasons)} cell(s) of {info.questions} open "
                   f"question(s), {info.added} added")
        for cid, why in info.reasons.items():
            out.append(f"  {info.labels.get(cid, cid)}: {why}")
    return out


def _print_dry(rows: list[dict[str, Any]], console: Console, phases: list[str]) -> None:
    from rich.markup import escape

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
            extra = _workload(c)
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


def _warn_long_cells(spec: Any, err: Console) -> None:
    """Before anything boots: each cell expected to run for more than LONG_CELL_S, in one line; each server whose
    cells send random-token prompts to a real drafter (load/prompt_checks.py), once."""
    from specbench.load.prompt_checks import random_prompts_warning
    from specbench.matrix.expansion import expand
    from specbench.matrix.preflight import duration_warning

    said: set[tuple[str, str]] = set()
    for c in expand(spec)[1]:
        why = duration_warning(c.client)
        if why:
            err.print(f"specbench: warning: cell {c.cell_id} ({c.label}): {why}", highlight=False, markup=False)
        why = random_prompts_warning(c.client, c.server)
        if why and (c.server_id, why) not in said:
            said.add((c.server_id, why))
            err.print(f"specbench: warning: {c.label} tp={c.tp}: {why}", highlight=False, markup=False)


@contextmanager
def _damage_is_one_line(store_path: Path) -> Iterator[None]:
    """A store damaged where the run reads or writes it (a cell's JSON, a text that no longer decodes, a page
    SQLite calls malformed) ends in one line naming the file and the damage (matrix/store.py::damage_error)."""
    import sqlite3

    from specbench.matrix.store import StoreDamaged, damage_error

    try:
        yield
    except (sqlite3.DatabaseError, StoreDamaged, UnicodeDecodeError) as exc:
        one_line = damage_error(store_path, exc)
        if one_line is None:
            raise
        raise one_line from None


def _gpus(text: Optional[str], dry: bool) -> Optional[tuple[str, ...]]:
    """--gpus resolved (matrix/gpus.py), said on stderr; a dry run also says which GPUs another process fills."""
    if text is None:
        return None
    import os

    from specbench.matrix.gpus import resolve, usable

    choice = resolve(text, os.environ)
    free = usable(choice.ids, choice.listing)
    for line in (*choice.warnings, *free.unknown, *(f"{s}; a run skips it" for s in free.skipped if dry)):
        sys.stderr.write(f"specbench: warning: {line}\n")
    if dry:  # a run says it once the GPUs another process fills are left out (matrix/packing.py)
        sys.stderr.write(f"specbench: {choice.using}\n")
    return choice.ids


def _executor(name: str, gpus: Optional[str], address: Optional[str]) -> str:
    from specbench.matrix.ray_exec import check_executor

    return check_executor(name, gpus, address)


def _order(name: str, spec: Any) -> Optional[tuple[str, ...]]:
    """--order: None keeps the matrix's order; predicted: server ids by predict/plan_matrix.py::server_order."""
    from specbench.errors import UserError

    if name == "matrix":
        return None
    if name != "predicted":
        raise UserError(f"--order {name!r}: expected matrix or predicted")
    from specbench.commands.predict import plan_rows
    from specbench.predict.plan_matrix import predict_spec, server_order, shipped_or_none

    rows = plan_rows(spec)
    cal = shipped_or_none()
    return server_order(rows, predict_spec(spec, rows, cal)) if cal is not None else None


def register(app: typer.Typer) -> None:
    @app.command("run")
    def run_cmd(
        matrix: Path = typer.Argument(..., help="the matrix TOML file"),
        store: Optional[Path] = typer.Option(None, "--store", help="results store (SQLite); default runs/<matrix>.sqlite"),
        retry_failed: bool = typer.Option(False, "--retry-failed", help="re-run cells that failed before"),
        dry: bool = typer.Option(False, "--dry-run", help="print cells, planner verdicts and exact commands; launch nothing"),
        as_json: bool = typer.Option(False, "--json", help="print JSON instead of tables"),
        no_progress: bool = typer.Option(False, "--no-progress", help="no progress bars"),
        gpus: Optional[str] = typer.Option(None, "--gpus", help="pack server tuples onto these GPUs, several servers "
                                           "at once: 0-7, 0,1,4 or all (CUDA_VISIBLE_DEVICES, else nvidia-smi)"),
        executor: str = typer.Option("local", "--executor", help="local (this machine) or ray (a Ray cluster; "
                                     "needs `pip install specbench-llm[ray]`)"),
        address: Optional[str] = typer.Option(None, "--address", help="Ray cluster address (default: RAY_ADDRESS, "
                                              "else a local Ray instance)"),
        repeats: Optional[int] = typer.Option(None, "--repeats", min=1, help="run each cell's load N times (overrides"
                                              " the matrix's `repeats`, a {min, max} range too)"),
        order: str = typer.Option("matrix", "--order", help="matrix (as written) or predicted (AR first, then the "
                                  "servers with the highest predicted speedup: `specbench predict`)"),
        new_matrix: bool = typer.Option(False, "--new-matrix", help="run this matrix into a store that holds another "
                                        "matrix's results (another name, engine or [plan] table)"),
    ) -> None:
        """Run a benchmark matrix (resumable: finished cells are kept; failed ones re-run with --retry-failed)."""
        from rich.console import Console

        from specbench.matrix.expansion import expand
        from specbench.matrix.preflight import dry_run
        from specbench.matrix.runner import RunOptions, default_store_path, run_matrix
        from specbench.matrix.toml_load import load_matrix

        spec, text = load_matrix(matrix)
        for note in spec.remote_paths:  # said before anything boots, in a dry run as in a run
            sys.stderr.write(f"warning: {matrix}: {note}\n")
        if repeats is not None:
            spec = spec.model_copy(update={"client": spec.client.model_copy(update={"repeats": repeats})})
        console = Console() if sys.stdout.isatty() else Console(width=200, soft_wrap=True)
        run_executor = _executor(executor, gpus, address)  # checked in a dry run too
        run_gpus = _gpus(gpus, dry)
        if dry:
            from specbench.predict.plan_matrix import with_predictions
            from specbench.redact import redact_obj

            # commands and env as they would run, their secrets masked; each cell with its predicted speedup
            rows = redact_obj(with_predictions(spec, dry_run(spec)))
            if as_json:
                sys.stdout.write(json.dumps(rows, indent=2) + "\n")
            else:
                _print_dry(rows, console, spec.phases)
            return
        store_path = store or default_store_path(matrix)
        opts = RunOptions(store_path=store_path, retry_failed=retry_failed,
                          progress=not no_progress and not as_json and sys.stderr.isatty(),
                          gpus=run_gpus, executor=run_executor, ray_address=address,
                          order=_order(order, spec), new_matrix=new_matrix)
        err = Console(stderr=True, soft_wrap=True)
        _warn_long_cells(spec, err)
        with _damage_is_one_line(store_path):
            report = run_matrix(spec, text, str(matrix), opts, console=err)
        for msg in report.messages:
            err.print(f"specbench: {msg}", highlight=False, markup=False)
        for line in round_lines(report):  # on stderr: stdout stays the table (or the JSON)
            err.print(line, highlight=False, markup=False)
        with _damage_is_one_line(store_path):
            rows = summary_rows(store_path, {c.cell_id for c in expand(spec)[1]})
        if as_json:
            sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        else:
            console.print(summary_table(rows, f"{spec.name}: {store_path}"))
            for r in rows:
                for warning in (r.get("stream_warning"), r.get("client_warning")):
                    if warning:
                        console.print(f"  note: {r['label']} tp={r['tp']} c={_c(r)}: {warning}", highlight=False,
                                      markup=False)
                if r["status"] in ("failed", "partial", "skipped") and r["reason"]:
                    first = str(r["reason"]).strip().splitlines()[0]
                    console.print(f"  {r['status']}: {r['label']} tp={r['tp']} c={_c(r)}: "
                                  f"{first[:300]}", highlight=False, markup=False)
            _print_answers(store_path, console)
            rounds = [i for i in report.rounds if i.reasons]
            more = (f"; {len(rounds)} round(s) of repeat-until-decided added {sum(i.added for i in rounds)} repeats"
                    if rounds else "")
            console.print(f"ran {report.ran} cells ({report.done} done, {report.partial} partial, {report.failed} failed), "
                          f"{report.skipped} skipped by the planner, {report.kept} kept from earlier runs{more}; "
                          f"store: {store_path}", highlight=False)
        if report.interrupted:
            err.print(f"specbench: interrupted; finished cells are kept in {store_path}; run again to resume",
                      highlight=False, markup=False)
            raise typer.Exit(130)
        if report.failed or report.partial:
            raise typer.Exit(1)
