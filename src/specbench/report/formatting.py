"""Display strings shared by markdown.py and html.py: numbers, speedups, and the columns of a phase table."""

from __future__ import annotations

from specbench.report.rows import CellRow


def fmt(value: float | int | None, digits: int = 1) -> str:
    if value is None:
        return "–"
    if isinstance(value, int):
        return str(value)
    return f"{value:,.{digits}f}"


def fmt_speedup(row: CellRow) -> str:
    if row.speedup_source == "baseline":
        return "base"
    if row.speedup is None:
        return "n/a" if row.speedup_source == "no-baseline" else "–"
    if row.speedup_ci is not None:
        return f"{row.speedup:.2f}× [{row.speedup_ci[0]:.2f}, {row.speedup_ci[1]:.2f}]"
    return f"{row.speedup:.2f}×"


def fmt_throughput(row: CellRow) -> str:
    """'1,234.5' or, with repeats, the mean over them '1,234.5 ±12.3' (half the 95% interval of the mean over the repeats)."""
    if row.throughput_ci is not None:  # the mean over the repeats, the centre of its interval
        lo, hi = row.throughput_ci
        return f"{fmt((lo + hi) / 2)} ±{(hi - lo) / 2:,.1f}"
    return fmt(row.output_throughput)


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
    ("accept len", "accept_length"), ("draft acc.", "draft_rate"), ("speedup vs AR", "speedup"), ("n", "repeats"),
    ("cell", "cell_id"), ("note", "note"),
)


def cell_values(row: CellRow) -> list[str]:
    """The CELL_COLUMNS of one row as display strings."""
    out = []
    for _, attr in CELL_COLUMNS:
        if attr == "speedup":
            out.append(fmt_speedup(row))
        elif attr == "accept_length":
            out.append(fmt_accept(row))
        elif attr == "output_throughput":
            out.append(fmt_throughput(row))
        elif attr == "draft_rate":
            out.append(f"{100 * row.draft_rate:.0f}%" if row.draft_rate is not None else "–")
        else:
            value = getattr(row, attr)
            out.append(value if isinstance(value, str) else fmt(value))
    return out
