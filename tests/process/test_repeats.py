"""Repeats and spread (issue 14 item 5) and the speculative report (item 6): the CI math against hand-computed values,
a dataset + category + sampling + `repeats = 3` matrix end to end against the instant server (a real subprocess)
into a real store, its report (per-category speedups with intervals, error-bar figures), the per-request JSONL
export, and the committed H200 fixture rendered with its simulated cells marked."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from proc_helpers import free_port
from run_helpers import ROOT, cli, instant_matrix, make_tokenizer, rows
from specbench.load import spread as sp

# slow: a whole `specbench run` or a process fault per test, seconds each: `make test-fast` leaves it out
pytestmark = pytest.mark.slow

H200 = ROOT / "tests/data/h200-simulated-sglang-0.5.15.post1"
RECORDS = [
    {"prompt": "Write a Python function that returns the n-th Fibonacci number.", "category": "code"},
    {"prompt": "Reverse a linked list in C and explain the pointer moves.", "category": "code"},
    {"prompt": "What is 17 times 23? Show the steps.", "category": "math"},
    {"prompt": "Solve 2x + 6 = 20 and check the answer.", "category": "math"},
]


# ------------------------------------------------------------------ the math, by hand


def test_spread_matches_hand_computed_values() -> None:
    s = sp.spread([10.0, 12.0, 14.0])
    assert s.mean == 12.0 and s.std == pytest.approx(2.0) and s.cv == pytest.approx(2.0 / 12.0)
    # t(0.975, df=2) = 0.95 / sqrt(2 x 0.975 x 0.025) = 4.302652729749... (closed form for df 2; NIST's table: 4.303):
    # the quantile is exact now (load/spread.py t_ppf), with or without scipy
    half = 0.95 / math.sqrt(2 * 0.975 * 0.025) * 2.0 / math.sqrt(3)
    assert s.ci95 == pytest.approx((12.0 - half, 12.0 + half), abs=1e-9)
    one = sp.spread([5.0])
    assert one.std is None and one.ci95 is None


def _scipy() -> bool:
    try:
        import scipy  # type: ignore[import-untyped]  # noqa: F401
    except ImportError:
        return False
    return True


def test_noisy_flag_uses_the_threshold() -> None:
    per = [{"output_throughput": v, "tpot_ms_mean": 10.0} for v in (100.0, 104.0, 96.0)]  # CV 4%
    assert sp.spread_json(per)["noisy"] == []
    assert sp.spread_json(per, noisy_cv=0.03)["noisy"] == ["output_throughput"]


# ------------------------------------------------------------------ end to end


def _matrix(tmp: Path, tok: Path, repeats: int | None) -> Path:
    return instant_matrix(tmp / f"m{repeats}.toml", free_port(), tok, name="repeats",
                          spec3='num_draft_tokens = 3\nflags = { "--accept-length" = 3, "--num-spec-tokens" = 3 }',
                          client=f"""dataset = "prompts.jsonl"
