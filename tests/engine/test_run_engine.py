"""`specbench run` against the real local engine (vLLM's CPU build on the tiny models): a launch with a 5 s readiness
limit times out cleanly and leaves no engine process behind.

(The SIGKILL-and-resume and killed-engine checks and their two boots moved into the one workload run of
test_run_engine_workload.py, with the clamped prompts counted as vLLM counts them and self-draft's accept length.)
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from engine_boot import engine_venv_or_skip
from paths import ROOT
from proc_helpers import free_port
from specbench.engines.vllm.launch import models_dir

pytestmark = pytest.mark.engine


def _rows(store: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    if not store.exists():
        return []
    conn = sqlite3.connect(store, timeout=30)
    try:
        return list(conn.execute(sql, params))
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()


def test_engine_that_is_not_ready_in_time_times_out_and_leaves_nothing(tmp_path: Path) -> None:
    engine_venv_or_skip()  # skips locally without the engine; fails under CI, where make test installs it
    if not (models_dir() / "tiny-target" / "config.json").is_file():
        pytest.skip("tiny models not built: run `make models`")
    port = free_port()
    matrix = tmp_path / "m.toml"
    matrix.write_text(f"""
engine = "local"
model = "tiny-target"
port = {port}
[timeouts]
ready_s = 5            # vLLM CPU needs 20-40 s to boot (28 s to /health idle, 2 cores, one process)
stop_s = 5
[client]
concurrency = 1
""")
    store = tmp_path / "r.sqlite"
    r = subprocess.run([sys.executable, "-m", "specbench", "run", str(matrix), "--store", str(store),
                        "--no-progress"], cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    (status, reason, log_text), = _rows(store, "SELECT status, reason, log_text FROM cells")
    assert status == "failed" and "not ready after 5 s" in reason
    assert log_text == Path(_rows(store, "SELECT log_path FROM servers")[0][0]).read_text()  # all of it
    needle = f"--port\0{port}".encode()
    left = [p for p in Path("/proc").iterdir() if p.name.isdigit() and needle in _cmdline(p)]
    assert left == []


def _cmdline(p: Path) -> bytes:
    try:
        return p.joinpath("cmdline").read_bytes()
    except OSError:
        return b""
