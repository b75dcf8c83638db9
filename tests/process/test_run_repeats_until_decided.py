"""Repeats until decided, repeats across boots and the A/A check (issue 34 item 2), end to end: `specbench run` as a
real subprocess against the instant server's ground-truth scheduler (testing/instant_truth.py: every step takes
--step-ms, draft position i accepted with --accept-rates[i]) into a real SQLite store.

- a large true difference (AR against 3.7 tokens per verify step) is decided at `min` repeats: no round runs;
- two identical configurations (AR and its A/A twin) get rounds while their decision is open, until `max`: each
  round's repeats are exactly the open cells of the decision replayed from the stored rows up to that round;
- every stored cell's metrics equal a recomputation from its stored rows (matrix/repeat_metrics.py), and the pooled
  throughput is the sum of output tokens over the sum of the repeats' measured seconds;
- `repeat_across_boots`: each repeat on its own boot, the servers interleaved A-B-A-B, visible in the store;
- SIGKILL mid-round and Ctrl-C mid-round, then resume: no finished repeat lost or run again, the round finished;
- the A/A twin is launched as the AR server is and never becomes the baseline of a speedup.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from proc_helpers import free_port
from run_helpers import ROOT, _matrix_head, cli, make_tokenizer, rows, wait
from specbench.load import speedup as speedups
from specbench.matrix.expansion import Cell
from specbench.matrix.repeat_metrics import cell_metrics_repeats
from specbench.matrix.rounds import decisions, question_rows
from specbench.matrix.store import Store
from specbench.matrix.visits import policy_of

# slow: a whole `specbench run` or a process fault per test, seconds each: `make test-fast` leaves it out
pytestmark = pytest.mark.slow

RATES = "0.95,0.95,0.95"  # tokens per verify step 1 + .95 + .95^2 + .95^3 = 3.71: AR is 3.7x slower per token


@pytest.fixture(scope="module")
def tok(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tokenizer(tmp_path_factory.mktemp("tok"))


def _matrix(path: Path, tok: Path, specs: str, client: str, step_ms: float = 10.0) -> Path:
    cmd = [sys.executable, "-m", "specbench.testing.instant_server", "--burst", "1", "--step-ms", str(step_ms)]
    path.write_text(_matrix_head(path.stem, cmd, free_port(), tok, ready_s=30, stop_s=5) + specs + f"""
[client]
prompt_tokens = 24
output_tokens = 16
warmup_requests = 1
{client}
""")
    return path


AR = """
[[server.spec]]
label = "ar"
"""
SPEC = f"""
[[server.spec]]
label = "spec"
algorithm = "draft_model"
flags = {{ "--accept-rates" = "{RATES}" }}
"""


def _run(m: Path, store: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    r = cli("run", str(m), "--store", str(store), "--no-progress", *extra, timeout=300)
    assert r.returncode == 0, r.stderr
    return r


def _repeats(store: Path) -> dict[str, list[tuple[int, int, int]]]:
    """{cell id: [(repeat, round, boot), ...]} in repeat order."""
    out: dict[str, list[tuple[int, int, int]]] = {}
    for cid, rep, rnd, boot in rows(store, "SELECT cell_id, repeat, round, boot FROM repeat_runs ORDER BY repeat"):
        out.setdefault(cid, []).append((rep, rnd, boot))
    return out


def _cell(row: dict[str, Any]) -> Cell:
    return Cell(cell_id=row["cell_id"], server_id=row["server_id"], phase=row["phase"], tp=row["tp"],
                algorithm=row["algorithm"], label=row["label"], server=row["server"], client=row["client"])


# ------------------------------------------------------------------ a large difference: decided at min


@pytest.fixture(scope="module")
def decided(tmp_path_factory: pytest.TempPathFactory, tok: Path) -> Path:
    d = tmp_path_factory.mktemp("decided")
    m = _matrix(d / "decided.toml", tok, AR + SPEC, """concurrency = 1
