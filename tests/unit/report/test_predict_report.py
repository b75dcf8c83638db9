"""The report's predicted-vs-measured section on real stores: the H200 MoE store (every done cell predicted, the
error per cell), and a store the model cannot predict (the section says why; the report still renders)."""

from __future__ import annotations

import re

from paths import ROOT
from specbench.report.build import report_paths
from specbench.testing.synthetic import write_store

MOE_STORE = ROOT / "tests" / "data" / "h200-moe-sglang-0.5.15.post1" / "h200-moe.db"


def _section(md: str) -> list[str]:
    lines = md.splitlines()
    start = lines.index("## Predicted vs measured")
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("## "))
    return lines[start:end]


def test_moe_store_predicted_vs_measured(tmp_path):
    w = report_paths([MOE_STORE], tmp_path / "rep")
    sec = _section(w.markdown.read_text(encoding="utf-8"))
    rows = [ln for ln in sec if ln.startswith("| h200-moe |")]
    assert len(rows) == 16
    spec = [r for r in rows if "eagle3-sim" in r]
    assert len(spec) == 12
    for r in spec:
        cells = [c.strip() for c in r.strip("|").split("|")]
        measured, predicted, iv, inside, err = float(cells[6]), float(cells[7]), cells[8], cells[9], cells[10]
        m = re.fullmatch(r"([+-]\d+\.\d) %", err)
        assert m and abs(float(m.group(1)) - 100 * (predicted / measured - 1)) < 0.2
        lo, hi = (float(x) for x in iv.split("-"))
        assert lo < predicted < hi
        if min(abs(measured - lo), abs(measured - hi)) > 0.006:  # the bounds are printed to 2 decimals
            assert inside == ("yes" if lo <= measured <= hi else "no")
        state, _, artifact = cells[11].partition(", ")
        assert state in ("calibrated", "extrapolated")
        # accept 1.5 on this dummy-weight MoE measured collapsed routing: marked, explained below the table
        assert (artifact == "a stand-in's artifact: not judged (below)") == ("sim1.5" in r)
        assert cells[12] == "yes (in-sample)"  # the shipped calibration was fitted on this very store: said
        assert "Qwen/Qwen3-30B-A3B" in cells[13]
    html = w.html.read_text(encoding="utf-8")
    assert 'id="predicted"' in html and 'href="#predicted"' in html


def test_a_store_the_model_cannot_predict_says_why(tmp_path):
    store = write_store(tmp_path / "syn.sqlite")
    w = report_paths([store], tmp_path / "rep")
    sec = _section(w.markdown.read_text(encoding="utf-8"))
    assert any(ln.startswith("no predictions:") for ln in sec), sec
