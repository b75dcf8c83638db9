"""The report decides (issue 34 items 1, 4, 5): the real H200 stores re-rendered; every headline is one of the
decision statements; every point a figure draws equals its table value (read from the figure's recorded data), the
error bars are the table's interval ends, and the heat map marks exactly the undecided cells."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from paths import DATA
from specbench.report.build import report_paths
from specbench.report.rows import CellRow

STORES = {
    "dense8b": [DATA / "h200-dense8b-sglang-0.5.15.post1" / "h200-dense8b.db"],
    "moe": [DATA / "h200-moe-sglang-0.5.15.post1" / "h200-moe.db"],
    "sim+eagle3": [DATA / "h200-simulated-sglang-0.5.15.post1" / "h200-sim.db",
                   DATA / "h200-simulated-sglang-0.5.15.post1" / "h200-eagle3.db"],
    "mtp": [DATA / "h200-run-sglang-0.5.15.post1" / "h200.db"],
}
NAME = r"[\w.\-: \[\]=,]+?"
STATEMENTS = (
    re.compile(rf"^{NAME} \(decided against every other\)"),
    re.compile(rf"^{NAME}( or {NAME})+ \(tie within 3%\)"),
    re.compile(rf"^undecided between {NAME}( and {NAME}|(, {NAME})+ and {NAME}): (about \d+ more repeats? each would "
               r"decide|more than \d+ more repeats each: the difference is small against the noise|measured once: "
               r"repeat it \(`repeats`\) to decide)"),
    re.compile(rf"^{NAME} \(the only configuration measured\)"),
)


@pytest.fixture(scope="module", params=sorted(STORES))
def written(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    return report_paths(STORES[request.param], tmp_path_factory.mktemp(request.param))


def test_every_headline_is_a_decision_statement(written) -> None:  # type: ignore[no-untyped-def]
    qs = written.report.tables.questions
    assert qs
    for q in qs:
        for m, h in q.decision.headlines.items():
            assert any(p.match(h.text) for p in STATEMENTS), (m, h.text)
            assert h.names[0] == next(s.arm.name for s in q.decision.standings
                                      if s.verdict(m) == "best"), h.text
    lines = written.markdown.read_text().splitlines()
    for q in qs:  # the answer the markdown shows is the decision's own statement, its warnings in the same row
        h = q.decision.headline
        assert h.text.startswith(h.statement) and h.statement
        row = [ln for ln in lines if f" | {h.statement.replace('|', chr(92) + '|')} | " in ln
               and f"| {q.concurrency:g} |" in ln]
        assert row, h.statement
        for _, w in h.warnings:
            assert any(w.replace("|", "\\|") in ln for ln in row), w


def _rows(written) -> dict[tuple[str, str, float], CellRow]:  # type: ignore[no-untyped-def]
    return {(f"TP{r.tp}", r.series, float(r.concurrency or 0)): r
            for t in written.report.tables.phases for r in t.rows}


def test_every_plotted_point_is_its_table_value(written) -> None:  # type: ignore[no-untyped-def]
    rows = _rows(written)
    checked = 0
    for plot in written.report.plots:
        if not plot.points:
            continue
        field = {"throughput.png": ("output_throughput", "throughput_ci"), "speedup_lines.png": ("speedup", "speedup_ci"),
                 "speedup.png": ("speedup", "speedup_ci"), "tpot.png": ("tpot_p50", None),
                 "ttft.png": ("ttft_p50", None), "e2e.png": ("e2e_p50", None)}.get(plot.name.split("/")[-1])
        if field is None:
            continue
        value, ci = field
        for p in plot.points:
            r = rows[(p.panel, p.series, p.x)]
            assert p.y == getattr(r, value), (plot.name, p)
            want = getattr(r, ci) if ci else None
            assert (p.lo, p.hi) == ((want[0], want[1]) if want else (None, None)), (plot.name, p)
            if want:  # the point is the pooled estimate, inside its interval, not the interval's centre
                assert want[0] <= p.y <= want[1]
            if plot.name.endswith("speedup.png"):
                assert p.verdict == r.vs_ar.get("throughput")
            checked += 1
    assert checked > 0


def test_the_markdown_table_and_the_figure_show_one_speedup(written) -> None:  # type: ignore[no-untyped-def]
    """The phase table's 'speedup vs AR' text is the heat map's number for every drawn cell."""
    md = written.markdown.read_text()
    heat = [p for plot in written.report.plots if plot.name.endswith("speedup.png") for p in plot.points]
    for p in heat:
        ci = f" [{p.lo:.2f}, {p.hi:.2f}]" if p.lo is not None and p.hi is not None else ""
        assert f"{p.y:.2f}×{ci}" in md


def test_decided_and_undecided_cells_on_the_dense_store() -> None:
    """Qwen3-8B EAGLE3 (two repeats): at c = 1 sim 3.5 is decided against every other; at c = 32 its 1.11x over
    AR is undecided, its heat-map cell is marked, and the answer names how many more repeats would decide."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        w = report_paths(STORES["dense8b"], Path(d) / "r")
        by_c = {q.concurrency: q for q in w.report.tables.questions}
        assert by_c[1].decision.headline.text == "eagle3-sim3.5 (decided against every other)"
        h32 = by_c[32].decision.headline
        assert h32.kind == "undecided" and h32.names == ("eagle3-sim3.5", "ar")
        assert re.search(r"about \d+ more repeats? each would decide", h32.text)
        heat = next(p for p in w.report.plots if p.name == "speedup.png")
        marked = {(pt.series, pt.x) for pt in heat.points if pt.verdict == "undecided"}
        assert ("eagle3-sim3.5", 32.0) in marked and ("eagle3-sim3.5", 1.0) not in marked
        # TPOT decides what throughput leaves open at c = 32: the latency answer says so
        assert by_c[32].decision.headlines["tpot"].text.startswith("eagle3-sim3.5 (decided against every other)")


def test_random_prompts_with_a_real_drafter_warn_beside_the_name(tmp_path: Path) -> None:
    """The Llama EAGLE3 store (random token ids): the EAGLE3 configuration with its own (random) drafts carries the
    random-prompts warning in its row and in every answer that names it; the simulated-acceptance one does not."""
    w = report_paths([DATA / "h200-simulated-sglang-0.5.15.post1" / "h200-eagle3.db"], tmp_path / "r")
    rows = [r for t in w.report.tables.phases for r in t.rows if r.status == "done"]
    assert all(any("random tokens" in x for x in r.warnings) == (r.label == "eagle3") for r in rows)
    for q in w.report.tables.questions:
        h = q.decision.headline
        assert ("random tokens" in h.text) == ("eagle3" in h.names)
