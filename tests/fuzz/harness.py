"""Run one generated input through the real CLI (`specbench.cli.main(argv)`) in a forked child with a memory cap
(RLIMIT_AS) and a timeout, and classify what happened.

Classes: `error` (exit 2, one stderr line `specbench: error: ...`, no traceback), `correct` (exit 0 and the
category's oracle agrees), `traceback` (anything else that ended: a traceback, another exit status, several stderr
lines), `hang` (killed at the timeout), `wrong` (exit 0 but the oracle says the answer is wrong: NaN in the JSON,
an invalid input planned "ok", a cut-off log reported as "started").

The child is a fork of this process, so `specbench` is imported once; each example costs a fork and the command.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

CLASSES = ("error", "correct", "traceback", "hang", "wrong")
MEM_CAP = 3 << 30  # address space the child may add to what it inherited
TIMEOUT_S = 20.0


@dataclass(frozen=True)
class Result:
    rc: int | None
    stdout: str
    stderr: str
    seconds: float


@dataclass(frozen=True)
class Case:
    """One input: the argv, a short description, whether it must be refused, and an oracle for exit 0 (a reason
    when the output is wrong, else None)."""
    category: str
    argv: list[str]
    what: str
    must_fail: bool = False
    oracle: Callable[[Result], str | None] | None = None
    cwd: str | None = None
    extra: dict[str, object] = field(default_factory=dict)


def _vm_size() -> int:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def run_cli(argv: list[str], timeout_s: float = TIMEOUT_S, mem_cap: int = MEM_CAP, cwd: str | None = None) -> Result:
    """`specbench.cli.main(argv)` in a forked child: stdout/stderr captured, RLIMIT_AS = inherited + mem_cap."""
    from specbench.cli import main

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            code = 97
            try:
                os.setpgid(0, 0)
                limit = _vm_size() + mem_cap
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
                os.dup2(out.fileno(), 1)
                os.dup2(err.fileno(), 2)
                if cwd:
                    os.chdir(cwd)
                import sys
                sys.stdin = open(os.devnull)  # noqa: SIM115
                # under pytest sys.stdout/stderr are capture objects, not fds 1 and 2: point them at the files
                sys.stdout = open(1, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
                sys.stderr = open(2, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
                try:
                    main(list(argv))
                    code = 0
                except SystemExit as exc:
                    code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                except BaseException:  # noqa: BLE001 - classified by the parent
                    import traceback
                    traceback.print_exc()
                    code = 98
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
        deadline = t0 + timeout_s
        rc: int | None = None
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                rc = os.waitstatus_to_exitcode(status)
                break
            if time.monotonic() > deadline:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                os.waitpid(pid, 0)
                break
            time.sleep(0.005)
        secs = time.monotonic() - t0
        out.seek(0)
        err.seek(0)
        return Result(rc, out.read(200_000).decode("utf-8", "replace"), err.read(200_000).decode("utf-8", "replace"),
                      secs)


def classify(case: Case, res: Result) -> tuple[str, str]:
    """(class, reason)."""
    if res.rc is None:
        return "hang", f"no exit within {res.seconds:.0f} s"
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    if "Traceback" in res.stderr or res.rc not in (0, 2):
        tail = lines[-1] if lines else ""
        return "traceback", f"rc={res.rc}: {tail[:200]}"
    if res.rc == 2:
        if len(lines) == 1 and lines[0].startswith("specbench: error: "):
            return "error", lines[0][:200]
        if lines and lines[-1].startswith(("Usage:", "Try ")) or any("Error" in ln for ln in lines):
            return "error", (lines[-1] if lines else "")[:200]  # typer's own usage error
        return "traceback", f"rc=2 with {len(lines)} stderr lines: {(lines[0] if lines else '')[:160]}"
    if "NaN" in res.stdout or "Infinity" in res.stdout:
        return "wrong", "NaN/Infinity in the output"
    if case.must_fail:
        return "wrong", f"accepted: {case.what}"
    if case.oracle is not None:
        why = case.oracle(res)
        if why:
            return "wrong", why
    return "correct", ""


def run_case(case: Case) -> tuple[str, str, Result]:
    # a case may allow more time (a report draws ten figures: tens of seconds on a loaded 2-core machine)
    res = run_cli(case.argv, cwd=case.cwd, timeout_s=float(case.extra.get("timeout_s", TIMEOUT_S)))  # type: ignore[arg-type]
    cls, why = classify(case, res)
    return cls, why, res


@contextlib.contextmanager
def environment(env: Mapping[str, str | None]) -> Iterator[None]:
    """os.environ with `env` applied (None: unset) while the block runs: a forked case inherits it."""
    old = {k: os.environ.get(k) for k in env}
    try:
        _apply(env)
        yield
    finally:
        _apply(old)


def _apply(env: Mapping[str, str | None]) -> None:
    for k, v in env.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def run_all(cases: Iterable[Case], runner: Callable[[Case], tuple[str, str, Result]] | None = None
            ) -> tuple[Counter[str], list[str]]:
    """Every case through `runner` (run_case): the tally per class and one line per case that is neither a one-line
    error nor correct."""
    tally: Counter[str] = Counter()
    bad: list[str] = []
    for case in cases:
        cls, why, _ = (runner or run_case)(case)
        tally[cls] += 1
        if cls not in ("error", "correct"):
            bad.append(f"[{case.category}] {case.what}: {cls}: {why}")
    return tally, bad
