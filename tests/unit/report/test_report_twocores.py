"""report/twocores.py: figure jobs split between this process and a forked child, results in job order, the child's
faults raised here (an OSError as the same OSError, so `specbench report` still says one line)."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import pytest

from specbench.report import twocores

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or twocores._usable_cpus() < 2, reason="needs fork and 2 CPUs")


def _pid_job(i: int):
    return lambda: (i, os.getpid())


def test_results_come_back_in_order_and_half_ran_in_a_child():
    if threading.active_count() > 1:
        pytest.skip("another thread is alive here: run_jobs stays serial by design")
    got = twocores.run_jobs([_pid_job(i) for i in range(7)])
    assert [i for i, _ in got] == list(range(7))
    pids = {i: pid for i, pid in got}
    assert all(pids[i] == os.getpid() for i in range(0, 7, 2))
    assert all(pids[i] != os.getpid() for i in range(1, 7, 2))  # every other job drew in the forked child


def test_a_file_the_child_writes_is_there_when_the_results_are(tmp_path: Path):
    def write(name: str):
        def job():
            (tmp_path / name).write_text(name)
            return name
        return job
    got = twocores.run_jobs([write("a"), write("b"), write("c")])
    assert got == ["a", "b", "c"] and sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "c"]


def test_an_oserror_in_the_child_is_the_same_oserror_here(tmp_path: Path):
    def full():
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "x.png"))
    with pytest.raises(OSError) as info:
        twocores.run_jobs([lambda: 1, full])
    assert info.value.errno == errno.ENOSPC and info.value.strerror == "No space left on device"


def test_a_user_error_in_the_child_is_the_same_user_error_here():
    from specbench.errors import UserError

    def mistake():
        raise UserError("store.db: not a results store")
    with pytest.raises(UserError, match="not a results store"):
        twocores.run_jobs([lambda: 1, mistake])


def test_another_exception_in_the_child_names_its_type():
    def bad():
        raise ValueError("no data for this figure")
    if threading.active_count() > 1:
        with pytest.raises(ValueError):
            twocores.run_jobs([lambda: 1, bad])
        return
    with pytest.raises(twocores.ChildFailed, match="ValueError: no data for this figure"):
        twocores.run_jobs([lambda: 1, bad])


def test_an_exception_here_ends_and_reaps_the_child(tmp_path: Path):
    marker = tmp_path / "child-finished"

    def slow_child():
        import time
        time.sleep(30)
        marker.write_text("should not happen")
    def boom():
        raise RuntimeError("parent side failed")
    with pytest.raises(RuntimeError, match="parent side failed"):
        twocores.run_jobs([boom, slow_child])
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)  # no child left behind (reaped)
    assert not marker.exists()
