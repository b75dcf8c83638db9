"""The two load shapes: fixed concurrency (N closed-loop workers) and Poisson arrivals at a request rate
(optionally capped at `concurrency` in flight); no new request starts after the deadline."""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Callable, Sequence

from specbench.load.stream import Pool, Raw, one_request


def is_closed_loop(rate: object) -> bool:
    """A client's `request_rate` that means a closed loop (`concurrency` in flight, the next request as one ends):
    unset, "inf" or infinity; any finite rate is Poisson arrivals."""
    if rate is None:
        return True
    if isinstance(rate, str):
        return rate.strip().lower() == "inf"
    return isinstance(rate, (int, float)) and not isinstance(rate, bool) and math.isinf(rate)


async def closed_loop(pool: Pool, requests: Sequence[bytes], recs: list[Raw], concurrency: int,
                       deadline: float | None, timeout_s: float, on_done: Callable[[Raw], None] | None) -> None:
    it = iter(range(len(requests)))

    async def worker() -> None:
        for i in it:
            if deadline is not None and time.perf_counter() >= deadline:
                return
            rec = recs[i]
            await one_request(pool, rec, requests[i], timeout_s)
            if on_done is not None:
                on_done(rec)

    await asyncio.gather(*(worker() for _ in range(min(concurrency, len(requests)))))


def poisson_offsets(n: int, rate: float, seed: int) -> list[float]:
    """Send times (s after the first request) of a Poisson process at `rate` req/s: exponential gaps, seeded."""
    rng = random.Random(seed)
    out = [0.0]
    for _ in range(n - 1):
        out.append(out[-1] + rng.expovariate(rate))
    return out[:n]


async def poisson(pool: Pool, requests: Sequence[bytes], recs: list[Raw], rate: float, cap: int | None,
                   deadline: float | None, timeout_s: float, seed: int,
                   on_done: Callable[[Raw], None] | None) -> None:
    sem = asyncio.Semaphore(cap) if cap else None
    tasks: list[asyncio.Task[None]] = []
    t0 = time.perf_counter()

    async def fire(i: int) -> None:
        try:
            await one_request(pool, recs[i], requests[i], timeout_s)
        finally:
            if sem is not None:
                sem.release()
        if on_done is not None:
            on_done(recs[i])

    for i, offset in enumerate(poisson_offsets(len(requests), rate, seed)):
        delay = t0 + offset - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        if deadline is not None and time.perf_counter() >= deadline:
            break
        if sem is not None:
            await sem.acquire()
        tasks.append(asyncio.ensure_future(fire(i)))
    if tasks:
        await asyncio.gather(*tasks)
