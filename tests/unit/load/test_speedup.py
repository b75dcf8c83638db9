"""The one speedup definition (load/speedup.py), and that the runner, the report and the export agree on it."""

from __future__ import annotations

import pytest

from specbench.load import speedup as S


def _cell(tp, conc, algo, tput, **client):
    return {"tp": tp, "concurrency": conc, "algorithm": algo, "metrics": {"output_throughput": tput},
            "client": {"concurrency": conc, **client}}


def test_ar_cell_has_no_speedup():
    out = S.with_speedup([_cell(1, 1, "ar", 100.0)])
    assert out[0]["metrics"]["speedup"] is None
    assert S.speedup_at(S.baseline_key(1, 1), True, 100.0, {S.baseline_key(1, 1): 100.0}) is None
    assert S.is_ar("AR") and S.is_ar(None, "ar") and not S.is_ar("eagle", "ar")


def test_no_baseline():
    out = S.with_speedup([_cell(1, 1, "eagle", 300.0)])
    assert out[0]["metrics"]["speedup"] is None
    assert S.speedup({"output_throughput": 300.0}, None) is None


def test_baseline_with_zero_throughput_is_no_baseline():
    out = S.with_speedup([_cell(1, 1, "ar", 0.0), _cell(1, 1, "eagle", 300.0)])
    assert out[1]["metrics"]["speedup"] is None
    assert S.ratio(300.0, 0.0) is None and S.ratio(300.0, float("nan")) is None and S.ratio(None, 100.0) is None
    assert S.ar_index([(("k",), True, 0.0), (("j",), True, None)]) == {}


def test_different_tp_is_not_the_baseline():
    out = S.with_speedup([_cell(1, 1, "ar", 100.0), _cell(2, 1, "eagle", 300.0), _cell(1, 1, "eagle", 300.0)])
    assert out[1]["metrics"]["speedup"] is None and out[2]["metrics"]["speedup"] == pytest.approx(3.0)


def test_different_workload_is_not_the_baseline():
    """The one key includes the workload: an AR cell at 128-token prompts is no baseline for 1024-token ones."""
    cells = [_cell(1, 4, "ar", 100.0, prompt_tokens=128, request_rate="inf"),
             _cell(1, 4, "eagle", 300.0, prompt_tokens=1024, request_rate="inf"),
             _cell(1, 4, "eagle", 200.0, prompt_tokens=128, request_rate="inf")]
    out = [c["metrics"]["speedup"] for c in S.with_speedup(cells)]
    assert out[1] is None and out[2] == pytest.approx(2.0)
    assert S.baseline_key(1, 4, {"request_rate": 4.0}) == (1, 4, None, None, "4.0", None)
    assert S.baseline_key(1, 4, {}) == (1, 4, None, None, None, None)


def test_runner_report_and_export_agree(tmp_path):
    from specbench.matrix.runner import fill_speedups
    from specbench.report.export import records
    from specbench.stored.read import load_store
    from specbench.testing.synthetic import write_store

    path = write_store(tmp_path / "s.db")
    stores = [load_store(path)]
    exported = {r["cell_id"]: r["speedup_vs_ar"] for r in records(stores)}
    from specbench.matrix.store import Store

    st = Store(path)
    fill_speedups(st)
    stored = {r["cell_id"]: r["metrics"].get("speedup") for r in st.cells() if r.get("metrics")}
    st.close()
    assert any(v is not None for v in stored.values())
    for cid, v in stored.items():
        if v is not None:
            assert exported[cid] == pytest.approx(v, abs=1e-3)
