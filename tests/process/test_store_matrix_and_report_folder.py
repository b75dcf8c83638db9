"""A store holds one matrix's results and a report folder always says which files are its own (issue 37 item 8):
`run` of another matrix into a store is refused naming both (or let in with --new-matrix) while the same matrix
resumes; a report killed mid-write leaves a folder the next report replaces; stored numbers no run writes are shown
as damaged. Real CLI runs against the instant server, real SQLite stores, real report folders."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from proc_helpers import free_port
from run_helpers import cli, instant_matrix, make_tokenizer

CLIENT = "concurrency = 1\nprompt_tokens = 16\noutput_tokens = 8\nnum_requests = 2\nwarmup_requests = 0"


def _meta(db: Path) -> dict[str, str]:
    con = sqlite3.connect(db)
    try:
        return dict(con.execute("SELECT key, value FROM meta").fetchall())
    finally:
        con.close()


def test_another_matrix_is_refused_the_same_resumes_and_new_matrix_lets_it_in(tmp_path: Path) -> None:
    tok = make_tokenizer(tmp_path / "tok")
    a = instant_matrix(tmp_path / "a.toml", free_port(), tok, CLIENT, name="a")
    b = instant_matrix(tmp_path / "b.toml", free_port(), tok, CLIENT, name="b")
    store = tmp_path / "s.db"
    first = cli("run", str(a), "--store", str(store), "--no-progress")
    assert first.returncode == 0, first.stderr

    other = cli("run", str(b), "--store", str(store), "--no-progress")
    assert other.returncode == 2 and len(other.stderr.strip().splitlines()) == 1, other.stderr
    assert str(a) in other.stderr and str(b) in other.stderr and "--new-matrix" in other.stderr
    assert _meta(store)["name"] == "a" and _meta(store)["matrix_text"] == a.read_text(encoding="utf-8")

    again = cli("run", str(a), "--store", str(store), "--no-progress")
    assert again.returncode == 0, again.stderr
    assert "2 kept from earlier runs" in again.stderr + again.stdout

    forced = cli("run", str(b), "--store", str(store), "--no-progress", "--new-matrix")
    assert forced.returncode == 0, forced.stderr
    assert _meta(store)["name"] == "b" and _meta(store)["matrix_text"] == b.read_text(encoding="utf-8")


def test_a_file_where_the_logs_go_is_one_line_before_anything_boots(tmp_path: Path) -> None:
    tok = make_tokenizer(tmp_path / "tok")
    a = instant_matrix(tmp_path / "a.toml", free_port(), tok, CLIENT, name="a")
    (tmp_path / "s-logs").write_text("mine\n", encoding="utf-8")
    r = cli("run", str(a), "--store", str(tmp_path / "s.db"), "--no-progress")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "s-logs: exists and is not a folder" in r.stderr
    assert (tmp_path / "s-logs").read_text(encoding="utf-8") == "mine\n"


KILL_AFTER_FIGURES = """
import os, signal, sys
import specbench.report.build as build
from specbench.cli import main
build._write_logs = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)  # killed once the figures are drawn
main(sys.argv[1:])
"""


def _synthetic(path: Path) -> Path:
    from specbench.testing.synthetic import write_store

    return write_store(path, tps=(1,), labels=("ar", "dflash"), concurrencies=(1, 2), failing_server=None,
                       failing_cell=None)


def _listed(out: Path) -> tuple[dict[str, object], set[str]]:
    manifest = json.loads((out / ".specbench-report.json").read_text(encoding="utf-8"))
    on_disk = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()} - {".specbench-report.json"}
    return manifest, on_disk


def test_a_report_killed_mid_write_leaves_a_folder_the_next_report_replaces(tmp_path: Path) -> None:
    store = _synthetic(tmp_path / "s.db")
    out = tmp_path / "r"
    killed = subprocess.run([sys.executable, "-c", KILL_AFTER_FIGURES, "report", str(store), "--out", str(out)],
                            capture_output=True, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    manifest, on_disk = _listed(out)
    assert manifest["complete"] is False and any(f.endswith(".png") for f in on_disk)
    assert on_disk <= set(manifest["files"])  # every file of the killed report is listed

    again = cli("report", str(store), "--out", str(out))
    assert again.returncode == 0, again.stderr
    manifest, on_disk = _listed(out)
    assert manifest["complete"] is True and on_disk == set(manifest["files"])


@pytest.mark.parametrize("cut", ["half", "empty"])
def test_a_manifest_cut_by_an_older_specbench_is_read_for_the_names_it_holds(tmp_path: Path, cut: str) -> None:
    store = _synthetic(tmp_path / "s.db")
    out = tmp_path / "r"
    assert cli("report", str(store), "--out", str(out)).returncode == 0
    (out / "logs").mkdir(exist_ok=True)
    (out / "logs" / "aaa-old.log").write_text("an earlier report's log\n", encoding="utf-8")
    whole = json.dumps({"written_by": "specbench report", "files": ["logs/aaa-old.log", "report.md", "zzz.png"]},
                       indent=1)
    (out / ".specbench-report.json").write_text(whole[: whole.index("report.md") + 11] if cut == "half" else "",
                                                encoding="utf-8")
    r = cli("report", str(store), "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert (out / "logs" / "aaa-old.log").exists() == (cut == "empty")  # listed before the cut: removed
    assert json.loads((out / ".specbench-report.json").read_text(encoding="utf-8"))["complete"] is True


def test_a_folder_without_a_manifest_is_still_refused(tmp_path: Path) -> None:
    store = _synthetic(tmp_path / "s.db")
    out = tmp_path / "r"
    out.mkdir()
    (out / "notes.md").write_text("mine\n", encoding="utf-8")
    r = cli("report", str(store), "--out", str(out))
    assert r.returncode == 2 and "not a specbench report folder" in r.stderr
    assert (out / "notes.md").read_text(encoding="utf-8") == "mine\n"


@pytest.mark.parametrize("edit,said", [("'$.completed', 0", "completed = 0"),
                                       ("'$.output_throughput', -120.5", "output_throughput = -120.5")])
def test_impossible_stored_numbers_are_shown_damaged_not_as_numbers(tmp_path: Path, edit: str, said: str) -> None:
    store = _synthetic(tmp_path / "s.db")
    con = sqlite3.connect(store)
    con.execute(f"UPDATE cells SET metrics_json = json_set(metrics_json, {edit}) WHERE cell_id = 'cell-tp1-dflash-c1'")
    con.commit()
    con.close()
    r = cli("export", str(store), "-f", "json")
    assert r.returncode == 0, r.stderr
    row = next(x for x in json.loads(r.stdout) if x["cell_id"] == "cell-tp1-dflash-c1")
    assert row["status"] == "damaged" and said in row["reason"]
    assert row["speedup_vs_ar"] is None and not any(k.startswith("metrics.") for k in row)
    sound = next(x for x in json.loads(r.stdout) if x["cell_id"] == "cell-tp1-dflash-c2")
    assert sound["status"] == "done" and sound["metrics.output_throughput"] > 0
    rep = cli("report", str(store), "--out", str(tmp_path / "r"))
    assert rep.returncode == 0, rep.stderr
    assert said in (tmp_path / "r" / "report.md").read_text(encoding="utf-8")