num_requests = 4
repeats = {min = 3, max = 6}
aa_check = true""")
    _run(m, d / "r.sqlite")
    return d / "r.sqlite"


def test_a_large_true_difference_stops_at_min_repeats(decided: Path) -> None:
    reps = _repeats(decided)
    assert len(reps) == 3  # ar, its twin, spec
    assert all([r for r, _, _ in v] == [0, 1, 2] and {rnd for _, rnd, _ in v} == {0} for v in reps.values())
    assert rows(decided, "SELECT value FROM meta WHERE key='repeat_rounds_done'") == []  # no round ran
    with Store(decided) as st:
        (group, d), = decisions(question_rows(st))
    assert d.headline.kind == "decided" and d.headline.best == "spec"
    assert d.open_idents() == ()
    clients = [json.loads(c) for (c,) in rows(decided, "SELECT client_json FROM cells")]
    assert all(c["repeats"] == 3 and c["repeats_max"] == 6 for c in clients)  # what decide.looks_of reads


def test_the_aa_twin_is_launched_as_ar_and_never_the_baseline(decided: Path) -> None:
    with Store(decided) as st:
        cells = {c["label"]: c for c in st.cells()}
        servers = {s["server_id"]: s for s in st.servers()}
    assert set(cells) == {"ar", "ar-aa", "spec"}
    ar, twin, spec = cells["ar"], cells["ar-aa"], cells["spec"]
    assert (ar["algorithm"], twin["algorithm"]) == ("ar", speedups.AA_ALGORITHM)
    assert twin["server"]["aa_of"] == ar["server_id"]
    assert servers[twin["server_id"]]["command"] == servers[ar["server_id"]]["command"]  # the same launch
    m_ar, m_twin, m_spec = ar["metrics"], twin["metrics"], spec["metrics"]
    assert m_twin["accept_length_mean"] is None and m_twin["accept_lengths"] == []  # measured as AR is
    assert m_ar["speedup"] is None
    # the baseline of every speedup is the AR cell, not its twin; the twin is compared with AR like any other
    assert m_spec["speedup"] == round(m_spec["output_throughput"] / m_ar["output_throughput"], speedups.DIGITS)
    assert m_twin["speedup"] == round(m_twin["output_throughput"] / m_ar["output_throughput"], speedups.DIGITS)


def test_dry_run_shows_the_repeat_policy_and_the_twin(tmp_path: Path, tok: Path) -> None:
    m = _matrix(tmp_path / "dry.toml", tok, AR + SPEC, """concurrency = 1
repeats = "auto"
repeat_across_boots = true
aa_check = true""")
    r = cli("run", "--dry-run", "--json", str(m))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [x["label"] for x in out] == ["ar", "ar-aa", "spec"]
    for x in out:
        assert x["repeat_policy"] == {"min": 2, "max": 8, "adaptive": True, "across_boots": True, "looks": 7,
                                      "level": pytest.approx(1 - 0.05 / 7)}
        assert (x["client"]["repeats"], x["client"]["repeats_max"], x["client"]["repeat_across_boots"]) == (2, 8, True)
    assert out[1]["aa_of"] == out[0]["server_id"] and out[1]["command"] == out[0]["command"]
    text = cli("run", "--dry-run", str(m))
    assert text.returncode == 0, text.stderr
    assert "repeats: 2 to 8 repeats until decided (99.29% intervals: 7 looks), each on a fresh boot" in text.stdout
    assert f"A/A check: the twin of {out[0]['server_id']}" in text.stdout
    # --repeats N keeps its meaning: a fixed count, no range
    fixed = json.loads(cli("run", "--dry-run", "--json", "--repeats", "3", str(m)).stdout)
    assert {(x["client"]["repeats"], x["client"].get("repeats_max")) for x in fixed} == {(3, None)}


# ------------------------------------------------------------------ identical configurations: rounds until max


@pytest.fixture(scope="module")
def identical(tmp_path_factory: pytest.TempPathFactory, tok: Path) -> tuple[Path, str]:
    d = tmp_path_factory.mktemp("identical")
    m = _matrix(d / "identical.toml", tok, AR, """concurrency = 2
