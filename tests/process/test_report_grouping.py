"""A report that never compares the incomparable (issue 22 item 7): series keyed by config and workload, sections
per model and GPU, fastest tables per workload with the lead speedup's interval and decision, rate cells led by
TPOT, a readable per-position acceptance figure, and the workload axes in the dry run. Real SQLite stores (the
synthetic writer), the real report writer, the real CLI."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from proc_helpers import free_port
from run_helpers import cli, instant_matrix, make_tokenizer
from specbench.report.build import report_paths
from specbench.report.tables import build_tables
from specbench.stored.read import load_store
from specbench.testing.synthetic import write_store

# slow: a whole `specbench run` or a process fault per test, seconds each: `make test-fast` leaves it out
pytestmark = pytest.mark.slow


def _edit(path: Path, fn) -> None:  # type: ignore[no-untyped-def]
    con = sqlite3.connect(path)
    for cid, cj, mj in con.execute("SELECT cell_id, client_json, metrics_json FROM cells").fetchall():
        c, m = json.loads(cj), json.loads(mj) if mj else None
        fn(cid, c, m)
        con.execute("UPDATE cells SET client_json=?, metrics_json=? WHERE cell_id=?",
                    (json.dumps(c), json.dumps(m) if m is not None else None, cid))
    con.commit()
    con.close()


def _store(tmp: Path, name: str, **kw) -> Path:  # type: ignore[no-untyped-def]
    return write_store(tmp / f"{name}.db", tps=(1,), labels=("ar", "dflash"), concurrencies=(1, 4),
                       failing_server=None, failing_cell=None, **kw)


def test_cells_that_differ_only_by_category_are_two_series_and_two_points(tmp_path: Path) -> None:
    path = _store(tmp_path, "cat")
    con = sqlite3.connect(path)
    for cid, cj, mj, srv, phase, tp, algo, label, server in con.execute(
            "SELECT cell_id, client_json, metrics_json, server_id, phase, tp, algorithm, label, server_json "
            "FROM cells").fetchall():
        c = json.loads(cj)
        c["category"] = "code"
        con.execute("UPDATE cells SET client_json=? WHERE cell_id=?", (json.dumps(c), cid))
        c["category"] = "math"
        m = json.loads(mj)
        m["output_throughput"] *= 2
        con.execute("INSERT INTO cells(cell_id, server_id, phase, tp, algorithm, label, server_json, client_json, "
                    "status, metrics_json) VALUES(?,?,?,?,?,?,?,?, 'done', ?)",
                    (cid + "-math", srv, phase, tp, algo, label, server, json.dumps(c), json.dumps(m)))
    con.commit()
    con.close()
    t = build_tables([load_store(path)])
    series = {r.series for p in t.phases for r in p.rows}
    assert {"dflash [cat=code]", "dflash [cat=math]", "ar [cat=code]", "ar [cat=math]"} <= series
    points = {(b.workload_full, b.concurrency) for b in t.best}
    assert len(points) == 4 and {w for w, _ in points} == {"in=1024 out=256 data=random cat=code",
                                                          "in=1024 out=256 data=random cat=math"}
    rows = {r.cell_id: r for p in t.phases for r in p.rows}
    # each category's speculative cell is compared with the AR cell of its own category
    assert rows["cell-tp1-dflash-c4-math"].ar_throughput == rows["cell-tp1-ar-c4-math"].output_throughput


def test_two_models_are_two_sections_never_ranked_together(tmp_path: Path) -> None:
    a, b = _store(tmp_path, "qwen"), _store(tmp_path, "llama", seed=3)
    for path, model, gpu in ((a, "Qwen/Qwen3.5-27B", "H200"), (b, "meta-llama/Llama-3.1-8B", "H200")):
        con = sqlite3.connect(path)
        con.executemany("INSERT INTO meta VALUES(?, ?)", [("model", model), ("gpu", gpu)])
        con.commit()
        con.close()
    w = report_paths([a, b], tmp_path / "rep")
    t = w.report.tables
    assert t.sections == ("Qwen/Qwen3.5-27B · H200", "meta-llama/Llama-3.1-8B · H200")
    for b_ in t.best:  # a fastest point holds cells of one section only
        assert b_.series.startswith("qwen: ") == (b_.section == t.sections[0])
    md = w.markdown.read_text()
    assert md.count("## Which setup to run (closed loop)") == 2
    assert "closed loop): Qwen/Qwen3.5-27B · H200" in md and "closed loop): meta-llama/Llama-3.1-8B · H200" in md
    names = {p.name for p in w.report.plots}
    assert {"section-1/pareto.png", "section-2/pareto.png"} <= names
    assert all(p.exists() for p in w.pngs) and (w.out_dir / "section-2" / "throughput.png").is_file()


def test_rate_cells_rank_by_tpot_and_lead_with_the_latency_speedup(tmp_path: Path) -> None:
    path = _store(tmp_path, "rate")

    def rate(cid: str, c: dict, m: dict) -> None:  # type: ignore[type-arg]
        c["request_rate"] = 2.0
        m["request_rate"] = 2.0
        if "dflash" in cid:
            m["output_throughput"] = 100.0  # both deliver the offered rate
            m["tpot_ms_mean"] = 10.0
        else:
            m["output_throughput"] = 101.0
            m["tpot_ms_mean"] = 30.0

    _edit(path, rate)
    from specbench.matrix.runner import fill_speedups
    from specbench.matrix.store import Store

    with Store(path) as st:
        fill_speedups(st)
    w = report_paths([path], tmp_path / "rep")
    best = w.report.tables.best
    assert best and all(b.lead == "tpot" and b.series == "dflash" for b in best)
    assert all(abs((b.speedup or 0) - 3.0) < 1e-6 for b in best)  # AR TPOT / dflash TPOT, not 100 / 101
    md = w.markdown.read_text()
    assert "## Which setup to run (request rate)" in md and "ranked by TPOT mean" in md
    assert "rate=2.0" in md


def test_per_position_acceptance_is_small_multiples(tmp_path: Path) -> None:
    labels = ("ar", *(f"ddtree-b{i}" for i in range(1, 7)))
    path = write_store(tmp_path / "pos.db", tps=(1,), labels=labels, concurrencies=(1, 2, 4, 8),
                       failing_server=None, failing_cell=None)

    def pos(cid: str, c: dict, m: dict) -> None:  # type: ignore[type-arg]
        if "ddtree" in cid:
            m["acceptance_per_pos"] = [0.8, 0.6, 0.4]

    _edit(path, pos)
    w = report_paths([path], tmp_path / "rep")
    (plot,) = [p for p in w.pngs if p.name == "accept_pos.png"]  # a file path
    fig = next(p for p in w.report.plots if p.name == "accept_pos.png")
    assert len(fig.panels) == 6  # one panel per configuration (24 lines before: one legend over one panel)
    assert plot.stat().st_size > 0


def test_dry_run_and_run_summary_show_the_workload_axes(tmp_path: Path) -> None:
    make_tokenizer(tmp_path / "tok")
    (tmp_path / "p.jsonl").write_text(json.dumps({"prompt": "Reverse a list in C.", "category": "code"}) + "\n")
    m = instant_matrix(tmp_path / "m.toml", free_port(), tmp_path / "tok", name="axes",
                       client='dataset = "p.jsonl"\ncategory = "code"\ntemperature = 0.7\nconcurrency = 1\n'
                              'num_requests = 2\noutput_tokens = 4\nprompt_tokens = 20')
    r = cli("run", str(m), "--dry-run")
    assert r.returncode == 0, r.stderr
    cells = [ln for ln in r.stdout.splitlines() if "cell " in ln and "concurrency=" in ln]
    assert cells and all("cat=code" in ln and "temp=0.7" in ln for ln in cells)


def test_sections_follow_each_servers_model_over_real_runs(tmp_path: Path) -> None:
    """Two stores of real runs against the instant server: `mixed`, one matrix whose servers launch two models
    (`--model alpha` / `--model beta`, an AR and a speculative server each), and `plain`, whose server names no model
    (no meta `model` either: it answers /v1/models as `instant`). Model beta's servers are slower (4 ms between
    events), so a speculative cell compared with the other model's AR cell would show. The report has a section per model, never a
    "model ?" one; no fastest point mixes them, and each speculative cell is compared with its own model's AR cell,
    in the report and in the store (runner.py::fill_speedups)."""
    import sys

    from run_helpers import _matrix_head, rows

    tok = make_tokenizer(tmp_path / "tok")
    cmd = [sys.executable, "-m", "specbench.testing.instant_server", "--burst", "1", "--itl-ms", "1"]
    client = "\n[client]\nconcurrency = 2\nprompt_tokens = 20\noutput_tokens = 8\nnum_requests = 4\n"
    specs = "".join(f'\n[[server.spec]]\nlabel = "{label}"\nalgorithm = "{algo}"\nflags = {{ {flags} }}\n'
                    for label, algo, flags in (("ar", "ar", '"--model" = "alpha"'),
                                               ("spec3", "draft_model", '"--model" = "alpha", "--accept-length" = 3'),
                                               ("ar-beta", "ar", '"--model" = "beta", "--itl-ms" = 4'),
                                               ("spec2-beta", "draft_model",
                                                '"--model" = "beta", "--itl-ms" = 4, "--accept-length" = 2')))
    stores = []
    for name, body in (("mixed", specs), ("plain", '\n[[server.spec]]\nlabel = "ar"\n'
                                                   '\n[[server.spec]]\nlabel = "spec3"\nalgorithm = "draft_model"\n'
                                                   'flags = { "--accept-length" = 3 }\n')):
        m = tmp_path / f"{name}.toml"
        m.write_text(_matrix_head(name, cmd, free_port(), tok, ready_s=30, stop_s=5) + body + client)
        store = tmp_path / f"{name}.sqlite"
        r = cli("run", str(m), "--store", str(store), "--no-progress")
        assert r.returncode == 0, r.stderr
        assert {s for (s,) in rows(store, "SELECT status FROM cells")} == {"done"}
        stores.append(store)
    w = report_paths(stores, tmp_path / "rep")
    t = w.report.tables
    assert set(t.sections) == {"alpha · GPU ?", "beta · GPU ?", "instant · GPU ?"}
    by_label = {(r.store, r.label): r for p in t.phases for r in p.rows}
    for (store, label), r in by_label.items():
        model = {"ar": "alpha", "spec3": "alpha", "ar-beta": "beta", "spec2-beta": "beta"}[label] \
            if store == "mixed" else "instant"
        assert r.section == f"{model} · GPU ?", (store, label, r.section)
    for b in t.best:  # a fastest point ranks the cells of one section only
        ranked = [r for r in by_label.values() if r.section == b.section and r.concurrency == b.concurrency]
        assert {r.section for r in ranked} == {b.section}
    assert len(t.best) == 3
    beta, ar_beta = by_label[("mixed", "spec2-beta")], by_label[("mixed", "ar-beta")]
    alpha, ar_alpha = by_label[("mixed", "spec3")], by_label[("mixed", "ar")]
    assert beta.ar_throughput == ar_beta.output_throughput and alpha.ar_throughput == ar_alpha.output_throughput
    stored = {label: json.loads(mj) for label, mj in rows(stores[0], "SELECT label, metrics_json FROM cells")}
    assert stored["spec2-beta"]["speedup"] == pytest.approx(
        stored["spec2-beta"]["output_throughput"] / stored["ar-beta"]["output_throughput"], rel=1e-3)
    assert stored["spec3"]["speedup"] == pytest.approx(
        stored["spec3"]["output_throughput"] / stored["ar"]["output_throughput"], rel=1e-3)
    md = w.markdown.read_text()
    assert "model ?" not in md and md.count("## Which setup to run (closed loop)") == 3
