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
    return f"{row.speedup:.2f}×"


CELL_COLUMNS: tuple[tuple[str, str], ...] = (
    ("config", "series"), ("c", "concurrency"), ("status", "status"), ("out tok/s", "output_throughput"),
    ("TTFT p50 ms", "ttft_p50"), ("TTFT p99 ms", "ttft_p99"), ("TPOT p50 ms", "tpot_p50"),
    ("TPOT p99 ms", "tpot_p99"), ("ITL p50 ms", "itl_p50"), ("ITL p99 ms", "itl_p99"),
    ("accept len", "accept_length"), ("speedup vs AR", "speedup"), ("cell", "cell_id"), ("note", "note"),
)


def cell_values(row: CellRow) -> list[str]:
    """The CELL_COLUMNS of one row as display strings."""
    out = []
    for _, attr in CELL_COLUMNS:
        if attr == "speedup":
            out.append(fmt_speedup(row))
        elif attr == "accept_length":
            out.append(fmt(row.accept_length, 2))
        else:
            value = getattr(row, attr)
            out.append(value if isinstance(value, str) else fmt(value))
    return out
