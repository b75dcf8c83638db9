"""Display strings shared by markdown.py and html.py: numbers, speedups, and the columns of a phase table.

The decisions' tables are decision_tables.py, the integrity and A/A tables integrity_tables.py; both draw their
numbers with the functions here.
"""

from __future__ import annotations

from collections.abc import Callable

from specbench.load import metric_table
from specbench.load.metric_table import MetricDef
from specbench.report.rows import CellRow


def fmt(value: float | int | None, digits: int = 1) -> str:
    if value is None:
        return "–"
    if isinstance(value, int):
        return str(value)
    return f"{value:,.{digits}f}"


def fmt_ratio(value: float | None, ci: tuple[float, float] | None) -> str:
    """'1.23× [1.10, 1.35]' (the log-ratio 95% interval in brackets when there is one), '–' for None."""
    if value is None:
        return "–"
    return f"{value:.2f}× [{ci[0]:.2f}, {ci[1]:.2f}]" if ci is not None else f"{value:.2f}×"


def fmt_speedup(row: CellRow) -> str:
    """The throughput speedup with its interval; 'base' for AR, 'n/a' without a baseline."""
    if row.speedup_source == "baseline":
        return "base"
    if row.speedup is None:
        return "n/a" if row.speedup_source == "no-baseline" else "–"
    return fmt_ratio(row.speedup, row.speedup_ci)


def fmt_latency_speedup(row: CellRow) -> str:
    """AR TPOT mean / TPOT mean with its interval ('base' for AR)."""
    if row.speedup_source == "baseline":
        return "base"
    return fmt_ratio(row.tpot_speedup, row.tpot_speedup_ci)


def fmt_latency_speedup_e2e(row: CellRow) -> str:
    """AR E2E p50 / E2E p50 with its interval ('base' for AR)."""
    if row.speedup_source == "baseline":
        return "base"
    return fmt_ratio(row.e2e_speedup, row.e2e_speedup_ci)


SHORT = {"throughput": "throughput", "tpot": "TPOT", "e2e": "E2E"}


def fmt_decision(row: CellRow) -> str:
    """The cell against AR (decide/: with the tie margin): the lead metric's verdict, then each latency verdict that
    says something else ('undecided; TPOT slower'), the lead named when it is the latency one ('faster (TPOT)')."""
    if row.speedup_source == "baseline":
        return "–"
    if not row.vs_ar:
        return "–" if row.decision is None else (f"{row.decision} (TPOT)" if row.speedup_lead == "tpot"
                                                 else row.decision)
    lead = "tpot" if row.speedup_lead == "tpot" else "throughput"
    head = row.vs_ar.get(lead)
    text = (f"{head} (TPOT)" if lead == "tpot" else head) if head else "–"
    others = [f"{SHORT[m]} {v}" for m, v in row.vs_ar.items() if m != lead and v != head]
    return "; ".join([text, *others])


def fmt_vs_best(row: CellRow) -> str:
    """The cell against the best of its question on the lead metric: best / tie / slower / undecided."""
    lead = "tpot" if row.speedup_lead == "tpot" else "throughput"
    return row.vs_best.get(lead, "–")


def fmt_throughput(row: CellRow) -> str:
    """'1,234.5' (pooled over the repeats: total tokens / total measured time) and, with repeats, its 95% interval on
    the log scale '1,234.5 [1,200.1, 1,270.0]'."""
    text = fmt(row.output_throughput)
    if row.throughput_ci is not None:
        lo, hi = row.throughput_ci
        return f"{text} [{fmt(lo)}, {fmt(hi)}]"
    return text


def fmt_accept(row: CellRow) -> str:
    """The measured accept length; a simulated cell's carries the marker 'sim' (SIMULATED_NOTE)."""
    text = fmt(row.accept_length, 2)
    return f"{text} (sim {row.simulated:g})" if row.simulated is not None else text


SIMULATED_NOTE = ("(sim X): the engine was told to accept X tokens per step (server `simulated_accept_len`); the "
                  "accept length and speedup of such a cell show what that acceptance would give, not what its "
                  "drafter achieves.")


def percent(value: float | None, digits: int) -> str:
    return f"{100 * value:.{digits}f}%" if value is not None else "–"


# how a metric column (load/metric_table.py, MetricDef.style) shows its value
_STYLES: dict[str, Callable[[CellRow, MetricDef], str]] = {
    "number": lambda row, m: fmt(row.values.get(m.key), m.digits),
    "percent": lambda row, m: percent(row.values.get(m.key), m.digits),
    "throughput": lambda row, m: fmt_throughput(row),
    "accept": lambda row, m: fmt_accept(row),
}


def cell_columns() -> tuple[tuple[str, str], ...]:
    """(header, what it reads) of a phase table: the cell, then every metric of the metric table that has a column
    (load/metric_table.py), then what the report derives (speedups, decisions, repeats)."""
    return (("config", "series"), ("c", "concurrency"), ("status", "status"),
            *((m.column, m.key) for m in metric_table.columns()),
            ("speedup vs AR", "speedup"), ("TPOT speedup", "tpot_speedup"), ("E2E speedup", "e2e_speedup"),
            ("vs AR", "decision"), ("vs best", "vs_best"), ("n", "repeats"), ("CV", "throughput_cv"),
            ("cell", "cell_id"), ("note", "note"))


# the cell_columns() that are not metrics and not shown as plain numbers, each with its display function
_CELL_FORMATS: dict[str, Callable[[CellRow], str]] = {
    "speedup": fmt_speedup,
    "tpot_speedup": fmt_latency_speedup,
    "e2e_speedup": fmt_latency_speedup_e2e,
    "decision": fmt_decision,
    "vs_best": fmt_vs_best,
    "throughput_cv": lambda row: percent(row.throughput_cv, 1),
}


def cell_values(row: CellRow) -> list[str]:
    """The cell_columns() of one row as display strings."""
    out = []
    for _, attr in cell_columns():
        metric = metric_table.BY_KEY.get(attr)
        shown = _CELL_FORMATS.get(attr)
        if metric is not None:
            out.append(_STYLES[metric.style](row, metric))
        elif shown is not None:
            out.append(shown(row))
        else:
            value = getattr(row, attr)
            out.append(value if isinstance(value, str) else fmt(value))
    return out


DECISION_NOTE = ("vs AR (per metric, decide/verdict.py): tie when the whole 95% interval of the speedup lies within "
                 "3% of 1 either way, faster / slower when it lies above / below 1, undecided when it holds 1 and reaches past "
                 "the margin or there is none (a cell measured once has no interval: repeat it, `repeats`); the lead "
                 "metric's verdict first, then each latency verdict that differs. vs best: against the best "
                 "configuration of the same TP, workload and concurrency (see the decisions). CV: the coefficient of "
                 "variation of the per-repeat output throughputs.")


def fmt_ci(value: float | None, ci: tuple[float, float] | None, digits: int = 2, unit: str = "") -> str:
    """'1.23× [1.10, 1.35]' (the 95% interval in brackets when there is one), '–' for None."""
    if value is None:
        return "–"
    text = f"{value:,.{digits}f}{unit}"
    return f"{text} [{ci[0]:,.{digits}f}, {ci[1]:,.{digits}f}]" if ci is not None else text
