"""Draw a report's figures on two cores: half of the jobs in a forked child, half here, results in job order.

Matplotlib draws on one core (the GIL), and the figures of a report are independent: on a machine with two or more
CPUs the child takes every other job and sends back what each returned (pickled through a pipe). The stores were
loaded and frozen out of the collector before (build.py::_gc_spared), so the child shares their memory pages
instead of copying them. Serial where forking is not safe or useful: one job, one CPU, no `os.fork`, or another
thread alive (a forked child keeps only the calling thread; locks held by the others would never be released).

Faults: an OSError in the child (disk full, a read-only folder) is raised here as the same OSError, so the report's
one-line error names it, and a UserError as the same UserError; any other exception in the child is raised here with its type and message; an exception
or Ctrl-C here ends the child (SIGTERM) and reaps it before it propagates.
"""

from __future__ import annotations

import os
import pickle
import signal
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from specbench.errors import UserError

T = TypeVar("T")


class ChildFailed(RuntimeError):
    """A figure job failed in the forked child (its exception's type and message)."""


def run_jobs(jobs: Sequence[Callable[[], T]]) -> list[T]:
    """Every job's result, in order; two cores when it is safe (module docstring)."""
    if len(jobs) < 2 or not hasattr(os, "fork") or _usable_cpus() < 2 or threading.active_count() > 1:
        return [job() for job in jobs]
    theirs = list(range(1, len(jobs), 2))
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its jobs, then its results down the pipe, then out without the parent's exit handlers
        os.close(read_fd)
        _child(jobs, theirs, write_fd)
    os.close(write_fd)
    try:
        mine = {i: jobs[i]() for i in range(0, len(jobs), 2)}
        with os.fdopen(read_fd, "rb") as pipe:
            payload = pipe.read()
    except BaseException:
        _end(pid)
        raise
    _, status = os.waitpid(pid, 0)
    return _merge(jobs, mine, theirs, payload, status)


def _usable_cpus() -> int:
    """The CPUs this process may run on (a taskset or container limit), not the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _child(jobs: Sequence[Callable[[], Any]], theirs: list[int], write_fd: int) -> None:
    code = 0
    try:
        out: tuple[Any, ...] = ("ok", [jobs[i]() for i in theirs])
    except OSError as exc:
        out, code = ("oserror", exc.errno, exc.strerror or str(exc), exc.filename), 1
    except UserError as exc:  # a user's mistake stays the one line it is in this process
        out, code = ("usererror", str(exc)), 1
    except BaseException as exc:  # noqa: BLE001  (sent to the parent, which raises it)
        out, code = ("error", type(exc).__name__, str(exc)), 1
    try:
        with os.fdopen(write_fd, "wb") as pipe:
            pipe.write(pickle.dumps(out))
    finally:
        os._exit(code)


def _end(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)


def _merge(jobs: Sequence[Callable[[], T]], mine: dict[int, T], theirs: list[int], payload: bytes,
           status: int) -> list[T]:
    try:
        out = pickle.loads(payload) if payload else None
    except (pickle.UnpicklingError, EOFError, ValueError):
        out = None
    if not isinstance(out, tuple) or not out:
        raise ChildFailed(f"the figure process ended without its results (wait status {status})")
    if out[0] == "oserror":
        raise OSError(out[1], out[2], out[3])
    if out[0] == "usererror":
        raise UserError(out[1])
    if out[0] == "error":
        raise ChildFailed(f"{out[1]}: {out[2]}")
    results: dict[int, T] = {**mine, **dict(zip(theirs, out[1]))}
    return [results[i] for i in range(len(jobs))]