num_requests = 4
repeats = {min = 2, max = 4}
aa_check = true""", step_ms=2.0)
    r = _run(m, d / "r.sqlite")
    return d / "r.sqlite", r.stderr


def _replay_open(store: Path, before_round: int) -> set[str]:
    """The cells the runner should give a repeat in round `before_round`: the open ones (and their best) of the
    decision replayed from the stored rows of the earlier rounds, below their max."""
    with Store(store) as st:
        qrows = question_rows(st)
        stored = {r["cell_id"]: st.stored_repeats(r["cell_id"]) for r in qrows}
    replayed = []
    for r in qrows:
        reps = [x for x in stored[r["cell_id"]] if x.record.round < before_round]
        replayed.append({**r, "metrics": cell_metrics_repeats(reps, _cell(r)), "n": len(reps)})
    by_id = {r["cell_id"]: r for r in replayed}
    out = set()
    for _, d in decisions(replayed):
        for ident in d.open_idents():
            p = policy_of(by_id[ident]["client"])
            if p.max is not None and by_id[ident]["n"] < p.max:
                out.add(ident)
    return out


def test_identical_configurations_get_rounds_while_open_until_max(identical: tuple[Path, str]) -> None:
    store, stderr = identical
    reps = _repeats(store)
    assert len(reps) == 2
    last = max(rnd for v in reps.values() for _, rnd, _ in v)
    for r in range(1, last + 2):  # each round's repeats are the open cells at that point; after the last, none is
        got = {cid for cid, v in reps.items() if any(rnd == r for _, rnd, _ in v)}
        assert got == _replay_open(store, r), r
    for v in reps.values():
        assert [rep for rep, _, _ in v] == list(range(len(v))) and 2 <= len(v) <= 4
        rounds = [rnd for _, rnd, _ in v]
        assert rounds[:2] == [0, 0] and rounds[2:] == list(range(1, len(v) - 1))  # one more repeat per round
        boots = [b for _, _, b in v]
        assert boots == [1, 1, *range(2, len(v))]  # the planned two on one boot, then each round on a fresh one
    if last:
        assert rows(store, "SELECT value FROM meta WHERE key='repeat_rounds_done'") == [(str(last),)]
        reasons = [x for (x,) in rows(store, "SELECT reason FROM repeat_runs WHERE round > 0")]
        assert all("throughput" in x for x in reasons)
        for r in range(1, last + 1):  # the run says which round it is and why each cell got a repeat
            assert f"round {r}: one more repeat for " in stderr
        assert "on throughput" in stderr


def test_metrics_equal_a_recomputation_from_the_stored_rows(identical: tuple[Path, str]) -> None:
    store, _ = identical
    derived = set(speedups.SPEEDUP_KEYS) | {f"{k}_ci95" for k in speedups.INTERVAL_METRICS} | {
        "output_throughput_cv", "baseline_running_cap", "cap_differs_from_baseline"}
    with Store(store) as st:
        cells = [c for c in st.cells() if c["status"] == "done"]
        assert len(cells) == 2
        for c in cells:
            reps = st.stored_repeats(c["cell_id"])
            again = cell_metrics_repeats(reps, _cell(c))
            stored = c["metrics"]
            assert {k: v for k, v in again.items() if k not in derived} == {
                k: stored[k] for k in again if k not in derived}
            assert stored["spread"]["repeats"] == len(reps) >= 2
            # by hand, from the rows alone: pooled throughput = sum of output tokens / sum of measured seconds
            reqs = st.requests(c["cell_id"])
            ok = [q for q in reqs if q.error is None]
            secs = sum(r.record.duration_s for r in reps)
            assert stored["output_throughput"] == pytest.approx(sum(q.output_tokens for q in ok) / secs, rel=1e-12)
            assert stored["completed"] == len(ok) == 4 * len(reps)
            peaks = []
            for r in reps:
                mine = [q for q in reqs if q.repeat == r.record.repeat]
                assert {q.boot for q in mine} == {r.record.boot}
                # each repeat's measured time from its rows: its start (started_at) to its last end
                assert max(q.ended_at for q in mine) - r.record.started_at == pytest.approx(r.record.duration_s,
                                                                                            abs=1e-5)
                for q in mine:
                    assert q.first_token_at == pytest.approx(q.sent_at + q.ttft_s, abs=1e-6)
                    assert q.ended_at == pytest.approx(q.sent_at + q.e2e_s, abs=1e-6)
                edges = sorted([(q.sent_at, 1) for q in mine] + [(q.ended_at, -1) for q in mine])
                now = peak = 0
                for _, step in edges:
                    now += step
                    peak = max(peak, now)
                peaks.append(peak)
            assert stored["peak_in_flight"] == max(peaks) == 2  # concurrency 2, from the send and end times


# ------------------------------------------------------------------ across boots


def test_repeats_across_boots_run_each_repeat_on_its_own_boot_interleaved(tmp_path: Path, tok: Path) -> None:
    m = _matrix(tmp_path / "boots.toml", tok, AR + SPEC, """concurrency = 1
