"""`specbench compare A.db B.db` on real H200 stores (tests/data/h200-*, SGLang 0.5.15.post1) and copies of them
edited with sqlite3: a store against itself is never a regression; throughputs scaled by a known factor are found,
with the right sign and the interval computed here by hand; different models match nothing and say so; a release
that differs is the subject; a label reused with other flags is named; bad input is one line (real CLI runs)."""

from __future__ import annotations

import json
import math
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from paths import DATA, ROOT
from specbench.report.runs_compare import OUTCOMES, RunsComparison, compare_runs, to_json
from specbench.report.runs_render import MARKER
from specbench.stored.read import load_store

DENSE = DATA / "h200-dense8b-sglang-0.5.15.post1" / "h200-dense8b.db"  # 2 repeats per cell, 16 cells
MOE = DATA / "h200-moe-sglang-0.5.15.post1" / "h200-moe.db"  # 2 repeats per cell, 16 cells
SIM = DATA / "h200-simulated-sglang-0.5.15.post1" / "h200-sim.db"  # Qwen3.5-27B, 1 repeat, 6 failed cells
EAGLE3 = DATA / "h200-simulated-sglang-0.5.15.post1" / "h200-eagle3.db"  # Llama-3.1-8B, 1 repeat
# Student-t 97.5% quantile at 2 df (R: qt(0.975, 2); tests/unit/load/test_stats_estimators.py)
T975_DF2 = 4.30265272974946


def _copy(src: Path, tmp: Path, name: str) -> Path:
    """A copy of a store to edit (its WAL files are empty: the .db holds every write)."""
    dst = tmp / name
    shutil.copy(src, dst)
    return dst


def _sql(db: Path, sql: str, *params: Any) -> None:
    con = sqlite3.connect(db)
    try:
        con.execute(sql, params)
        con.commit()
    finally:
        con.close()


def _edit_metrics(db: Path, edit) -> None:
    """Rewrite every cell's metrics_json through `edit(metrics) -> metrics`."""
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT cell_id, metrics_json FROM cells WHERE metrics_json IS NOT NULL").fetchall()
        for cid, text in rows:
            m = json.loads(text)
            if m:
                con.execute("UPDATE cells SET metrics_json=? WHERE cell_id=?", (json.dumps(edit(m)), cid))
        con.commit()
    finally:
        con.close()


def _scale(key: str, factor: float):
    def edit(m: dict) -> dict:
        if isinstance(m.get(key), (int, float)):
            m[key] = m[key] * factor
        per = ((m.get("spread") or {}).get("metrics") or {}).get(key)
        if per and per.get("values"):
            per["values"] = [v * factor for v in per["values"]]
        return m
    return edit


def _compare(a: Path, b: Path, margin: float = 0.03) -> RunsComparison:
    return compare_runs(load_store(a), load_store(b), margin)


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "specbench", "compare", *map(str, args)], capture_output=True,
                          text=True, timeout=120, cwd=cwd, env={**os.environ, "COLUMNS": "200"})


# ---------------------------------------------------------------- a store against itself


@pytest.mark.parametrize("src", [DENSE, MOE], ids=["dense8b", "moe"])
def test_a_store_against_a_copy_of_itself_ties_or_is_undecided_never_a_regression(src: Path, tmp_path: Path) -> None:
    rc = _compare(src, _copy(src, tmp_path, "b.db"))
    assert rc.matching.subject == () and "A/A" in rc.matching.subject_text
    assert len(rc.results) == 16 and not rc.matching.unmatched
    assert {r.outcome for r in rc.results} <= {"tie", "undecided"}
    assert rc.count("tie") >= 1  # the quiet cells (CV of a few per mille at c = 1) decide the tie
    for r in rc.results:
        for d in r.deltas.values():
            assert d.comparison is not None and d.comparison.ratio == pytest.approx(1.0, abs=1e-12)
            assert d.comparison.ci is not None and d.comparison.ci[0] <= 1.0 <= d.comparison.ci[1]
    assert rc.exit_status == 0


