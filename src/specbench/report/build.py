"""Write a report folder: report.md, report.html, PNGs, logs/.

The folder is written from here, except the PNGs: each figure saves itself (plot_base.py `save`, called through
plots.all_plots). Every other module of the package only reads (load.py) or computes.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from specbench.errors import UserError
from specbench.report.compare import load_stores
from specbench.report.html import render_html
from specbench.report.load import Store
from specbench.report.markdown import render_markdown
from specbench.report.model import Report, build_report
from specbench.report.plots import all_plots
from specbench.report.tables import build_tables

PNG_NAMES = ("throughput.png", "tpot.png", "speedup.png", "speedup_lines.png", "ttft.png", "e2e.png", "goodput.png",
             "pareto.png", "accept_length.png", "accept_pos.png", "memory.png")


@dataclass(frozen=True)
class Written:
    out_dir: Path
    markdown: Path
    html: Path
    pngs: tuple[Path, ...]
    logs: tuple[Path, ...]
    report: Report


def default_out(store_path: str | Path) -> Path:
    """`<store dir>/report`."""
    return Path(store_path).resolve().parent / "report"


def write_report(stores: Sequence[Store], out_dir: str | Path, now: datetime | None = None) -> Written:
    """Render every part of the report for already-loaded stores into out_dir (created; old PNGs/logs replaced)."""
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"{out}: cannot create the report folder ({exc.strerror})") from None
    for name in PNG_NAMES:  # a figure that has no data this time must not linger from an earlier report
        (out / name).unlink(missing_ok=True)
    shutil.rmtree(out / "logs", ignore_errors=True)

    tables = build_tables(stores)
    rows = [r for phase in tables.phases for r in phase.rows]
    accepts = {c.cell_id: c.accept_lengths for s in stores for c in s.cells}
    plots = all_plots(rows, accepts, tables.memory, [s.label for s in stores], out)

    logs = []
    for log in tables.logs:
        path = out / log.relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(log.text, encoding="utf-8")
        logs.append(path)

    stamp = (now or datetime.now(timezone.utc)).strftime("%Y-%m-%d %H:%M:%S UTC")
    report = build_report(stores, tables, plots, stamp)
    md = out / "report.md"
    md.write_text(render_markdown(report), encoding="utf-8")
    html = out / "report.html"
    html.write_text(render_html(report, {p.name: p.path.read_bytes() for p in plots}), encoding="utf-8")
    return Written(out_dir=out, markdown=md, html=html, pngs=tuple(p.path for p in plots), logs=tuple(logs),
                   report=report)


def report_paths(paths: Sequence[str | Path], out_dir: str | Path | None = None) -> Written:
    """Load the stores at `paths` and write their report (default folder: beside the first store)."""
    if not paths:
        raise UserError("give at least one results store")
    stores = load_stores(paths)
    return write_report(stores, out_dir if out_dir is not None else default_out(paths[0]))