num_requests = 3
repeats = 2
repeat_across_boots = true""")
    store = tmp_path / "r.sqlite"
    r = _run(m, store)
    assert "ran 2 cells (2 done" in r.stdout
    order = rows(store, "SELECT c.label, r.repeat, r.boot FROM repeat_runs r JOIN cells c USING (cell_id) "
                        "ORDER BY r.started_at")
    assert order == [("ar", 0, 1), ("spec", 0, 1), ("ar", 1, 2), ("spec", 1, 2)]  # A-B-A-B, a boot per repeat
    boots = rows(store, "SELECT s.settings_json, b.boot, b.started_at, b.log_path FROM boots b JOIN servers s "
                        "USING (server_id) ORDER BY b.started_at")
    assert [(json.loads(s)["label"], b) for s, b, _, _ in boots] == [("ar", 1), ("spec", 1), ("ar", 2), ("spec", 2)]
    assert all(Path(p).is_file() for _, _, _, p in boots) and len({p for *_, p in boots}) == 4
    assert rows(store, "SELECT DISTINCT r.repeat, r.boot FROM requests r ORDER BY 1") == [(0, 1), (1, 2)]
    for (cj, mj) in rows(store, "SELECT client_json, metrics_json FROM cells"):
        assert json.loads(cj)["repeat_across_boots"] is True
        assert json.loads(mj)["spread"]["repeats"] == 2


# ------------------------------------------------------------------ killed and interrupted mid-round, resumed


def test_sigkill_and_ctrl_c_mid_round_lose_no_repeat_and_rerun_none(tmp_path: Path, tok: Path) -> None:
    # AR (2 to 4 repeats until decided) against a speculative configuration measured once: that comparison has no
    # interval, so it stays open and AR gets a repeat every round until its max (rounds 1 and 2), each round one
    # boot that runs AR's two cells (c=1, then c=2) for over two seconds each: the signal must land while the second
    # one runs, after a poll of the store and a signal delivery on a loaded 2-core machine (at 20 ms steps, about a
    # second, the whole round once finished before the SIGINT arrived)
    m = _matrix(tmp_path / "kill.toml", tok, AR + SPEC, """concurrency = [1, 2]
num_requests = 8
repeats = {min = 2, max = 4}

