"""Async streaming load generator for OpenAI-compatible servers and SGLang's native `/generate`.

Built on raw asyncio Protocols, not aiohttp: per-core cost is what decides whether the client or the
server is measured (benchmarks/RESULTS.md, "Load-generator overhead"). The hot path does no JSON parsing:
for every socket read it takes one `perf_counter()` timestamp and counts SSE events with
`bytes.count(b"\\ndata:")` (a `data:` field always starts a line, and JSON strings cannot hold a raw
newline). Only the first events (to skip the chat role chunk) and the last events (`usage`, SGLang
`meta_info`, `[DONE]`) of each response are parsed, after the run.

Events that arrive in one read share its timestamp, so their inter-token gaps are 0: that is the
client's real time resolution (vllm/benchmarks/lib/endpoint_request_func.py stamps each event of an
`iter_any()` buffer within microseconds of each other, to the same effect).

After the run the output tokens of every response are counted by the client and checked against the server's count
(load/counting.py): the throughputs use the verified count, a disagreement is a request error naming both.

Two load shapes: fixed concurrency (N closed-loop workers) and Poisson arrivals at a request rate
(optionally capped at `concurrency` in flight). Warm-up requests run first and are not counted. A run is
bounded by `num_requests` and, optionally, `duration_s` (no new request starts after it).

The parts: `results.py` (LoadSpec, RequestResult, LoadRun), `bodies.py` (what each API mode sends), `stream.py`
(the hot path), `schedule.py` (the load shapes), `sse.py` (the events parsed after the run). This module runs
them: `run_load` / `arun_load`; each other name is imported from the module that defines it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from urllib.parse import urlsplit

from specbench.errors import UserError
from specbench.load import counting, honesty
from specbench.load.bodies import http_request, request_body
from specbench.load.prompts import Prompt
from specbench.load.results import LoadRun, LoadSpec, RequestResult
from specbench.load.schedule import closed_loop, poisson
from specbench.load.sse import finalize
from specbench.load.stall import StallWatch
from specbench.load.stream import Pool, Raw


async def arun_load(spec: LoadSpec, prompts: Sequence[Prompt],
                    on_done: Callable[[RequestResult], None] | None = None,
                    between: Callable[[], None] | None = None) -> LoadRun:
    """Run warm-up, then the measured requests. Prompts are used in order (cycled when too few);
    warm-up takes its prompts from the end of the list. `between` runs after the warm-up, before the first measured
    request (nothing in flight: the runner resets the prefix cache and reads the counters there)."""
    if not prompts:
        raise UserError("no prompts to send")
    u = urlsplit(spec.base_url)
    host, port = u.hostname or "127.0.0.1", u.port or 80
    n, w = spec.num_requests, spec.warmup_requests
    measured = [http_request(spec, request_body(spec, prompts[i % len(prompts)])) for i in range(n)]
    warm = [http_request(spec, request_body(spec, prompts[-1 - (i % len(prompts))])) for i in range(w)]
    pool = Pool(host, port)
    try:
        warmup_errors: list[str] = []
        if warm:
            wrecs = [Raw(i, 0) for i in range(w)]
            await closed_loop(pool, warm, wrecs, spec.concurrency or 1, None, spec.request_timeout_s, None)
            warmup_errors = [r.error for r in wrecs if r.error]
        if between is not None:
            between()
        keep = spec.count_tokens and spec.api != "generate"  # /generate: counted from the kept last events
        recs = [Raw(i, prompts[i % len(prompts)].n_tokens, prompts[i % len(prompts)].output_tokens or spec.output_tokens,
                    keep) for i in range(n)]
        t_wall = time.time()
        cpu0 = time.process_time()
        t_start = time.perf_counter()
        deadline = t_start + spec.duration_s if spec.duration_s else None
        keeper = _Keeper(KEEP_BODY_BYTES, spec.api)
        watch = StallWatch()
        watch.start()

        def hook(r: Raw) -> None:
            keeper(r)
            if on_done is not None:
                on_done(finalize(r, spec.api, t_start, spec.include_usage, model=spec.model, served=spec.served_models))
        if spec.request_rate is None:
            await closed_loop(pool, measured, recs, spec.concurrency or 1, deadline, spec.request_timeout_s, hook)
        else:
            await poisson(pool, measured, recs, spec.request_rate, spec.concurrency, deadline,
                           spec.request_timeout_s, spec.seed, hook)
        cpu1 = time.process_time()
        stalls = await watch.stop()
        sent = [r for r in recs if r.t0 > 0.0]
        t_last = max((r.t_end for r in sent), default=t_start)
    finally:
        pool.close()
    recount = spec.token_counter is not None and spec.api != "generate"
    bodies = [b"".join(r.body) if r.body is not None else
              (r.tail if spec.count_tokens and spec.api == "generate" else None) for r in sent]
    results = counting.verify([finalize(r, spec.api, t_start, spec.include_usage, body=b, ignore_eos=spec.ignore_eos,
                                        recount=recount, model=spec.model, served=spec.served_models)
                               for r, b in zip(sent, bodies)],
                              bodies, spec.api, spec.ignore_eos, spec.token_counter)
    results = _same_answers(results, [prompts[r.idx % len(prompts)] for r in results])
    return LoadRun(results=tuple(results), duration_s=max(t_last - t_start, 1e-9), started_at=t_wall,
                   warmup_errors=tuple(warmup_errors),
                   client_cpu_s=cpu1 - cpu0, client_stalls=stalls)


# Text bodies kept whole for counting with the tokenizer after the run (load/counting.py), over all of a run's
# requests; past it each body is cut, as its request ends, to its text fields: memory stays bounded on long runs of
# long outputs at the price of one scan per request while the run goes on.
KEEP_BODY_BYTES = 256 << 20


class _Keeper:
    """As a request ends: a body that carries token ids is counted at once (one C-level scan, counting.ids_count) and
    let go, so a run keeps no id-carrying body (keeping ~23 KB a request cost more CPU in fresh memory than the scan:
    benchmarks/RESULTS.md, 2026-12-02); a text body is joined into one bytes within the budget, else cut. Only the
    fast scan runs here (`parse=False`): a body whose JSON is spelled another way (`"token_ids": [1, 2]`) is kept,
    and counted through the JSON fallback after the run, off the measured window (load/counting.py)."""

    def __init__(self, limit: int, api: str) -> None:
        self.left = limit
        self.api = api

    def __call__(self, rec: Raw) -> None:
        if rec.body is None:
            return
        body = b"".join(rec.body)
        scan = counting.ids_scan(body, parse=False) if rec.error is None else None
        # kept where more events carry no ids than a stream's edges (role, finish, usage, [DONE]): its events are
        # then read one by one after the run (sse.finalize), so that the empty ones are no tokens
        if scan is not None and scan.events + honesty.NON_CONTENT_MAX >= rec.n_ev:
            rec.ids, rec.digest, rec.body = scan.tokens, scan.digest, None
            return
        if len(body) > self.left:
            body = counting.essentials(body)
        self.left -= len(body)
        rec.body = [body]


def _content(p: Prompt) -> tuple[object, ...]:
    """What a prompt says, as comparable units: its token ids, else the words of its text or its messages."""
    if p.token_ids is not None:
        return tuple(p.token_ids)
    text = p.text if p.text is not None else " ".join(str(m.get("content", "")) for m in p.messages or ())
    return tuple(text.split())


def _same_answers(results: list[RequestResult], prompts: Sequence[Prompt]) -> list[RequestResult]:
    """The requests whose answer a cache or a stub gave (honesty.identical_answers) made errors with the reason."""
    keys = [json.dumps([p.text, p.messages, p.token_ids], sort_keys=True) for p in prompts]
    same = honesty.identical_answers(results, keys, [_content(p) for p in prompts])
    return [dataclasses.replace(r, error=same[i]) if i in same else r for i, r in enumerate(results)]


def run_load(spec: LoadSpec, prompts: Sequence[Prompt],
             on_done: Callable[[RequestResult], None] | None = None,
             between: Callable[[], None] | None = None) -> LoadRun:
    """Blocking wrapper around `arun_load` (its own event loop)."""
    return asyncio.run(arun_load(spec, prompts, on_done, between))
