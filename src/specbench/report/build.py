"""Write a report folder: report.md, report.html, PNGs, logs/, and MANIFEST (the files it wrote).

A folder is only ever replaced file by file from its manifest: a new or empty folder is written, one with our
manifest has exactly the files that manifest lists removed first, and any other non-empty folder is refused with
one line (`report --out ~` must never delete what it did not write). The manifest is never missing from a folder
being written and never cut (write_report): a report killed anywhere leaves a folder the next report replaces; one
cut by an older specbench gives the names it still holds (_salvaged). The folder is written from here, except the PNGs: each figure saves itself (plot_base.py `save`, called through
plots.all_plots). Every other module of the package only reads (load.py) or computes.
"""

from __future__ import annotations

import gc
import json
import os
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from specbench.errors import UserError
from specbench.matrix.store_rows import storable
from specbench.report.compare import load_stores
from specbench.report.fits import fit_rows
from specbench.report.html import render_html
from specbench.report.markdown import render_markdown
from specbench.report.model import Report, build_report
from specbench.report.plot_base import Plot
from specbench.report.plots import all_plots
from specbench.report.predicted import predicted_section
from specbench.report.rows import Tables
from specbench.report.sections import sections, server_sections
from specbench.report.tables import build_tables
from specbench.stored.records import LoadedStore

PNG_NAMES = ("throughput.png", "tpot.png", "speedup.png", "speedup_lines.png", "ttft.png", "e2e.png", "goodput.png",
             "pareto.png", "accept_length.png", "accept_pos.png", "memory.png", "gpu_memory.png", "gpu_util.png",
             "gpu_power.png", "timeline.png")
MANIFEST = ".specbench-report.json"  # {"written_by": "specbench report", "complete": bool, "files": [relative paths]}
MANIFEST_TMP = MANIFEST + ".tmp"  # the next manifest while it is written (renamed over MANIFEST)


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
    """Render every part of the report for already-loaded stores into out_dir (created; old PNGs/logs replaced).

    The folder always has a manifest that lists every file of ours in it, whenever the report is killed: first one
    that lists the earlier report's files and every file this one may write (`complete: false`), then the earlier
    files are removed, then the report written, then the manifest of exactly what was written; each manifest is
    written whole to a temporary file and renamed over the last (os.replace), never cut mid-write."""
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        earlier = _earlier_files(out)
        tables = build_tables(stores)
        _write_manifest(out, [*earlier, *_planned(tables)], complete=False)
        _remove(out, earlier)  # a figure or log that has no data this time must not linger from an earlier report
        return _write_all(stores, tables, out, now)
    except OSError as exc:  # disk full, a read-only folder: one line
        raise UserError(f"{out}: cannot write the report ({exc.strerror or exc})") from None


def _earlier_files(out: Path) -> list[str]:
    """The files the folder's manifest lists (none in a new or empty folder); a folder we did not write refused."""
    manifest = out / MANIFEST
    if not manifest.is_file():
        if any(p.name != MANIFEST_TMP for p in out.iterdir()):
            raise UserError(f"{out}: not empty and not a specbench report folder (no {MANIFEST}); "
                            f"give a new or empty folder to --out")
        return []
    text = manifest.read_text(encoding="utf-8", errors="replace")
    try:
        doc = json.loads(text)
    except ValueError:
        files = _salvaged(text)  # cut mid-write (a specbench before the atomic manifest was killed writing it)
    else:
        files = doc.get("files") if isinstance(doc, dict) else None
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise UserError(f"{manifest}: damaged report manifest; remove the folder or give another --out")
    return files


_HEAD = '{\n "written_by": "specbench report",'
_NAME = re.compile(r'"((?:[^"\\]|\\.)*)"(?=\s*[,\]])')


def _salvaged(text: str) -> list[str] | None:
    """The file names of a manifest cut mid-write: the whole names its text holds after `"files": [` (None when
    the text is no start of a manifest of ours). The names it lost are files this report writes over or leaves."""
    if not (text.startswith(_HEAD) or _HEAD.startswith(text)):
        return None
    at = text.find('"files": [')
    if at < 0:
        return []
    return [json.loads(f'"{m.group(1)}"') for m in _NAME.finditer(text, at + len('"files": ['))]


def _planned(tables: Tables) -> list[str]:
    """Every file this report may write (a superset: the figures that have data are known only once drawn)."""
    folders = [f"section-{i}/" for i in range(1, len(tables.sections) + 1)] or [""]
    return ["report.md", "report.html", *(d + n for d in folders for n in PNG_NAMES),
            *(str(log.relpath) for log in tables.logs)]


def _remove(out: Path, files: Sequence[str]) -> None:
    """Remove the listed files (regular files inside the folder only) and the folders they leave empty."""
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


def _write_manifest(out: Path, files: Sequence[str], complete: bool) -> None:
    """The manifest, whole or not at all: written to a temporary file beside it, then renamed over it."""
    tmp = out / MANIFEST_TMP
    tmp.write_text(json.dumps({"written_by": "specbench report", "complete": complete,
                               "files": sorted(set(files))}, indent=1), encoding="utf-8")
    os.replace(tmp, out / MANIFEST)


def _text(path: Path, text: str) -> None:
    """A text file of the report; a store path of bytes that are no UTF-8 (a Latin-1 folder name) as \\xNN."""
    path.write_text(storable(text), encoding="utf-8")


def _write_all(stores: Sequence[LoadedStore], tables: Tables, out: Path, now: datetime | None) -> Written:
    # the logs are written by a thread while the figures draw: 20,000 cell logs are 20,000 file creations, time in
    # the kernel (the GIL let go) that overlaps the drawing on a second core
    plots = _plots(stores, tables, out)  # on two cores where it is safe (report/twocores.py)
    logs = _write_logs(tables, out)

    stamp = (now or datetime.now(timezone.utc)).strftime("%Y-%m-%d %H:%M:%S UTC")
    report = build_report(stores, tables, plots, stamp)
    report = replace(report, predicted=predicted_section([s.path for s in stores], stores), fits=fit_rows(stores))
    md = out / "report.md"
    _text(md, render_markdown(report))
    html = out / "report.html"
    _text(html, render_html(report, {p.name: p.path.read_bytes() for p in plots}))
    written = [md, html, *(p.path for p in plots), *logs]
    _write_manifest(out, [str(p.relative_to(out)) for p in written], complete=True)
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
        _text(path, log.text)
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