[[override]]
when = { spec = "spec" }
client = { repeats = 1 }""", step_ms=40.0)
    store = tmp_path / "r.sqlite"

    def start() -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-m", "specbench", "run", str(m), "--store", str(store),
                                 "--no-progress"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def in_round(r: int) -> list[tuple[Any, ...]]:
        return rows(store, "SELECT cell_id FROM repeat_runs WHERE round = ?", r)

    def snapshot() -> dict[tuple[str, int], tuple[Any, ...]]:
        return {(c, rep): rest for c, rep, *rest in rows(
            store, "SELECT cell_id, repeat, round, boot, started_at, duration_s FROM repeat_runs")}

    proc = start()
    try:
        wait(lambda: len(in_round(1)) == 1, 240, "the first repeat of round 1")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert len(in_round(1)) == 1  # killed with round 1 half done
    plan = json.loads(rows(store, "SELECT value FROM meta WHERE key='repeat_round'")[0][0])
    assert plan["round"] == 1 and sorted(plan["targets"].values()) == [3, 3]
    killed = snapshot()

    proc = start()  # resumed: round 1 is finished first, then Ctrl-C once round 2 has its first repeat
    try:
        wait(lambda: len(in_round(2)) == 1, 240, "the first repeat of round 2")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert "round 1: one more repeat for 1 cell(s)" in err  # the rest of the killed round, nothing more
    interrupted = snapshot()
    assert {k: interrupted[k] for k in killed} == killed  # every repeat stored before the kill, as it was
    assert len(in_round(1)) == 2 and len(in_round(2)) == 1

    r = _run(m, store)
    final = snapshot()
    assert {k: final[k] for k in interrupted} == interrupted
    reps = _repeats(store)
    ar_cells = [cid for (cid,) in rows(store, "SELECT cell_id FROM cells WHERE label = 'ar'")]
    assert len(ar_cells) == 2
    for cid in ar_cells:  # two planned, then exactly one repeat in each of rounds 1 and 2: none lost, none twice
        assert [(rep, rnd) for rep, rnd, _ in reps[cid]] == [(0, 0), (1, 0), (2, 1), (3, 2)]
    for (cid,) in rows(store, "SELECT cell_id FROM cells WHERE label = 'spec'"):
        assert [(rep, rnd) for rep, rnd, _ in reps[cid]] == [(0, 0)]
    assert rows(store, "SELECT DISTINCT status FROM cells") == [("done",)]
    assert rows(store, "SELECT value FROM meta WHERE key='repeat_rounds_done'") == [("2",)]
    with Store(store) as st:  # the merged cells' metrics are those of their four repeats, from the stored rows
        for c in st.cells():
            if c["label"] == "ar":
                again = cell_metrics_repeats(st.stored_repeats(c["cell_id"]), _cell(c))
                assert again["spread"]["repeats"] == 4 and again["completed"] == 32
                assert {k: c["metrics"][k] for k in ("output_throughput", "spread", "tpot_ms_mean", "e2e_ms_p50",
                                                      "peak_in_flight", "repeat_rounds")} == {
                    k: again[k] for k in ("output_throughput", "spread", "tpot_ms_mean", "e2e_ms_p50",
                                          "peak_in_flight", "repeat_rounds")}
    assert "round 2: one more repeat for" in r.stderr and "measured once" in r.stderr


# ------------------------------------------------------------------ default request counts: at least 3 waves


def test_default_request_counts_give_at_least_three_waves() -> None:
    from specbench.matrix.expansion import expand
    from specbench.matrix.repeat_metrics import request_count
    from specbench.matrix.toml_load import parse_matrix

    spec = parse_matrix('engine = "openai"\ncommand = ["x"]\n[client]\nconcurrency = [1, 2, 3, 4, 16, 64, 256]\n')
    cells = expand(spec)[1]
    assert {c.client["concurrency"] for c in cells} == {1, 2, 3, 4, 16, 64, 256}
    for c in cells:
        assert request_count(c.client) / c.client["concurrency"] >= 3
    # a matrix that sets its count is left as it is (the report warns under 3 waves)
    spec = parse_matrix('engine = "openai"\ncommand = ["x"]\n[client]\nconcurrency = 16\nnum_requests = 16\n')
    assert [request_count(c.client) for c in expand(spec)[1]] == [16]


def test_repeat_settings_are_checked_with_their_key(tmp_path: Path) -> None:
    base = 'engine = "openai"\ncommand = ["x"]\n[client]\n'
    for bad, msg in (("repeats = {min = 1, max = 4}", "repeats.min must be >= 2"),
                     ("repeats = {min = 4, max = 3}", "repeats.max must be >= repeats.min (4)"),
                     ('repeats = "often"', 'repeats must be a whole number, {min = A, max = B} or "auto"'),
                     ("repeats = {min = 2, most = 4}", "repeats takes only `min` and `max`"),
                     ('aa_check = "yes"', "aa_check must be true or false"),
                     ("[[override]]\nclient = { repeat_across_boots = true }",
                      "`repeat_across_boots` is a setting of the whole matrix")):
        m = tmp_path / "m.toml"
        m.write_text(base + bad + "\n")
        r = cli("run", "--dry-run", str(m))
        assert r.returncode == 2 and msg in r.stderr and "Traceback" not in r.stderr, (bad, r.stderr)


WRAPPER = """
import os, runpy, sys
count = os.environ.get("BOOT_COUNT_FILE")
if count:  # this server boots FAIL_AFTER_BOOTS times, then exits at once
    n = int(open(count).read()) + 1 if os.path.exists(count) else 1
    open(count, "w").write(str(n))
    if n > int(os.environ["FAIL_AFTER_BOOTS"]):
        print(f"boot {n}: refusing to start", flush=True)
        sys.exit(3)
sys.argv = ["instant_server", *sys.argv[1:]]
runpy.run_module("specbench.testing.instant_server", run_name="__main__")
"""


def test_a_round_whose_server_does_not_boot_leaves_the_done_cell_as_it_was(tmp_path: Path, tok: Path) -> None:
    wrapper = tmp_path / "wrapper.py"
    wrapper.write_text(WRAPPER)
    counter = tmp_path / "ar-boots"
    m = tmp_path / "noboot.toml"
    cmd = [sys.executable, str(wrapper), "--burst", "1", "--step-ms", "5"]
    m.write_text(_matrix_head("noboot", cmd, free_port(), tok, ready_s=30, stop_s=5) + f"""
[[server.spec]]
label = "ar"
env = {{ BOOT_COUNT_FILE = "{counter}", FAIL_AFTER_BOOTS = "1" }}
{SPEC}
[client]
prompt_tokens = 24
output_tokens = 16
warmup_requests = 1
concurrency = 1
num_requests = 3
repeats = {{min = 2, max = 4}}

