"""What the client's stall watch (load/stall.py) costs: the same load with the watch and without it, side by side.

The watch wakes 100 times a second whatever the load, so its cost is per second of measured time: the instant
server's ground-truth scheduler (`--step-ms 5`, pinned to core 1; a round of 256 requests x 64 tokens at c=64 takes
~1.5 s) is driven closed loop at c=64 by `specbench.load.client.run_load` in this process (pinned to core 0 when
there are two cores), and the watch's cost shows in the client's CPU time per token. Rounds alternate
A (the watch, as `specbench run` measures) and B (a watch that does nothing), so that load from other processes
falls on both alike. Printed: medians over the rounds of the client's CPU seconds per 1,000 streamed tokens and of
tokens/s, each side, and B/A; also the stalls A's watch saw.

    .venv/bin/python benchmarks/stall_watch_overhead.py [--rounds 6] [--requests 256] [--tokens 64]

No assertion anywhere; benchmarks/RESULTS.md keeps what it printed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from loadgen_overhead import PY, Proc, _free_port, _taskset  # noqa: E402

from specbench.load import client  # noqa: E402
from specbench.load.prompts import Prompt  # noqa: E402
from specbench.load.results import LoadSpec  # noqa: E402
from specbench.load.stall import Stalls, StallWatch  # noqa: E402


class _NoWatch:
    """B: the same calls, no task."""

    def start(self) -> None:
        pass

    async def stop(self) -> Stalls:
        return Stalls()


def _start_server(port: int, core: int | None, work: Path) -> Proc:
    cmd = [*_taskset(core), PY, "-m", "specbench.testing.instant_server", "--port", str(port), "--model", "tiny-target",
           "--step-ms", "5", "--max-running", "64"]
    proc = Proc(cmd, {**os.environ, "PYTHONPATH": str(ROOT / "src")}, work / "instant.log")
    for _ in range(200):
        if "READY" in proc.log.read_text():
            return proc
        time.sleep(0.05)
    proc.stop()
    raise SystemExit(f"instant server did not start: {proc.log.read_text()[-2000:]}")


def _round(url: str, watch: type, requests: int, tokens: int) -> tuple[float, float, Stalls]:
    client.StallWatch = watch  # type: ignore[misc]  # arun_load looks the name up at each run
    spec = LoadSpec(url, api="completions", model="tiny-target", output_tokens=tokens, concurrency=64,
                    num_requests=requests, warmup_requests=0, count_tokens=False)
    run = client.run_load(spec, [Prompt(16, text="hello " * 16)])
    streamed = sum(r.output_tokens for r in run.results if r.ok)
    return 1e6 * run.client_cpu_s / streamed, streamed / run.duration_s, run.client_stalls


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--requests", type=int, default=256)
    p.add_argument("--tokens", type=int, default=64)
    a = p.parse_args()
    two = len(os.sched_getaffinity(0)) >= 2
    with tempfile.TemporaryDirectory() as work:
        port = _free_port()
        server = _start_server(port, 1 if two else None, Path(work))
        if two:
            os.sched_setaffinity(0, {0})
        try:
            url = f"http://127.0.0.1:{port}"
            _round(url, StallWatch, 32, a.tokens)  # warm: connections, bytecode
            got: dict[str, list[tuple[float, float, Stalls]]] = {"A": [], "B": []}
            for _ in range(a.rounds):
                got["A"].append(_round(url, StallWatch, a.requests, a.tokens))
                got["B"].append(_round(url, _NoWatch, a.requests, a.tokens))
        finally:
            server.stop()
    cpu = {k: statistics.median(x[0] for x in v) for k, v in got.items()}
    tps = {k: statistics.median(x[1] for x in v) for k, v in got.items()}
    print(f"{a.rounds} rounds x {a.requests} requests x {a.tokens} tokens, c=64, client pinned: {two}")
    print(f"client CPU ms per 1k tokens: A (watch) {cpu['A']:.2f}, B (none) {cpu['B']:.2f}, B/A {cpu['B'] / cpu['A']:.3f}")
    print(f"tokens/s:                    A {tps['A']:.0f}, B {tps['B']:.0f}, B/A {tps['B'] / tps['A']:.3f}")
    longest = max(x[2].longest_s for x in got["A"])
    print(f"A's watch: longest stall {1000 * longest:.0f} ms over its rounds")


if __name__ == "__main__":
    main()
