"""The one metric table (load/metric_table.py): the docs block equals it, and one added row reaches the report's cell
tables, `specbench run`'s summary rows and the contract (issue 38: adding a metric is one entry)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from paths import ROOT
from specbench.commands.run_summary import summary_rows
from specbench.load import metric_table
from specbench.load.metric_table import METRICS, MetricDef
from specbench.report.build import report_paths

DEMO = ROOT / "tests/data/demo-smollm2-vllm-cpu/demo.sqlite"


def test_docs_block_is_the_table() -> None:
    out = subprocess.run([sys.executable, "tools/metric_docs.py", "--check"], cwd=ROOT, capture_output=True,
                         text=True, env={"PYTHONPATH": str(ROOT / "src")})
    assert out.returncode == 0, out.stderr


def test_every_key_once_and_every_distribution_stat_present() -> None:
    keys = [m.key for m in METRICS]
    assert len(keys) == len(set(keys))
    for d in metric_table.DISTRIBUTIONS:
        for stat in metric_table.STATS:
            assert d.key(stat) in keys


def test_one_added_row_is_shown_everywhere(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    added = MetricDef("e2e_ms_p90", "ms", "E2E 90th percentile", column="E2E p90 ms", run_row=True)
    rest = tuple(m for m in METRICS if m.key != added.key)
    monkeypatch.setattr(metric_table, "METRICS", (*rest, added))
    monkeypatch.setattr(metric_table, "BY_KEY", {m.key: m for m in metric_table.METRICS})

    assert "| `e2e_ms_p90` | ms | E2E 90th percentile | E2E p90 ms | yes |" in metric_table.contracts_table()
    store = tmp_path / "demo.sqlite"  # summary_rows opens the store as the runner does (read-write): a copy
    shutil.copy(DEMO, store)
    rows = summary_rows(store)
    assert rows and all("e2e_ms_p90" in r for r in rows)
    assert any(isinstance(r["e2e_ms_p90"], float) for r in rows)  # the stored value, read through

    written = report_paths([store], tmp_path / "report")
    header = next(ln for ln in written.markdown.read_text().splitlines() if ln.startswith("| config |"))
    assert "| E2E p90 ms |" in header
    cells = [r for t in written.report.tables.phases for r in t.rows if r.status == "done"]
    assert cells and all(isinstance(r.values.get("e2e_ms_p90"), float) for r in cells)
