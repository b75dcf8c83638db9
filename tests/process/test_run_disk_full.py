"""#18: the disk filling up mid-run ends `specbench run` in one line naming the in-flight cell (which stays `running`,
so the next run re-runs it; its reason reaches the store when the store still takes that write), finished cells are
kept, and `report` reads the store afterwards. A real full
filesystem: a small tmpfs in a user+mount namespace (skipped where the machine has none)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from proc_helpers import free_port
from run_helpers import ROOT, make_tokenizer, rows, standin_matrix

# slow: a whole `specbench run` or a process fault per test, seconds each: `make test-fast` leaves it out
pytestmark = pytest.mark.slow


def _namespaces() -> bool:
    return shutil.which("unshare") is not None and subprocess.run(["unshare", "-rm", "true"]).returncode == 0


def test_disk_full_mid_run_is_one_line_and_loses_no_finished_cell(tmp_path: Path) -> None:
    if not _namespaces():
        pytest.skip("no user+mount namespaces here to make a small filesystem")
    tok = make_tokenizer(tmp_path / "tok")
    m = standin_matrix(tmp_path / "m.toml", free_port(), tok, tp="[1]", specs=0, concurrency="[1, 2, 4]",
                       num_requests=4, itl_ms=25)
    # ~1.5 s per request: the next cell is still in flight when the disk fills (the fill takes milliseconds)
    m.write_text(m.read_text().replace("output_tokens = 16", "output_tokens = 60"))
    small = tmp_path / "small"
    small.mkdir()
    store = small / "r.sqlite"
    watch = textwrap.dedent(f"""
        import sqlite3, sys, time
        for _ in range(600):
            try:
                c = sqlite3.connect("file:{store}?mode=ro", uri=True, timeout=5)
                if c.execute("SELECT count(*) FROM cells WHERE status='done'").fetchone()[0] >= 1:
                    sys.exit(0)
            except sqlite3.Error:
                pass
            time.sleep(0.2)
        sys.exit(1)
    """)
    (tmp_path / "watch.py").write_text(watch)
    script = (f"mount -t tmpfs -o size=8m tmpfs {small} && "
              f"({sys.executable} -m specbench run {m} --store {store} --no-progress "
              f"> {tmp_path}/out.txt 2> {tmp_path}/err.txt; echo $? > {tmp_path}/rc.txt) & "
              f"{sys.executable} {tmp_path}/watch.py && dd if=/dev/zero of={small}/fill bs=64k 2>/dev/null; wait; "
              f"rm -f {small}/fill; cp {small}/r.sqlite* {tmp_path}/ && "
              f"{sys.executable} -m specbench report {store} --out {tmp_path}/rep > /dev/null 2> {tmp_path}/rep_err.txt; "
              f"echo $? > {tmp_path}/rep_rc.txt")
    r = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    err = (tmp_path / "err.txt").read_text()
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert (tmp_path / "rc.txt").read_text().strip() in ("1", "2")
    assert last.startswith("specbench: error:") and "could not be written" in last, err
    copy = tmp_path / "r.sqlite"
    done = rows(copy, "SELECT count(*) FROM cells WHERE status='done'")[0][0]
    assert done >= 1  # finished cells are kept
    stuck = rows(copy, "SELECT cell_id, status, reason FROM cells WHERE status NOT IN ('done', 'pending')")
    # the in-flight cell stays `running` (the next run re-runs it); its reason is in the store when the store still
    # took that small write, and always in the run's one line
    for cid, status, why in stuck:
        assert status == "running" and (cid in last or "could not be written" in (why or "")), (stuck, last)
    assert (tmp_path / "rep_rc.txt").read_text().strip() == "0", (tmp_path / "rep_err.txt").read_text()