[[override]]
when = {{ spec = "spec" }}
client = {{ repeats = 1 }}
""")
    store = tmp_path / "r.sqlite"
    r = _run(m, store)  # AR is open against a cell measured once: round 1 asks AR's server for a second boot
    assert counter.read_text() == "2"
    (cid, status, metrics), = rows(store, "SELECT cell_id, status, metrics_json FROM cells WHERE label = 'ar'")
    assert status == "done" and json.loads(metrics)["spread"]["repeats"] == 2
    assert [(rep, rnd) for rep, rnd, _ in _repeats(store)[cid]] == [(0, 0), (1, 0)]
    assert "round 1: ar c=1 got no more repeat" in r.stderr and "it keeps its 2 repeats" in r.stderr
    assert rows(store, "SELECT value FROM meta WHERE key='repeat_rounds_done'") == [("1",)]  # no round after it
    with Store(store) as st:
        (c,) = [x for x in st.cells() if x["label"] == "ar"]
        again = cell_metrics_repeats(st.stored_repeats(cid), _cell(c))
    assert json.loads(metrics)["output_throughput"] == again["output_throughput"]


def test_a_cell_killed_between_its_repeats_goes_on_from_the_last_stored_one(tmp_path: Path, tok: Path) -> None:
    m = _matrix(tmp_path / "mid.toml", tok, AR, """concurrency = 1
num_requests = 6
repeats = 3""", step_ms=20.0)  # each repeat: 6 requests x 17 steps x 20 ms, about 2 s
    store = tmp_path / "r.sqlite"
    proc = subprocess.Popen([sys.executable, "-m", "specbench", "run", str(m), "--store", str(store),
                             "--no-progress"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait(lambda: rows(store, "SELECT 1 FROM repeat_runs"), 120, "the first stored repeat")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    before = rows(store, "SELECT cell_id, repeat, boot, started_at, duration_s FROM repeat_runs")
    assert [(rep, boot) for _, rep, boot, _, _ in before] == [(0, 1)]
    assert rows(store, "SELECT status FROM cells") == [("running",)]
    n_rows = rows(store, "SELECT count(*) FROM requests WHERE repeat = 0")
    assert n_rows == [(6,)]

    r = _run(m, store)
    assert "ran 1 cells (1 done" in r.stdout
    after = rows(store, "SELECT cell_id, repeat, boot, started_at, duration_s FROM repeat_runs ORDER BY repeat")
    assert after[0] == before[0]  # kept as it was, not run again
    assert [(rep, boot) for _, rep, boot, _, _ in after] == [(0, 1), (1, 2), (2, 2)]  # the rest on the next boot
    (status, attempts), = rows(store, "SELECT status, attempts FROM cells")
    assert (status, attempts) == ("done", 2)
    with Store(store) as st:
        (c,) = st.cells()
        again = cell_metrics_repeats(st.stored_repeats(c["cell_id"]), _cell(c))
    assert again["completed"] == c["metrics"]["completed"] == 18
    assert again["output_throughput"] == c["metrics"]["output_throughput"]
    assert again["spread"] == c["metrics"]["spread"]


def test_the_report_answers_shows_the_aa_check_and_the_timeline(decided: Path, tmp_path: Path) -> None:
    """The report of that store (issue 34 items 1, 2, 7): the answer names spec decided against every other, the
    A/A twin's comparison with AR is shown as a check whose pass or FAIL is its verdict, and the timeline figure is
    drawn from the rows' absolute times; the JSONL export carries those times."""
    from specbench.report.build import report_paths
    from specbench.report.export import request_records
    from specbench.stored.read import load_store

    w = report_paths([decided], tmp_path / "rep")
    (q,) = w.report.tables.questions
    assert q.decision.headline.text.startswith("spec (decided against every other)")
    twin = next(r for r in q.rows if r.aa_twin)
    verdict = twin.vs_ar["throughput"]
    md = w.markdown.read_text()
    assert "## A/A check" in md
    line = next(ln for ln in md.splitlines() if ln.startswith("| 1 |") and "| ar-aa |" in ln)
    assert (("| pass |" in line) == (verdict in ("tie", "undecided"))) and f"| {verdict} |" in line
    assert "timeline.png" in {p.name for p in w.pngs}
    recs = request_records([load_store(decided)])
    assert recs and all(r["sent_at"] <= r["first_token_at"] <= r["ended_at"] and r["boot"] == 1 for r in recs)
