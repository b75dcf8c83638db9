"""Measurements you can trust: `specbench run` as a real subprocess against the instant server's fault modes (HTTP
500s, malformed SSE, streams cut short without [DONE] or without the usage chunk, stalled streams). A cell with
failed requests beyond `max_failed_fraction` is `partial` (some) or `failed` (all), exit 1, with the error count in
the store, the run summary and the report; never `done`."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from paths import ROOT
from proc_helpers import free_port
from run_helpers import make_tokenizer

# slow: a whole `specbench run` or a process fault per test, seconds each: `make test-fast` leaves it out
pytestmark = pytest.mark.slow



@pytest.fixture(scope="module")
def tok(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tokenizer(tmp_path_factory.mktemp("tok"))


def _matrix(tmp: Path, tok: Path, server_flags: list[str], client_extra: str = "", request_s: float = 30) -> Path:
    cmd = [sys.executable, "-m", "specbench.testing.instant_server", "--burst", "1", *server_flags]
    p = tmp / "m.toml"
    p.write_text(f"""
name = "faults"
engine = "openai"
command = {json.dumps(cmd)}
port = {free_port()}
tokenizer = "{tok}"

[timeouts]
ready_s = 30
request_s = {request_s}
stop_s = 5
port_free_s = 10

[[server.spec]]
label = "ar"

[client]
concurrency = 1
prompt_tokens = 24
output_tokens = 16
num_requests = 6
warmup_requests = 1
{client_extra}
""")
    return p


def _run(tmp: Path, matrix: Path) -> tuple[subprocess.CompletedProcess[str], list[tuple[Any, ...]], list[str]]:
    store = tmp / "r.sqlite"
    r = subprocess.run([sys.executable, "-m", "specbench", "run", str(matrix), "--store", str(store), "--no-progress"],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    con = sqlite3.connect(store)
    try:
        cells = list(con.execute("SELECT status, reason, metrics_json FROM cells"))
        errors = [e for (e,) in con.execute("SELECT error FROM requests WHERE error IS NOT NULL")]
    finally:
        con.close()
    return r, cells, errors


# (server flags, client extra, expected status, text every request error carries)
# the server counts the warm-up request as its first: --*-every 2 hits measured requests 1, 3, 5 (3 of 6)
SCENARIOS = {
    "http_500": (["--fail-every", "2"], "", "partial", "HTTP 500"),
    "malformed_sse": (["--malformed-every", "2"], "", "partial", "malformed SSE event"),
    "cut_before_done": (["--truncate-every", "2"], "", "partial", "without [DONE]"),
    "no_usage_chunk": (["--no-usage"], "", "failed", "without the usage chunk"),
    "stalled_stream": (["--stall-every", "2"], "", "partial", "timed out after 2 s"),
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_fault_scenario_is_never_done(name: str, tmp_path: Path, tok: Path) -> None:
    flags, extra, status, text = SCENARIOS[name]
    r, cells, errors = _run(tmp_path, _matrix(tmp_path, tok, flags, extra, request_s=2))
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    assert [c[0] for c in cells] == [status]
    metrics = json.loads(cells[0][2])
    if status == "partial":
        assert (metrics["completed"], metrics["failed"]) == (3, 3)
        assert cells[0][1].startswith("3/6 requests failed")
        assert "1 partial, 0 failed" in r.stdout
    else:
        assert metrics["completed"] == 0 and cells[0][1].startswith("no request completed")
    if text is not None:
        assert len(errors) == metrics["failed"] and all(text in e for e in errors), errors


def test_max_failed_fraction_lets_a_cell_with_few_errors_be_done(tmp_path: Path, tok: Path) -> None:
    r, cells, errors = _run(tmp_path, _matrix(tmp_path, tok, ["--fail-every", "2"], "max_failed_fraction = 0.5"))
    assert r.returncode == 0, r.stderr
    assert [c[0] for c in cells] == ["done"] and len(errors) == 3


def test_healthy_server_is_done(tmp_path: Path, tok: Path) -> None:
    r, cells, errors = _run(tmp_path, _matrix(tmp_path, tok, []))
    assert r.returncode == 0, r.stderr
    assert [c[0] for c in cells] == ["done"] and errors == []


def test_partial_cells_rerun_with_retry_failed_and_show_in_the_report(tmp_path: Path, tok: Path) -> None:
    m = _matrix(tmp_path, tok, ["--fail-every", "2"])
    _run(tmp_path, m)
    again = subprocess.run([sys.executable, "-m", "specbench", "run", str(m), "--store", str(tmp_path / "r.sqlite"),
                            "--no-progress"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert "ran 0 cells" in again.stdout and again.returncode == 0  # kept, like failed, unless --retry-failed
    out = tmp_path / "rep"
    rep = subprocess.run([sys.executable, "-m", "specbench", "report", str(tmp_path / "r.sqlite"), "--out", str(out)],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert rep.returncode == 0, rep.stderr
    md = (out / "report.md").read_text()
    assert "partial" in md and "3/6 requests failed" in md
