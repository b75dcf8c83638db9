"""Write a report folder: report.md, report.html, PNGs, logs/, and MANIFEST (the files it wrote).

A folder is only ever replaced file by file from its manifest: a new or empty folder is written, one with our
manifest has exactly the files that manifest lists removed first, and any other non-empty folder is refused with
one line (`report --out ~` must never delete what it did not write). The folder is written from here, except the PNGs: each figure saves itself (plot_base.py `save`, called through
plots.all_plots). Every other module of the package only reads (load.py) or computes.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from specbench.errors import UserError
from specbench.report.compare import load_stores
from specbench.report.fits import fit_rows
from specbench.report.html import render_html
from specbench.report.markdown import render_markdown
from specbench.report.model import Report, build_report
from specbench.report.plot_base import Plot
from specbench.report.plots import all_plots
from specbench.report.predicted import predicted_section
from specbench.report.records import LoadedStore
from specbench.report.rows import Tables
from specbench.report.sections import sections, server_sections
from specbench.report.tables import build_tables

PNG_NAMES = ("throughput.png", "tpot.png", "speedup.png", "speedup_lines.png", "ttft.png", "e2e.png", "goodput.png",
             "pareto.png", "accept_length.png", "accept_pos.png", "memory.png", "gpu_memory.png", "gpu_util.png",
             "gpu_power.png", "timeline.png")
MANIFEST = ".specbench-report.json"  # {"written_by": "specbench report", "files": [relative paths]}


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


def write_report(stores: Sequence[LoadedStore], out_dir: str | Path, now: datetime | None = None) -> Written:
    """Render every part of the report for already-loaded stores into out_dir (created; old PNGs/logs replaced)."""
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        _clear_previous(out)  # a figure or log that has no data this time must not linger from an earlier report
        return _write_all(stores, out, now)
    except OSError as exc:  # disk full, a read-only folder: one line
        raise UserError(f"{out}: cannot write the report ({exc.strerror or exc})") from None


def _clear_previous(out: Path) -> None:
    """Remove the files our manifest lists (and the folders they leave empty); refuse a folder we did not write."""
    manifest = out / MANIFEST
    if not manifest.is_file():
        if any(out.iterdir()):
            raise UserError(f"{out}: not empty and not a specbench report folder (no {MANIFEST}); "
                            f"give a new or empty folder to --out")
        return
    try:
        files = json.loads(manifest.read_text(encoding="utf-8")).get("files")
    except (ValueError, AttributeError):
        files = None
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise UserError(f"{manifest}: damaged report manifest; remove the folder or give another --out")
    root = out.resolve()
    for rel in files:
        if (out / rel).is_symlink():
            continue
        path = (out / rel).resolve()
        if root not in path.parents or not path.is_file():
            continue  # only regular files inside the folder
        path.unlink()
        for d in path.parents:
            if d == root:
                break
            try:
                d.rmdir()  # only when empty
            except OSError:
                break
    manifest.unlink()


def _write_all(stores: Sequence[LoadedStore], out: Path, now: datetime | None) -> Written:
    tables = build_tables(stores)
    # the logs are written by a thread while the figures draw: 20,000 cell logs are 20,000 file creations, time in
    # the kernel (the GIL let go) that overlaps the drawing on a second core
    plots = _plots(stores, tables, out)  # on two cores where it is safe (report/twocores.py)
    logs = _write_logs(tables, out)

    stamp = (now or datetime.now(timezone.utc)).strftime("%Y-%m-%d %H:%M:%S UTC")
    report = build_report(stores, tables, plots, stamp)
    report = replace(report, predicted=predicted_section([s.path for s in stores], stores), fits=fit_rows(stores))
    md = out / "report.md"
    md.write_text(render_markdown(report), encoding="utf-8")
    html = out / "report.html"
    html.write_text(render_html(report, {p.name: p.path.read_bytes() for p in plots}), encoding="utf-8")
    written = [md, html, *(p.path for p in plots), *logs]
    (out / MANIFEST).write_text(json.dumps({"written_by": "specbench report",
                                            "files": sorted(str(p.relative_to(out)) for p in written)}, indent=1),
                                encoding="utf-8")
    return Written(out_dir=out, markdown=md, html=html, pngs=tuple(p.path for p in plots), logs=tuple(logs),
                   report=report)


def _write_logs(tables: Tables, out: Path) -> list[Path]:
    logs = []
    folders: set[Path] = set()  # each folder made once: 20,000 cell logs asked mkdir 20,000 times
    for log in tables.logs:
        path = out / log.relpath
        if path.parent not in folders:
            path.parent.mkdir(parents=True, exist_ok=True)
            folders.add(path.parent)
        path.write_text(log.text, encoding="utf-8")
        logs.append(path)
    return logs


def _plots(stores: Sequence[LoadedStore], tables: Tables, out: Path) -> list[Plot]:
    """Every figure; with several sections (model · GPU, report/sections.py) one set per section in `section-N/`,
    titled by its section, so that no figure (the Pareto front above all) mixes models or GPUs."""
    rows = [r for phase in tables.phases for r in phase.rows]
    accepts = {c.cell_id: c.accept_lengths for s in stores for c in s.cells}
    requests = {(s.label, c.cell_id): c.requests for s in stores for c in s.cells}
    if not tables.sections:
        return list(all_plots(rows, accepts, tables.memory, [s.label for s in stores], out, tables.questions,
                              requests))
    of = sections(stores)
    by_server = server_sections(stores)
    plots: list[Plot] = []
    for i, sec in enumerate(tables.sections, start=1):
        sub = f"section-{i}"
        labels = [s.label for s in stores if any(of[(s.label, c.cell_id)] == sec for c in s.cells)]
        made = all_plots([r for r in rows if r.section == sec], accepts,
                         [m for m in tables.memory if by_server.get((m.store, m.server_id)) == sec], labels, out / sub,
                         [q for q in tables.questions if q.section == sec], requests)
        plots += [replace(p, name=f"{sub}/{p.name}", title=f"{sec}: {p.title}") for p in made]
    return plots


def report_paths(paths: Sequence[str | Path], out_dir: str | Path | None = None) -> Written:
    """Load the stores at `paths` and write their report (default folder: beside the first store)."""
    if not paths:
        raise UserError("give at least one results store")
    with _gc_spared() as loaded:
        stores = load_stores(paths)
        loaded()
        return write_report(stores, out_dir if out_dir is not None else default_out(paths[0]))


@contextmanager
def _gc_spared() -> Iterator[Callable[[], None]]:
    """No cyclic collection while the stores load (records without cycles: a 20,000-cell store is 320,000 request
    rows, and each automatic full collection walked every one of them), and what was loaded frozen out of the later
    ones (matplotlib's figures, which do hold cycles, are collected as usual); everything back as it was after. Of a
    20,000-cell report's CPU time the collector took about a quarter (benchmarks/report_scale.py, 2026-12-02)."""
    was_enabled = gc.isenabled()
    gc.disable()

    def loaded() -> None:  # the stores live to the end of the report: the collector need not walk them again
        gc.freeze()
        if was_enabled:
            gc.enable()
    try:
        yield loaded
    finally:
        gc.unfreeze()
        if was_enabled:
            gc.enable()
