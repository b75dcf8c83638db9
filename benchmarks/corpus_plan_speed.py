"""Every command of the command corpora (tests/data/command_corpus/*.json), planned with the nearest-fix search as
`specbench plan` does, timed one by one in this process (issue 36: every plan under a second), then the slowest three
again as whole `specbench plan` processes (imports included). Commands without a config here (the corpus' "no
config" ones) are timed to their one-line error.

Run: .venv/bin/python benchmarks/corpus_plan_speed.py
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from specbench.contracts_inputs import PlanOptions
from specbench.errors import UserError
from specbench.plan.api import plan_command

ROOT = Path(__file__).resolve().parents[1]
GPUS = {"A100": "A100 80GB", "H100": "H100 80GB", "H100 80GB HBM3": "H100 80GB", "H20": "H20", "8x H20": "H20",
        "B200": "B200", "4xB200": "B200", "H200": "H200", "MI300X": "MI300X"}


# issue 36's slow case: expert parallelism under DP 8 over an FP8 checkpoint with a 560-module exclude list (72-89 s
# per plan before the exclude list was compiled once and the routed-expert bytes memoised)
EXTRA = ({"id": "issue36-qwen3-coder-480b-fp8-dp8-ep", "gpu": "H200",
          "command": "vllm serve Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8 -dp=8 --enable-expert-parallel"},)


def corpus() -> list[dict]:
    out: list[dict] = list(EXTRA)
    for f in sorted((ROOT / "tests/data/command_corpus").glob("commands*.json")):
        out.extend(json.loads(f.read_text(encoding="utf-8")))
    return out


def main() -> None:
    times: list[tuple[float, float, str]] = []
    for e in corpus():
        opts = PlanOptions(gpu=GPUS.get(e.get("gpu") or "", "H200"))
        c0, t0 = time.process_time(), time.perf_counter()
        try:
            plan_command(e["command"], opts)
        except (UserError, ValueError):
            pass
        times.append((time.perf_counter() - t0, time.process_time() - c0, e["id"]))
    walls = sorted(t for t, _, _ in times)
    print(f"{len(times)} commands, in process with fixes: median {1e3 * statistics.median(walls):.0f} ms, "
          f"max {1e3 * walls[-1]:.0f} ms, CPU max {1e3 * max(c for _, c, _ in times):.0f} ms; over 1 s: "
          f"{sum(t > 1.0 for t in walls)}")
    slow = sorted(times, reverse=True)[:3]
    for wall, cpu, cid in slow:
        print(f"  slowest in process: {cid}: {1e3 * wall:.0f} ms wall, {1e3 * cpu:.0f} ms CPU")
    by_id = {e["id"]: e for e in corpus()}
    for _, _, cid in slow:
        e = by_id[cid]
        gpu = GPUS.get(e.get("gpu") or "", "H200")
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "specbench", "plan", "--gpu", gpu, "--", *e["command"].split()],
                       capture_output=True, cwd=ROOT, check=False)
        print(f"  whole process `specbench plan ... {cid}`: {1e3 * (time.perf_counter() - t0):.0f} ms")
    print(f"{platform.python_implementation()} {platform.python_version()}, {platform.machine()}, load average "
          f"{os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
