"""Run a command with every core busy: one Python busy loop per core (as a loaded CI machine), then stop them.

    python tools/ci/busy.py -- pytest -q tests/process/test_matrix_lifecycle.py

The hogs run at normal priority (not niced), so the command competes for every core; they are stopped whatever
way the command ends, and the command's exit status is returned.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys


def _spin() -> None:
    while True:
        pass


def main(argv: list[str]) -> int:
    if "--" in argv:
        argv = argv[argv.index("--") + 1:]
    if not argv:
        print("usage: busy.py -- COMMAND ...", file=sys.stderr)
        return 2
    cores = len(os.sched_getaffinity(0))
    hogs = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(cores)]
    for h in hogs:
        h.start()
    print(f"busy.py: {cores} busy loop(s) running beside: {' '.join(argv)}", flush=True)
    try:
        return subprocess.call(argv)
    finally:
        for h in hogs:
            h.kill()
        for h in hogs:
            h.join(timeout=10)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