concurrency = [1, 2]
num_requests = 4
output_tokens = 12
prompt_tokens = 40
warmup_requests = 1
temperature = 0.5
top_p = 0.9
seed = 3
slo_ttft_ms = 10000
{f"repeats = {repeats}" if repeats else ""}""")


def _run(m: Path, store: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return cli("run", str(m), "--store", str(store), "--no-progress", *extra, timeout=240)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("rep")
    make_tokenizer(d / "tok")
    (d / "prompts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    r = _run(_matrix(d, d / "tok", 3), d / "rep.db")
    assert r.returncode == 0, r.stderr
    r1 = _run(_matrix(d, d / "tok", None), d / "once.db")
    assert r1.returncode == 0, r1.stderr
    r2 = _run(_matrix(d, d / "tok", None), d / "cli.db", "--repeats", "2")  # the option overrides the matrix
    assert r2.returncode == 0, r2.stderr
    return {"rep": d / "rep.db", "once": d / "once.db", "cli": d / "cli.db", "dir": d}


def test_each_repeat_is_stored_and_spread_is_computed(runs: dict[str, Path]) -> None:
    cells = rows(runs["rep"], "select cell_id, label, status, metrics_json, client_json from cells")
    assert len(cells) == 4 and {c[2] for c in cells} == {"done"}
    for cid, label, _, mj, cj in cells:
        m = json.loads(mj)
        assert json.loads(cj)["repeats"] == 3
        reps = rows(runs["rep"], f"select repeat, count(*), count(category) from requests where cell_id='{cid}' "
                                 "group by repeat")
        assert reps == [(0, 4, 4), (1, 4, 4), (2, 4, 4)]  # the warm-up is never stored; every row its category
        s = m["spread"]
        assert s["repeats"] == 3 and s["noisy_cv"] == sp.NOISY_CV_DEFAULT
        tp = s["metrics"]["output_throughput"]
        assert len(tp["values"]) == 3 and tp["ci95"][0] <= tp["mean"] <= tp["ci95"][1]
        assert m["completed"] == 12  # the pooled keys keep their meaning over all repeats
        if label == "spec3":
            assert m["acceptance_per_pos"] == [1.0, 1.0]  # the instant server accepts 2 drafts every step
            assert m["draft_acceptance_rate"] == pytest.approx(2 / 3)
    once = rows(runs["once"], "select metrics_json, client_json from cells")
    assert all("spread" not in json.loads(m) and "repeats" not in json.loads(c) for m, c in once)
    assert rows(runs["once"], "select count(*), count(repeat) from requests") == [(16, 0)]
    assert {json.loads(c[0])["repeats"] for c in rows(runs["cli"], "select client_json from cells")} == {2}


def test_report_shows_category_speedups_with_intervals(runs: dict[str, Path], tmp_path: Path) -> None:
    from specbench.report.build import report_paths

    w = report_paths([runs["rep"]], tmp_path / "rep")
    md = w.markdown.read_text()
    assert "## Per category" in md
    cat_lines = [ln for ln in md.splitlines() if ln.startswith("| spec3 |") and ("| code |" in ln or "| math |" in ln)]
    assert len(cat_lines) == 4  # 2 concurrencies x 2 categories
    assert all("× [" in ln for ln in cat_lines)  # each with its 95% interval
    # the pooled throughput's log interval and the log-ratio interval of the speedup (issue 22 item 2; before it: the
    # mean's symmetric "±" and a delta-method interval on the ratio itself)
    assert "log-ratio 95% intervals" in md and "on the log scale" in md
    spec_rows = [ln for ln in md.splitlines() if ln.startswith("| spec3 | 1 | done |")]
    assert spec_rows and all(ln.split(" | ")[3].count("[") == 1 for ln in spec_rows)  # out tok/s [lo, hi]
    names = {p.name for p in w.pngs}
    assert {"throughput.png", "speedup_lines.png", "ttft.png", "e2e.png", "goodput.png", "accept_pos.png"} <= names
    w1 = report_paths([runs["once"]], tmp_path / "once")
    md1 = w1.markdown.read_text()
    assert "× [" not in md1.split("## Per category")[0] and "±" not in md1
    for name in ("throughput.png", "speedup_lines.png"):
        assert (w.out_dir / name).read_bytes() != (w1.out_dir / name).read_bytes()


def test_jsonl_export_round_trips(runs: dict[str, Path]) -> None:
    r = subprocess.run([sys.executable, "-m", "specbench", "export", str(runs["rep"]), "--format", "jsonl"],
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    recs = [json.loads(x) for x in r.stdout.splitlines()]
    stored = rows(runs["rep"], "select cell_id, idx, repeat, category, output_tokens, e2e_s, itl_json, accept_len "
                              "from requests order by cell_id, idx")
    assert len(recs) == len(stored) == 48
    for rec, row in zip(recs, stored):
        assert (rec["cell_id"], rec["idx"], rec["repeat"], rec["category"], rec["output_tokens"], rec["e2e_s"],
                rec["itl"], rec["accept_len"]) == (*row[:6], json.loads(row[6]), row[7])
        assert rec["label"] in ("ar", "spec3") and rec["concurrency"] in (1, 2)


def test_h200_fixture_renders_with_simulated_cells_marked(tmp_path: Path) -> None:
    from specbench.report.build import report_paths

    dbs = []
    for name in ("h200-sim.db", "h200-eagle3.db"):
        shutil.copy(H200 / name, tmp_path / name)
        dbs.append(tmp_path / name)
    w = report_paths(dbs, tmp_path / "report")
    md = w.markdown.read_text()
    assert "0.5.15.post1" in md and "/tmp/models/q35_27b" in md  # engine version and model in the stores table
    assert "(sim 2.5)" in md and "(sim 3.5)" in md and "simulated_accept_len" in md
    ar_lines = [ln for ln in md.splitlines() if ln.startswith("| h200-sim: ar ")]
    assert ar_lines and not any("(sim" in ln for ln in ar_lines)  # a real cell is never marked
    assert "lacks columns" not in md  # an older store without category/repeat is not a warning
    # two models (Qwen3.5-27B, Llama-3.1-8B): one section each (issue 22 item 7), each with its own figures
    assert all((w.out_dir / f"section-{i}" / "accept_length.png").exists() for i in (1, 2))


def test_report_and_export_show_one_speedup_with_repeats(runs: dict[str, Path]) -> None:
    """The report's speedup is the store's (load/speedup.py: the ratio of the mean throughputs over the repeats, the
    value its interval is centred on), and `export` prints the same number: no second definition in the report."""
    from specbench.report.cellrows import ar_cells, speedup_interval
    from specbench.report.sections import ar_key
    from specbench.report.tables import phase_tables
    from specbench.stored.read import load_store

    store = load_store(runs["rep"])
    r = subprocess.run([sys.executable, "-m", "specbench", "export", str(runs["rep"]), "--format", "json"],
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    exported = {c["cell_id"]: c for c in json.loads(r.stdout)}
    ars = ar_cells([store])
    spec_rows = [row for t in phase_tables([store]) for row in t.rows if row.label == "spec3"]
    assert len(spec_rows) == 2
    for row in spec_rows:
        cell = next(c for c in store.cells if c.cell_id == row.cell_id)
        centre, _ci = speedup_interval(cell, ars[ar_key(store, cell)])
        assert row.speedup == pytest.approx(centre, abs=1e-4)
        got = exported[row.cell_id]
        assert got["speedup_vs_ar"] == row.speedup and got["speedup_source"] == "store"