def test_single_repeat_stores_are_undecided_and_cells_failed_on_both_sides_are_not_measured(tmp_path: Path) -> None:
    rc = _compare(SIM, _copy(SIM, tmp_path, "b.db"))
    outcomes = {r.pair.a.cell.cell_id: r.outcome for r in rc.results}
    failed = {c.cell_id for c in load_store(SIM).cells if c.status == "failed"}
    assert len(failed) == 6 and len(outcomes) == 16
    assert all(outcomes[c] == "unmeasured" for c in failed)
    assert all(o == "undecided" for c, o in outcomes.items() if c not in failed)  # one repeat: no interval
    assert any("measured once" in r.note for r in rc.results)
    assert rc.exit_status == 0


def test_the_speedups_over_ar_are_each_stores_pooled_throughput_over_its_ar_cell(tmp_path: Path) -> None:
    a = load_store(DENSE)
    ar = {c.concurrency: c.metric("output_throughput") for c in a.cells if c.is_ar}
    rc = _compare(DENSE, _copy(DENSE, tmp_path, "b.db"))
    checked = 0
    for r in rc.results:
        cell = r.pair.a.cell
        if cell.is_ar:
            assert r.speedup_a is None and r.speedup_b is None
            continue
        want = cell.metric("output_throughput") / ar[cell.concurrency]  # docs/contracts.md: pooled / AR's pooled
        assert r.speedup_a is not None and r.speedup_b is not None
        assert r.speedup_a.value == pytest.approx(want, abs=1e-4) and r.speedup_b.value == r.speedup_a.value
        assert r.speedup_a.ci95 is not None and r.speedup_a.ci95[0] < r.speedup_a.value < r.speedup_a.ci95[1]
        checked += 1
    assert checked == 12


# ---------------------------------------------------------------- a known change


def test_throughput_scaled_down_is_a_regression_with_the_interval_computed_by_hand(tmp_path: Path) -> None:
    b = _copy(DENSE, tmp_path, "slower.db")
    _edit_metrics(b, _scale("output_throughput", 0.8))
    rc = _compare(DENSE, b)
    assert len(rc.results) == 16
    for r in rc.results:
        d = r.deltas["throughput"]
        c = d.comparison
        assert c is not None and c.ratio == pytest.approx(0.8, rel=1e-9)  # B / A, the speed ratio
        # by hand: two repeats a side, the same relative spread (scaling keeps it): rel = |v1 - v2| / (2 mean),
        # se(log ratio) = sqrt(2) rel, Welch df = 2
        vs = r.pair.a.cell.spread["metrics"]["output_throughput"]["values"]
        rel = abs(vs[0] - vs[1]) / (vs[0] + vs[1])
        h = T975_DF2 * math.sqrt(2) * rel
        assert c.ci == pytest.approx((0.8 * math.exp(-h), 0.8 * math.exp(h)), rel=1e-6)
        assert r.outcome == ("regression" if 0.8 * math.exp(h) < 1 else "undecided")  # never an improvement
        assert r.deltas["tpot"].outcome in ("tie", "undecided")  # TPOT untouched: B vs A is 1
    assert rc.count("regression") >= 8 and rc.count("improvement") == 0
    assert rc.exit_status == 1
    r = _cli(DENSE, b)
    assert r.returncode == 1, r.stderr
    assert f"{rc.count('regression')} regressions" in r.stdout


def test_throughput_scaled_up_is_an_improvement_and_exits_0(tmp_path: Path) -> None:
    b = _copy(DENSE, tmp_path, "faster.db")
    _edit_metrics(b, _scale("output_throughput", 1.25))
    rc = _compare(DENSE, b)
    assert rc.count("improvement") >= 8 and rc.count("regression") == 0
    assert all(r.deltas["throughput"].comparison.ratio == pytest.approx(1.25) for r in rc.results)
    assert rc.exit_status == 0


