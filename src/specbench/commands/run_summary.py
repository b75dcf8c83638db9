"""What `specbench run` prints once the matrix has run: one summary row per cell from the store (the rows of `--json`:
the metric table's keys, the derived speedups and decisions, the repeats), the terminal table drawn from them, and
the store's answers (which setup to run) one line per workload and concurrency.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

# The store, the report's decisions and rich are imported inside the functions, as in run.py.


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
            "workload": _workload(cl),
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


def _workload(client: dict[str, Any]) -> str:
    """The workload axes beyond prompt + output tokens (load/axes.py), with the rate: 'cat=code temp=0.7 rate=4'."""
    from specbench.load.axes import workload_text

    return workload_text(client, skip=("num_requests", "prompt_tokens", "output_tokens"))


def concurrency_cell(r: dict[str, Any]) -> str:
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
            _fmt(r["tp"]), escape(str(r["label"])), concurrency_cell(r),
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


def print_answers(store_path: Path, console: Console) -> None:
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

