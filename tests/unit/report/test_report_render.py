"""Render whole reports from synthetic stores (real SQLite, real matplotlib PNGs) and check what they show."""

from __future__ import annotations

import base64
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from specbench.report.build import Written, report_paths
from specbench.stored.read import load_store
from specbench.stored.schema import SCHEMA
from specbench.testing.synthetic import write_store

GREEN = (0x2C, 0xA0, 0x2C)  # plots.PALETTE[2]: the colour of the third speculative config, ddtree-b16 here
BLACK_AR = (0x22, 0x22, 0x22)


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Written]:
    root = tmp_path_factory.mktemp("full")
    store = write_store(root / "night.db")
    return store, report_paths([store])


def _pixels(path: Path) -> np.ndarray:
    with Image.open(path) as im:
        im.verify()  # a valid PNG, not only a file with the right name
    with Image.open(path) as im:
        assert im.format == "PNG"
        return np.asarray(im.convert("RGB")).astype(int)


def _panel(img: np.ndarray, box: tuple[int, int, int, int]) -> np.ndarray:
    left, top, right, bottom = box
    return img[top + 2:bottom - 2, left + 2:right - 2]


def _near(region: np.ndarray, rgb: tuple[int, int, int], tol: int = 12) -> int:
    return int((np.abs(region - np.array(rgb)).max(axis=2) <= tol).sum())


def _colored(region: np.ndarray) -> int:
    return int(((region.max(axis=2) - region.min(axis=2)) > 60).sum())


def test_report_files_and_default_folder(full: tuple[Path, Written]) -> None:
    store, w = full
    assert w.out_dir == store.parent / "report"
    names = sorted(p.name for p in w.pngs)
    assert names == ["accept_length.png", "e2e.png", "goodput.png", "memory.png", "pareto.png", "speedup.png",
                     "speedup_lines.png", "throughput.png", "tpot.png", "ttft.png"]  # no per-position counters
    for p in w.pngs:
        img = _pixels(p)
        assert img.shape[0] > 200 and img.shape[1] > 400


def test_throughput_plot_has_one_panel_per_tp_with_its_lines(full: tuple[Path, Written]) -> None:
    _, w = full
    plot = next(p for p in w.report.plots if p.name == "throughput.png")
    assert [p.title for p in plot.panels] == ["TP1", "TP4", "TP8"]
    img = _pixels(plot.path)
    boxes = [p.box for p in plot.panels]
    assert all(b[2] <= img.shape[1] and b[3] <= img.shape[0] for b in boxes)
    assert boxes[0][2] < boxes[1][0] and boxes[1][2] < boxes[2][0]  # side by side, not overlapping
    for box in boxes:
        region = _panel(img, box)
        assert _colored(region) > 1500  # the speculative lines
        assert _near(region, BLACK_AR, 10) > 300  # the AR baseline
    # ddtree-b16 failed to start at TP1: no green line in that panel, a green line at TP4 and TP8
    assert _near(_panel(img, boxes[0]), GREEN) == 0
    assert _near(_panel(img, boxes[1]), GREEN) > 200
    assert _near(_panel(img, boxes[2]), GREEN) > 200


def test_speedup_heatmap_panels_and_missing_cells(full: tuple[Path, Written]) -> None:
    _, w = full
    plot = next(p for p in w.report.plots if p.name == "speedup.png")
    assert [p.title for p in plot.panels] == ["TP1", "TP4", "TP8"]
    img = _pixels(plot.path)
    grey = [_near(_panel(img, p.box), (0xEE, 0xEE, 0xEE), 3) for p in plot.panels]
    # TP1 has a whole skipped row (ddtree-b16), TP4 one failed cell, TP8 none
    assert grey[0] > grey[1] > grey[2] >= 0
    assert grey[2] < 50
    for p in plot.panels:
        assert _colored(_panel(img, p.box)) > 0.5 * (p.box[2] - p.box[0]) * (p.box[3] - p.box[1]) * 0.5


def test_other_plots_have_their_panels(full: tuple[Path, Written]) -> None:
    _, w = full
    by = {p.name: p for p in w.report.plots}
    assert [p.title for p in by["tpot.png"].panels] == ["TP1", "TP4", "TP8"]
    assert [p.title for p in by["memory.png"].panels] == ["TP1", "TP4", "TP8"]
    assert len(by["pareto.png"].panels) == 1
    # 4 speculative configs x 3 TP, less ddtree-b16 at TP1 (skipped): 11 accept-length panels with boxes
    assert len(by["accept_length.png"].panels) == 11
    for name in ("tpot.png", "memory.png", "pareto.png", "accept_length.png"):
        img = _pixels(by[name].path)
        for panel in by[name].panels:
            assert _colored(_panel(img, panel.box)) > 200, (name, panel.title)


def test_html_is_self_contained_and_lists_every_cell(full: tuple[Path, Written]) -> None:
    store, w = full
    html = w.html.read_text()
    for c in load_store(store).cells:
        assert c.cell_id in html
        assert f'<td class="text">{c.label}</td>' in html  # the config column of its row
    assert "http://" not in html and "https://" not in html and "<script" not in html
    srcs = re.findall(r'<img [^>]*src="([^"]+)"', html)
    assert len(srcs) == len(w.pngs)
    for src in srcs:
        assert src.startswith("data:image/png;base64,")
        data = base64.b64decode(src.split(",", 1)[1])
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert "AssertionError: max_running_request is zero" in html
    assert "Partial: 55 of 60 cells done" in html
    hrefs = set(re.findall(r'href="(logs/[^"]+)"', html))
    assert len(hrefs) >= 56  # 55 done cells and the failed one stored logs, plus the failed server's
    for href in hrefs:
        assert (w.out_dir / href).is_file()


