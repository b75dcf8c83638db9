"""Reaping servers left behind by a killed run (matrix/orphans.py): only the group specbench started is stopped,
never a foreign process named by a crafted or stale store record (#18: pid, start time and command line)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from specbench.matrix.identity import MARK_ENV, new_mark
from specbench.matrix.orphans import active_record, reap_one

# busy: `make test` runs it once, in its busy pass (every core busy: tools/ci/busy.py), not in the main pass
pytestmark = pytest.mark.busy


def _group(*words: str, mark: str | None = None) -> subprocess.Popen[bytes]:
    env = {**os.environ, MARK_ENV: mark} if mark else None  # a runner's server carries its mark (identity.py)
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", *words], start_new_session=True,
                            env=env)


def test_the_recorded_server_group_is_stopped() -> None:
    p = _group("--port", "1234", mark=new_mark())
    try:
        time.sleep(0.2)
        rec = active_record(p.pid, [sys.executable, "-c", "import time; time.sleep(60)", "--port", "1234"], "srv-x")
        assert reap_one(json.dumps(rec), grace_s=5) is not None
        assert p.wait(timeout=10) is not None
    finally:
        if p.poll() is None:
            p.kill()


def test_a_record_naming_a_foreign_process_stops_nothing() -> None:
    p = _group("--foreign")
    try:
        time.sleep(0.2)
        # the right pid and start time, as anyone can read them from /proc, but another command line
        rec = active_record(p.pid, ["python3", "-m", "sglang.launch_server", "--port", "30000"], "srv-y")
        assert reap_one(json.dumps(rec), grace_s=1) is None
        time.sleep(0.3)
        assert p.poll() is None  # still running
    finally:
        p.kill()
        p.wait(timeout=10)
