"""The incident's matrix (examples/qwen36-27b-dflash-ddtree.toml) before any launch: the real matrix expansion,
the runner's preflight with the real planner, written by the real store writer; the report shows every cell
pending and the planner's memory split per server tuple."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from paths import ROOT as REPO
from specbench.report.build import report_paths

MATRIX = REPO / "examples" / "qwen36-27b-dflash-ddtree.toml"


@pytest.fixture(scope="module")
def incident_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not MATRIX.is_file():
        pytest.skip(f"{MATRIX} not in this checkout")
    from specbench.contracts import plan_json
    from specbench.matrix.adapters import adapter_for
    from specbench.matrix.expansion import expand
    from specbench.matrix.preflight import preflight
    from specbench.matrix.store import Store
    from specbench.matrix.toml_load import load_matrix

    spec, _ = load_matrix(MATRIX)
    adapter = adapter_for(spec)
    tuples, cells = expand(spec)
    path = tmp_path_factory.mktemp("incident") / "incident.sqlite"
    with Store(path) as store:
        store.set_meta({"name": spec.name, "engine": spec.engine, "engine_version": spec.plan.engine_version or ""})
        for st in tuples:
            pf = preflight(spec, st, adapter)
            store.put_server(server_id=st.server_id, phase=st.phase, tp=st.tp, engine=spec.engine,
                             settings=pf.settings, command=list(pf.launch.argv), env=dict(pf.launch.env),
                             verdict=pf.verdict, plan=plan_json(pf.plan),
                             status="skipped" if pf.verdict == "skipped" else "pending")
        for c in cells:
            store.ensure_cell(cell_id=c.cell_id, server_id=c.server_id, phase=c.phase, tp=c.tp,
                              algorithm=c.algorithm, label=c.label, server=c.server, client=c.client)
    return path


def test_unrun_incident_report(incident_store: Path, tmp_path: Path) -> None:
    w = report_paths([incident_store], tmp_path / "report")
    t = w.report.tables
    assert t.summary.state == "partial" and t.summary.headline.startswith(f"Partial: 0 of {t.summary.n_cells}")
    assert [p.name for p in w.pngs] == ["memory.png"]  # nothing measured yet; the plan is there
    assert {m.tp for m in t.memory} == {1, 4, 8}
    # every server tuple that the planner sized has its split, and the parts fill the GPU
    for m in t.memory:
        assert m.total == pytest.approx(95.59, abs=0.5)  # RTX PRO 6000 Blackwell, the matrix's [plan] gpu
        assert sum(v for _, v in m.parts) == pytest.approx(m.total)
        assert m.weights and m.weights * m.tp == pytest.approx(t.memory[0].weights * t.memory[0].tp, rel=0.05)
    html = w.html.read_text()
    for table in t.phases:
        for r in table.rows:
            assert r.cell_id in html
    plot = w.report.plots[0]
    assert [p.title for p in plot.panels] == ["TP1", "TP4", "TP8"]
    with Image.open(plot.path) as im:
        assert im.format == "PNG"
    # the workloads differ in prompt length (1,024 and 30,000 tokens): rows say which
    assert any("[in=30000]" in r.series for table in t.phases for r in table.rows)
