"""`specbench doctor` on a 200 MB log with a failure in its middle: time, and whether the failure is named.

The log is made of real lines (the incident's working boot, its decode statistics repeated, and in the middle the
public ping-pong crash of tests/data/doctor_corpus/002). Runs against whichever `specbench` is first on PYTHONPATH
(old layout `specbench.logs.doctor`, new `specbench.doctor.doctor`), so one script measures both sides:

    PYTHONPATH=<old checkout>/src python benchmarks/doctor_long_log.py
    PYTHONPATH=src python benchmarks/doctor_long_log.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
SIZE = 200 << 20

try:
    from specbench.doctor.doctor import diagnose_file
except ImportError:  # the layout before the doctor/ package
    from specbench.logs.doctor import diagnose_file  # type: ignore[no-redef]


def main() -> int:
    working = (DATA / "incident" / "working.log").read_bytes()
    crash = (DATA / "doctor_corpus" / "002-sglang-mamba-ping-pong-assert.log").read_bytes()
    decode = b"".join(ln for ln in working.splitlines(keepends=True) if b"Decode batch" in ln)
    half = decode * (SIZE // 2 // len(decode))
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "long.log"
        log.write_bytes(working + half + crash + half)
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            d = diagnose_file(log, with_fixes=False)
            times.append(time.perf_counter() - t0)
        size = log.stat().st_size
    kind = d.failure.kind if d.failure else None
    print(f"{size / 2**20:.0f} MiB log: median {sorted(times)[1]:.2f} s (runs {', '.join(f'{t:.2f}' for t in times)});"
          f" status {d.status}, failure {kind}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
