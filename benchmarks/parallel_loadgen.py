"""Load generators of concurrent cells: threads (one event loop each, one GIL) vs spawned processes (what a packed
run uses: one per active server). 4 instant servers, each loaded by its own generator at once; wall time, request
rate and the runner process's own CPU (what the generators cost it). Run: PYTHONPATH=src .venv/bin/python
benchmarks/parallel_loadgen.py. No assertions."""

from __future__ import annotations

import multiprocessing as mp
import resource
import subprocess
import sys
import threading
import time

from specbench.load.client import run_load
from specbench.load.prompts import build_prompts
from specbench.load.results import LoadSpec

N_SERVERS, N_REQ, C = 4, 400, 8
def load(port, out=None):
    prompts = build_prompts(None, n=N_REQ, prompt_tokens=32, mode="ids", seed=port, vocab_size=1000)
    run = run_load(LoadSpec(base_url=f"http://127.0.0.1:{port}", api="generate", model="instant", output_tokens=128,
                            concurrency=C, num_requests=N_REQ), prompts, None)
    ok = sum(1 for r in run.results if r.error is None)
    if out is not None: out.put(ok)
    return ok
if __name__ == "__main__":
    servers, ports = [], []
    for _ in range(N_SERVERS):
        p = subprocess.Popen([sys.executable, "-m", "specbench.testing.instant_server", "--port", "0", "--burst", "16"],
                             stdout=subprocess.PIPE, text=True)
        ports.append(int(p.stdout.readline().split()[1])); servers.append(p)
    try:
        for mode in ("threads", "processes", "threads", "processes"):
            r0 = resource.getrusage(resource.RUSAGE_SELF); c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.monotonic()
            if mode == "threads":
                ts = [threading.Thread(target=load, args=(p,)) for p in ports]
                [t.start() for t in ts]; [t.join() for t in ts]
            else:
                ctx = mp.get_context("spawn"); q = ctx.Queue()
                ps = [ctx.Process(target=load, args=(p, q)) for p in ports]
                [x.start() for x in ps]; [q.get() for _ in ps]; [x.join() for x in ps]
            wall = time.monotonic() - t0
            r1 = resource.getrusage(resource.RUSAGE_SELF); c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
            print(f"{mode:>9}: {N_SERVERS} x {N_REQ} requests x 128 tokens at c={C}: wall {wall:.2f} s, "
                  f"{N_SERVERS*N_REQ/wall:.0f} req/s, runner-process CPU {cpu:.2f} s")
    finally:
        for p in servers: p.kill()
