"""Planner speed: the per-TP feasibility search for Qwen3.6-27B + DFLASH on a 96 GB RTX PRO 6000.

Search space: TP 1, 2, 4, 8 x --max-running-requests 1..512 x --mem-fraction-static 0.50..0.95 (step 0.01)
x --context-length 4k..256k. specbench answers it with monotone binary searches (solve.py); this benchmark times
that whole search, and, side by side in the same run, an exhaustive sweep of a slice of the grid to give plans/s
and the cost the binary search avoids. Target: whole search < 1 s on one core.

Run: .venv/bin/python benchmarks/planner_speed.py
"""

from __future__ import annotations

import platform
import statistics
import time

from specbench.engines.sglang.args import parse_sglang_argv
from specbench.engines.sglang.fixes import FRACTIONS, Solver
from specbench.engines.sglang.plan import plan_sglang
from specbench.engines.sglang.plan_stages import Measured
from specbench.specs.gpu import find_gpu
from specbench.specs.resolve import load_model_spec

CMD = ("python -m sglang.launch_server --model-path Qwen/Qwen3.6-27B --tp 1 --mem-fraction-static 0.75 "
       "--max-running-requests 8 --context-length 32768 --speculative-algorithm DFLASH --speculative-num-draft-tokens 16 "
       "--speculative-draft-model-path specforge/qwen3.6-27b-dflash --mamba-scheduler-strategy extra_buffer")


def main() -> None:
    m = load_model_spec("Qwen/Qwen3.5-27B")
    d = load_model_spec("specforge/qwen3.6-27b-dflash")
    gpu = find_gpu("rtx-pro-6000")
    args = parse_sglang_argv(CMD.split())
    measured = Measured()
    runs = []
    calls = 0
    for _ in range(5):
        s = Solver(args, m, d, gpu, "0.5.23", measured)
        t0 = time.perf_counter()
        rows = s.table((1, 2, 4, 8))
        runs.append(time.perf_counter() - t0)
        calls = s.calls
    best = min(runs)
    # exhaustive slice: every mrr 1..512 at TP1 and every mem fraction, for one context
    t0 = time.perf_counter()
    n = 0
    for mrr in range(1, 513, 8):
        for f in FRACTIONS:
            plan_sglang(args.with_(max_running_requests=mrr, mem_fraction_static=f), m, d, gpu, "0.5.23", measured)
            n += 1
    dt = time.perf_counter() - t0
    rate = n / dt
    full_grid = 4 * 512 * len(FRACTIONS) * 7
    print(f"machine: {platform.machine()} {platform.processor() or ''} python {platform.python_version()}")
    print(f"per-TP search (TP 1,2,4,8; binary searches): {calls} plans, best {best * 1000:.1f} ms, "
          f"median {statistics.median(runs) * 1000:.1f} ms over {len(runs)} runs")
    print(f"single plans: {rate:,.0f} plans/s ({n} plans in {dt:.2f} s)")
    print(f"exhaustive grid would be {full_grid:,} plans = {full_grid / rate:.1f} s at that rate; "
          f"the search is {full_grid / rate / best:,.0f}x faster")
    print(f"target < 1 s for the whole search: {'met' if best < 1 else 'MISSED'} ({best:.3f} s)")
    for r in rows:
        print(f"  TP{r.tp}: max mrr {r.max_running_requests}, min mem fraction {r.min_mem_fraction}, "
              f"max context {r.max_context}, max draft tokens {r.max_draft_tokens}")


if __name__ == "__main__":
    main()