def test_a_rate_workload_is_decided_on_tpot(tmp_path: Path) -> None:
    a, b = _copy(DENSE, tmp_path, "a.db"), _copy(DENSE, tmp_path, "b.db")
    for db in (a, b):  # the same request rate on both sides: the cells still match
        _sql(db, "UPDATE cells SET client_json=json_set(client_json, '$.request_rate', '4.0')")
    _edit_metrics(b, _scale("tpot_ms_mean", 1.25))  # every token 25% slower in B; throughput unchanged
    rc = _compare(a, b)
    assert len(rc.results) == 16 and all(r.lead == "tpot" for r in rc.results)
    assert rc.count("regression") >= 8 and rc.count("improvement") == 0
    for r in rc.results:
        assert r.deltas["tpot"].comparison.ratio == pytest.approx(0.8)  # speed ratio: A / B of a latency
        assert r.outcome == r.deltas["tpot"].outcome


def test_a_cell_that_ran_in_a_and_failed_in_b_fails_the_gate(tmp_path: Path) -> None:
    b = _copy(DENSE, tmp_path, "b.db")
    _sql(b, "UPDATE cells SET status='failed', reason='server exited (code -9)' WHERE label='ar' AND "
            "json_extract(client_json, '$.concurrency') = 32")
    rc = _compare(DENSE, b)
    failed = [r for r in rc.results if r.outcome == "failed"]
    assert len(failed) == 1 and "B: failed (server exited (code -9))" in failed[0].note
    assert rc.count("regression") == 0 and rc.exit_status == 1
    assert "1 failed in B (ran in A)" in rc.summary


# ---------------------------------------------------------------- what matches


@pytest.mark.parametrize("a,b", [(SIM, EAGLE3), (DENSE, MOE)], ids=["sim-vs-eagle3", "dense-vs-moe"])
def test_different_models_match_no_pair_and_say_so(a: Path, b: Path) -> None:
    rc = _compare(a, b)
    assert rc.results == ()
    assert [c.knob.text for c in rc.matching.apart] == ["model"]
    assert rc.summary.startswith("B vs A: no pair of cells matches (A ran model ")
    na, nb = len(load_store(a).cells), len(load_store(b).cells)
    assert sum(u.store == "A" for u in rc.matching.unmatched) == na
    assert sum(u.store == "B" for u in rc.matching.unmatched) == nb
    ar = [u for u in rc.matching.unmatched if u.side.label == "ar"]
    assert ar and all(u.why == "model" for u in ar)
    assert rc.exit_status == 0


def test_the_cli_says_no_pair_matches_for_two_different_models() -> None:
    r = _cli(SIM, EAGLE3)
    assert r.returncode == 0, r.stderr
    assert "no pair of cells matches" in r.stdout and "/tmp/models/llama31_8b" in r.stdout
    assert "label 'mtp-sim1.5' is not in B" in r.stdout


def test_another_release_is_the_subject_and_every_cell_still_matches(tmp_path: Path) -> None:
    a = _copy(DENSE, tmp_path, "old.db")
    _sql(a, "UPDATE meta SET value='0.5.12.post1' WHERE key='engine_version'")
    rc = _compare(a, DENSE)
    assert rc.matching.subject_text == "B differs from A in: engine_version 0.5.12.post1 -> 0.5.15.post1"
    assert len(rc.results) == 16 and not rc.matching.unmatched and rc.matching.relabelled == ()


def _set_steps(db: Path, where: str, steps: int) -> None:
    _sql(db, f"UPDATE servers SET settings_json=json_set(settings_json, '$.num_steps', {steps}), "
             f"command_json=replace(command_json, '\"--speculative-num-steps\", \"3\"', "
             f"'\"--speculative-num-steps\", \"{steps}\"') WHERE {where}")


