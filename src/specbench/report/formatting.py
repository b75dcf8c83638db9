"""Display strings shared by markdown.py and html.py: numbers, speedups, and the columns of a phase table."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from specbench.report.rows import Best, CellRow


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


def fmt_decision(row: CellRow) -> str:
    """The lead speedup's decision, with the lead named when it is the latency one ('faster (TPOT)')."""
    if row.speedup_source == "baseline" or row.decision is None:
        return "–"
    return f"{row.decision} (TPOT)" if row.speedup_lead == "tpot" else row.decision


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


CELL_COLUMNS: tuple[tuple[str, str], ...] = (
    ("config", "series"), ("c", "concurrency"), ("status", "status"), ("out tok/s", "output_throughput"),
    ("TTFT p50 ms", "ttft_p50"), ("TTFT p99 ms", "ttft_p99"), ("TPOT p50 ms", "tpot_p50"),
    ("TPOT p99 ms", "tpot_p99"), ("ITL p50 ms", "itl_p50"), ("ITL p99 ms", "itl_p99"),
    ("accept len", "accept_length"), ("draft acc.", "draft_rate"), ("speedup vs AR", "speedup"),
    ("TPOT speedup", "tpot_speedup"), ("decision", "decision"), ("n", "repeats"), ("CV", "throughput_cv"),
    ("cell", "cell_id"), ("note", "note"),
)


def _percent(value: float | None, digits: int) -> str:
    return f"{100 * value:.{digits}f}%" if value is not None else "–"


# the CELL_COLUMNS that are not shown as plain numbers, each with its display function
_CELL_FORMATS: dict[str, Callable[[CellRow], str]] = {
    "speedup": fmt_speedup,
    "accept_length": fmt_accept,
    "output_throughput": fmt_throughput,
    "draft_rate": lambda row: _percent(row.draft_rate, 0),
    "tpot_speedup": fmt_latency_speedup,
    "decision": fmt_decision,
    "throughput_cv": lambda row: _percent(row.throughput_cv, 1),
}


def cell_values(row: CellRow) -> list[str]:
    """The CELL_COLUMNS of one row as display strings."""
    out = []
    for _, attr in CELL_COLUMNS:
        shown = _CELL_FORMATS.get(attr)
        if shown is not None:
            out.append(shown(row))
        else:
            value = getattr(row, attr)
            out.append(value if isinstance(value, str) else fmt(value))
    return out


@dataclass(frozen=True)
class BestTable:
    """One 'fastest' table: the points of one section and one lead, as display strings."""

    title: str
    note: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    text_cols: frozenset[int]


LEAD_NOTES = {
    "throughput": "closed loop: ranked by output throughput (pooled over the repeats); speedup = output throughput / "
                  "the AR cell's at the same TP, concurrency and workload",
    "tpot": "request rate: ranked by TPOT mean (both servers deliver the offered rate, so throughput does not rank "
            "them); speedup = the AR cell's TPOT mean / this TPOT mean",
}


def best_tables(best: Sequence[Best]) -> list[BestTable]:
    """The fastest-per-point rows grouped by section and lead, each group one table that says what it ranks by."""
    groups: dict[tuple[str, str], list[Best]] = {}
    for b in best:
        groups.setdefault((b.section, b.lead), []).append(b)
    out = []
    for (section, lead), rows in groups.items():
        ar_won = any(b.is_baseline for b in rows)
        value = "out tok/s" if lead == "throughput" else "TPOT mean ms"
        header = ("TP", "workload", "c", "fastest", value, "AR tok/s" if lead == "throughput" else "out tok/s",
                  "speedup vs AR [95% CI]", "decision", "CV") + (("best speculative",) if ar_won else ())
        body = []
        for b in rows:
            v = fmt(b.output_throughput) if lead == "throughput" else fmt(b.tpot_mean, 2)
            other = fmt(b.ar_throughput) if lead == "throughput" else fmt(b.output_throughput)
            dec = "–" if b.is_baseline else (b.decision or "–")
            body.append((fmt(b.tp), b.workload_full or b.workload or "–", fmt(b.concurrency), b.series, v, other,
                         b.speedup_text, dec, f"{100 * b.cv:.1f}%" if b.cv is not None else "–")
                        + ((b.best_spec_text + (f" ({b.best_spec_decision})" if b.best_spec_decision else "")
                            if b.best_spec_text else "–",) if ar_won else ()))
        kind = "closed loop" if lead == "throughput" else "request rate"
        title = f"Fastest configuration per workload ({kind})" + (f": {section}" if section else "")
        out.append(BestTable(title, LEAD_NOTES[lead], header, tuple(body),
                             frozenset(i for i, h in enumerate(header) if h in ("workload", "fastest",
                                                                                  "best speculative"))))
    return out


DECISION_NOTE = ("decision: faster / slower when the whole 95% interval of the speedup lies above / below 1, "
                 "undecided when it holds 1 or there is none (a cell measured once has no interval: repeat it, "
                 "`repeats = N`). CV: the coefficient of variation of the per-repeat output throughputs.")