def test_markdown_tables_links_and_logs(full: tuple[Path, Written]) -> None:
    store, w = full
    md = w.markdown.read_text()
    for c in load_store(store).cells:
        assert c.cell_id in md
    for name in ("throughput.png", "speedup.png", "pareto.png"):
        assert f"]({name})" in md
    # each failure links to a log file that exists and holds the whole log
    links = re.findall(r"\[log\]\((logs/[^)]+)\)", md)
    assert "logs/server-srv-tp1-ddtree-b16.log" in links and "logs/cell-tp4-dflash-c8.log" in links
    for link in links:
        assert (w.out_dir / link).is_file()
    con = sqlite3.connect(store)
    server_log = con.execute("SELECT log_text FROM servers WHERE server_id='srv-tp1-ddtree-b16'").fetchone()[0]
    assert (w.out_dir / "logs/server-srv-tp1-ddtree-b16.log").read_text() == server_log
    assert "## Phase 1 · TP1" in md and "## Phase 3 · TP8" in md


def test_empty_store_says_so(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    sqlite3.connect(path).executescript(SCHEMA)
    w = report_paths([path], tmp_path / "out")
    assert w.pngs == ()
    assert "Empty: this store holds no cells yet" in w.html.read_text()
    assert "Empty: this store holds no cells yet" in w.markdown.read_text()


def test_zero_byte_file_is_an_empty_store(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    path.touch()
    w = report_paths([path], tmp_path / "out")
    assert "Empty" in w.markdown.read_text()


def test_all_failed_store_says_so(tmp_path: Path) -> None:
    path = write_store(tmp_path / "f.db", tps=(1,), labels=("ddtree-b16",), failing_server=(1, "ddtree-b16"))
    w = report_paths([path], tmp_path / "out")
    md = w.markdown.read_text()
    assert "All 4 cells failed or were skipped" in md
    assert "max_running_request is zero" in md
    assert [p.name for p in w.pngs] == ["memory.png"]  # only the plan, nothing measured


def test_partial_store_draws_what_is_done(tmp_path: Path) -> None:
    path = write_store(tmp_path / "p.db", pending_from=(4, "ar"), failing_server=None, failing_cell=None)
    w = report_paths([path], tmp_path / "out")
    assert "Partial: 20 of 60 cells done" in w.markdown.read_text()
    plot = next(p for p in w.report.plots if p.name == "throughput.png")
    assert [p.title for p in plot.panels] == ["TP1"]  # TP4 and TP8 are still pending


def test_rerender_removes_stale_plots(tmp_path: Path) -> None:
    out = tmp_path / "out"
    report_paths([write_store(tmp_path / "a.db", tps=(1,))], out)
    assert (out / "throughput.png").exists()
    empty = tmp_path / "e.db"
    sqlite3.connect(empty).executescript(SCHEMA)
    report_paths([empty], out)
    assert not (out / "throughput.png").exists()


def test_compare_two_stores_one_series_each(tmp_path: Path) -> None:
    a = write_store(tmp_path / "sglang.db", failing_server=None, failing_cell=None)
    b = write_store(tmp_path / "vllm.db", engine="vllm", engine_version="0.11.0", seed=11, throughput_scale=0.8,
                    failing_server=None, failing_cell=None)
    w = report_paths([a, b], tmp_path / "cmp")
    html = w.html.read_text()
    assert "sglang: ddtree-b8" in html and "vllm: ddtree-b8" in html
    assert html.count("cell-tp8-dflash-c4") >= 2  # the same cell id from both stores
    plot = next(p for p in w.report.plots if p.name == "throughput.png")
    img = _pixels(plot.path)
    # the second store is drawn dashed in the same colours: the AR colour appears in every panel
    for panel in plot.panels:
        assert _near(_panel(img, panel.box), BLACK_AR, 10) > 300
    assert "specbench comparison: sglang vs vllm" in w.markdown.read_text()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specbench", *args], capture_output=True, text=True, timeout=120)


def test_cli_report_and_errors(tmp_path: Path) -> None:
    store = write_store(tmp_path / "run.db", tps=(1,), failing_server=None, failing_cell=None)
    res = _cli("report", str(store), "--out", str(tmp_path / "rep"))
    assert res.returncode == 0, res.stderr
    assert str(tmp_path / "rep" / "report.html") in res.stdout
    assert "Complete: all 20 cells done." in res.stdout
    missing = _cli("report", str(tmp_path / "nope.db"))
    assert missing.returncode == 2
    assert missing.stderr.strip().count("\n") == 0 and "no such results store" in missing.stderr
    bad = tmp_path / "bad.db"
    bad.write_text("not sqlite")
    res = _cli("report", str(bad))
    assert res.returncode == 2 and "not an SQLite" in res.stderr and "Traceback" not in res.stderr