def test_a_label_reused_with_other_flags_is_named_and_not_compared(tmp_path: Path) -> None:
    b = _copy(DENSE, tmp_path, "b.db")
    _set_steps(b, "json_extract(settings_json, '$.label') = 'eagle3-sim2.5'", 5)
    for a in (DENSE, _copy(DENSE, tmp_path, "old.db")):
        if a != DENSE:  # the same inside a comparison of two releases: the release is the subject, the label apart
            _sql(a, "UPDATE meta SET value='0.5.12.post1' WHERE key='engine_version'")
        rc = _compare(a, b)
        assert [lc.text for lc in rc.matching.relabelled] == [
            "label 'eagle3-sim2.5' runs other flags in B: --speculative-num-steps 3 -> 5"]
        assert [c.text for c in rc.matching.subject] == ([] if a == DENSE else
                                                         ["engine_version 0.5.12.post1 -> 0.5.15.post1"])
        lone = rc.matching.unmatched
        assert len(lone) == 8 and {u.why for u in lone} == {"flags"} and {u.side.label for u in lone} == {
            "eagle3-sim2.5"}
        assert len(rc.results) == 12 and "eagle3-sim2.5" not in {r.pair.a.label for r in rc.results}


def test_a_setting_edited_alone_names_the_setting(tmp_path: Path) -> None:
    b = _copy(DENSE, tmp_path, "b.db")
    _sql(b, "UPDATE servers SET settings_json=json_set(settings_json, '$.mem_fraction_static', 0.8) "
            "WHERE json_extract(settings_json, '$.label') = 'eagle3-sim3.5'")
    rc = _compare(DENSE, b)
    assert [lc.text for lc in rc.matching.relabelled] == [
        "label 'eagle3-sim3.5' runs other flags in B: mem_fraction_static 0.85 -> 0.8"]


def test_a_flag_every_speculative_server_changed_is_the_subject(tmp_path: Path) -> None:
    b = _copy(DENSE, tmp_path, "b.db")
    _set_steps(b, "json_extract(settings_json, '$.algorithm') = 'EAGLE3'", 5)
    rc = _compare(DENSE, b)
    assert rc.matching.subject_text == "B differs from A in: --speculative-num-steps 3 -> 5"
    assert {c.knob.name for c in rc.matching.subject} == {"num_steps", "--speculative-num-steps"}
    assert len(rc.results) == 16 and not rc.matching.unmatched


def test_ports_log_flags_and_the_stores_own_ids_never_split_a_pair(tmp_path: Path) -> None:
    b = _copy(DENSE, tmp_path, "b.db")
    _sql(b, "UPDATE servers SET command_json=replace(replace(command_json, '\"30000\"', '\"31234\"'), "
            "'\"--host\", \"127.0.0.1\"', '\"--host\", \"0.0.0.0\", \"--log-level\", \"debug\", \"--log-requests\"'), "
            "log_path='/elsewhere/x.log'")
    for table in ("servers", "cells"):
        _sql(b, f"UPDATE {table} SET server_id = 'renamed-' || server_id")
    _sql(b, "UPDATE cells SET cell_id = 'renamed-' || cell_id")
    _sql(b, "UPDATE requests SET cell_id = 'renamed-' || cell_id")
    assert "31234" in sqlite3.connect(b).execute("SELECT command_json FROM servers").fetchone()[0]
    rc = _compare(DENSE, b)
    assert rc.matching.subject == () and len(rc.results) == 16 and not rc.matching.unmatched
    assert {r.outcome for r in rc.results} <= {"tie", "undecided"}


def test_another_workload_is_no_counterpart_at_that_workload(tmp_path: Path) -> None:
    b = _copy(DENSE, tmp_path, "b.db")
    _sql(b, "DELETE FROM cells WHERE json_extract(client_json, '$.concurrency') = 32")
    rc = _compare(DENSE, b)
    lone = rc.matching.unmatched
    assert len(rc.results) == 12 and len(lone) == 4 and {u.store for u in lone} == {"A"}
    assert all(u.why == "workload" and "no counterpart at this workload in B (TP 1, c=32" in u.text for u in lone)


# ---------------------------------------------------------------- outputs


def _doc_keys(heading: str) -> set[str]:
    """The `key` column of the table after `heading` in docs/contracts.md."""
    lines = (ROOT / "docs" / "contracts.md").read_text(encoding="utf-8").splitlines()
    keys: set[str] = set()
    for line in lines[lines.index(heading) + 1:]:
        if line.startswith("| `"):
            keys.update(k.strip("` ") for k in line.split("|")[1].split(","))
        elif keys and not line.startswith("|"):
            break
    assert keys, heading
    return keys


def test_the_json_keys_are_the_documented_ones(tmp_path: Path) -> None:
    b = _copy(DENSE, tmp_path, "b.db")
    _set_steps(b, "json_extract(settings_json, '$.label') = 'eagle3-sim2.5'", 5)
    r = _cli(DENSE, b, "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert set(d) == _doc_keys("### `compare --json`")
    assert set(d["pairs"][0]) == _doc_keys("### A pair")
    assert set(d["pairs"][0]["throughput"]) == _doc_keys("### A metric of a pair")
    assert set(d["unmatched"][0]) == _doc_keys("### An unmatched cell")
    assert set(d["unmatched"][0]["changes"][0]) == _doc_keys("### A change")
    assert set(d["a"]) == _doc_keys("### A store")
    assert set(d["counts"]) == set(OUTCOMES)
    assert d == json.loads(json.dumps(to_json(_compare(DENSE, b))))  # the CLI prints to_json as it is


def test_out_writes_markdown_and_overwrites_only_its_own(tmp_path: Path) -> None:
    b = _copy(DENSE, tmp_path, "b.db")
    _edit_metrics(b, _scale("output_throughput", 0.8))
    out = tmp_path / "compare.md"
    r = _cli(DENSE, b, "--out", out)
    assert r.returncode == 1, r.stderr
    text = out.read_text(encoding="utf-8")
    assert text.splitlines()[0] == MARKER
    assert "| eagle3-sim2.5 | 1 | 16 |" in text and "regression" in text and "## Matched pairs" in text
    assert _cli(DENSE, b, "--out", out, "--margin", "0.05").returncode == 1  # its own file: replaced
    assert "within 5% of 1" in out.read_text(encoding="utf-8")

    mine = tmp_path / "notes.md"
    mine.write_text("my notes\n", encoding="utf-8")
    before_b = b.read_bytes()
    for target, needle in ((mine, "was not written by specbench compare"), (b, "is results store")):
        r = _cli(DENSE, b, "--out", target)
        assert r.returncode == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert mine.read_text(encoding="utf-8") == "my notes\n" and b.read_bytes() == before_b
    link = tmp_path / "link.md"
    link.symlink_to(out)
    r = _cli(DENSE, b, "--out", link)
    assert r.returncode == 2 and "symbolic link" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == []  # no temporary file left


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not a store\n", encoding="utf-8")
    same = tmp_path / "same.db"
    same.symlink_to(DENSE)
    cases = [((tmp_path / "missing.db", DENSE), "no such results store"),
             ((DENSE, text), "not an SQLite results store"),
             ((DENSE, DENSE), "are the same store"),
             ((DENSE, same), "are the same store"),
             ((DENSE, MOE, "--margin", "0"), "--margin 0.0"),
             ((DENSE, MOE, "--margin", "nan"), "--margin nan"),
             ((DENSE, MOE, "--out", tmp_path / "no" / "such" / "x.md"), "does not exist")]
    for args, needle in cases:
        r = _cli(*args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, (
            args, r.stderr)


def test_every_outcome_is_counted_once() -> None:
    rc = _compare(DENSE, DENSE)  # the same file read twice through the API (the CLI refuses the same path)
    assert sum(rc.count(o) for o in OUTCOMES) == len(rc.results) == 16


def test_a_vllm_command_is_read_without_its_model_port_and_log_flags() -> None:
    from specbench.engines.base import server_adapter
    from specbench.report.runs_side import Knob, command_knobs

    argv = ["vllm", "serve", "Qwen/Qwen3-8B", "--port", "8000", "--max-model-len=4096", "--enforce-eager",
            "--uvicorn-log-level", "warning", "--speculative-config", '{"method":"ngram"}']
    got = command_knobs(argv, server_adapter("vllm", None).neutral_flags, "Qwen/Qwen3-8B")
    assert got == {Knob("command", "command"): "vllm serve", Knob("flag", "--max-model-len"): "4096",
                   Knob("flag", "--enforce-eager"): "", Knob("flag", "--speculative-config"): '{"method":"ngram"}'}
