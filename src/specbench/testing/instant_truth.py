"""The instant server's ground-truth mode (`--step-ms`): a batch scheduler whose every number is known, and the lies.

Truth: at most `--max-running` requests generate at once (the rest wait, first come first served); every step takes
`--step-ms` + `--step-ms-per-running` x the requests running in it (0 by default: a fixed step; above 0 a batch
costs more the wider it is, so throughput = n / step(n) saturates towards 1000 / per-running tokens/s); a newly
admitted request's first step is its prefill and yields 1 token; every later step is one verify step that accepts
draft position i with probability `--accept-rates[i]` given the ones before it were accepted (chain drafting,
seeded), and yields the accepted drafts + 1 (the bonus token). So:
- TPOT of a request alone = step_ms / (tokens per verify step); autoregressive (no rates): TPOT = step_ms;
- with n requests running (closed loop at concurrency c: n = min(c, cap)), autoregressive: TPOT = step(n) =
  step_ms + per_running x n, output throughput = n / step(n) (`step_model`);
- tokens per verify step (the common accept length, docs/contracts.md) = 1 + sum_i prod_{j<=i} r_j;
- the share of verify steps that accept position i = prod_{j<=i} r_j;
- the effective concurrency = min(concurrency, max_running); `/server_info` reports the cap as SGLang 0.5.15.post1
  does (`internal_states[0].effective_max_running_requests_per_dp`).
Counters: vLLM's spec-decode counters per position and SGLang's `sglang:generation_tokens_total` /
`sglang:spec_verify_calls_total` (both counting only what the truth says).

Lies (each a flag of instant_server.py): `--usage-scale F` (usage / meta_info completion_tokens x F),
`--usage-offset K` (+K; a negative K below zero gives a negative count), `--early-eos F` (the stream ends after
F x max_tokens despite ignore_eos, with a usage that agrees), `--models-name NAME` (/v1/models answers another model
than `--model`), `--report-cap N` (/server_info reports a cap other than the real one), `--accepted-scale F` (the
accepted draft tokens on /metrics x F: more accepted than drafted above 1/acceptance).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import time
from dataclasses import dataclass, field
from typing import NamedTuple


@dataclass
class Job:
    n: int  # tokens to generate
    steps: asyncio.Queue[int] = field(default_factory=asyncio.Queue)  # tokens per step; 0 ends the stream
    done: int = 0
    started: bool = False
    verify_steps: int = 0
    accepted_hist: list[int] = field(default_factory=list)  # [k]: verify steps that accepted k drafts
    t_submit: float = 0.0  # time.time() when the server was given it
    t_first: float = 0.0  # time.time() at the end of its first step (its first token)


class Finished(NamedTuple):
    """One finished request as the truth file's `requests` keeps it (a JSON list in this order): its tokens, verify
    steps and accepted drafts, and the server's time.time() when it was submitted, gave its first token and ended."""
    tokens: int
    verify_steps: int
    accepted: int
    submitted: float
    first: float
    done: float


class Scheduler:
    """One loop: admit waiting jobs up to the cap, sleep one step, advance every running job by its step's tokens."""

    def __init__(self, step_s: float, max_running: int, rates: tuple[float, ...], seed: int = 0,
                 per_running_s: float = 0.0) -> None:
        self.step_s, self.cap, self.rates, self.per_running_s = step_s, max(1, max_running), rates, per_running_s
        self.rng = random.Random(seed)
        self.waiting: list[Job] = []
        self.running: list[Job] = []
        self.wake = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        # counters (vLLM and SGLang names in instant_bodies.Stats)
        self.verify_steps = 0
        self.accepted = 0
        self.per_pos = [0] * len(rates)
        self.generated = 0
        self.max_seen_running = 0
        self.steps = 0  # every step taken (prefill or verify), and their wall time: the realized step time
        self.step_time_s = 0.0
        self.running_sum = 0  # requests running, summed over the steps (its mean: the batch width that ran)
        self.by_width: dict[int, list[float]] = {}  # requests running -> [steps, their wall time in s]
        self.finished: list[Finished] = []

    def submit(self, n: int) -> Job:
        job = Job(n, accepted_hist=[0] * (len(self.rates) + 1), t_submit=time.time())
        self.waiting.append(job)
        self.wake.set()
        if self.task is None:
            self.task = asyncio.ensure_future(self._loop())
        return job

    def _accept(self) -> int:
        k = 0
        for r in self.rates:
            if self.rng.random() < r:
                k += 1
            else:
                break
        return k

    async def _loop(self) -> None:
        while True:
            if not self.running and not self.waiting:
                self.wake.clear()
                await self.wake.wait()
            while self.waiting and len(self.running) < self.cap:
                self.running.append(self.waiting.pop(0))
            self.max_seen_running = max(self.max_seen_running, len(self.running))
            t0 = time.perf_counter()
            await asyncio.sleep(self.step_s + self.per_running_s * len(self.running))
            took, now = time.perf_counter() - t0, time.time()
            self.steps += 1
            self.running_sum += len(self.running)
            self.step_time_s += took
            w = self.by_width.setdefault(len(self.running), [0, 0.0])
            w[0] += 1
            w[1] += took
            for job in list(self.running):
                if not job.started:
                    job.started, job.t_first = True, now
                    k = 1
                else:
                    acc = self._accept()
                    k = min(acc + 1, job.n - job.done)
                    got = k - 1
                    job.verify_steps += 1
                    job.accepted_hist[got] += 1
                    self.verify_steps += 1
                    self.accepted += got
                    for i in range(got):
                        self.per_pos[i] += 1
                job.done += k
                self.generated += k
                job.steps.put_nowait(k)
                if job.done >= job.n:
                    job.steps.put_nowait(0)
                    self.running.remove(job)
                    self.finished.append(Finished(job.n, job.verify_steps,
                                                  sum(k * c for k, c in enumerate(job.accepted_hist)),
                                                  job.t_submit, job.t_first, now))


    def realized(self) -> dict[str, object]:
        """What the scheduler really did so far (sleeps overshoot on a busy machine: `mean_step_ms` is the step time
        the stream was made of, the truth a client's TPOT is compared with; `step_ms_by_running` the same per batch
        width, {running: [steps, mean ms]}; `mean_running` the batch width averaged over the steps; `requests` each
        finished request as a list in `Finished`'s order, its times the server's time.time(): a client's window and
        its requests' TPOT can be compared with what the server did then)."""
        return {"steps": self.steps, "mean_step_ms": 1000.0 * self.step_time_s / self.steps if self.steps else None,
                "verify_steps": self.verify_steps, "accepted": self.accepted, "per_pos": list(self.per_pos),
                "tokens_per_verify_step": 1.0 + self.accepted / self.verify_steps if self.verify_steps else None,
                "generated": self.generated, "max_running_seen": self.max_seen_running, "cap": self.cap,
                "mean_running": self.running_sum / self.steps if self.steps else None,
                "step_ms_by_running": {str(n): [int(k), 1000.0 * t / k] for n, (k, t) in sorted(self.by_width.items())},
                "requests": [list(x) for x in self.finished]}

    def write(self, path: str | None) -> None:
        """The realized truth as JSON at `path` (`--truth-file`), replaced whole (a reader never sees half of it)."""
        if not path:
            return
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.realized(), f)
        os.replace(tmp, path)


def step_model(step_ms: float, per_running_ms: float, concurrency: int, cap: int) -> dict[str, float]:
    """The autoregressive truth of a closed loop at `concurrency` on a cap: n = min(c, cap) running, each step
    step(n) = step_ms + per_running_ms x n long and 1 token per running request: TPOT = step(n) ms, output
    throughput = 1000 x n / step(n) tokens/s."""
    n = min(concurrency, cap)
    step = step_ms + per_running_ms * n
    return {"running": float(n), "tpot_ms": step, "output_tokens_per_s": 1000.0 * n / step}


SATURATION = {"step_ms": 5.0, "per_running_ms": 1.0, "cap": 8, "output_tokens": 16}  # the saturation matrix's truth


def saturation_matrix(truth_dir: str) -> tuple[list[str], str]:
    """The saturation run (tests/process/test_truth_saturation.py, benchmarks/ground_truth.py): the instant server's
    command with SATURATION's batch-dependent step and cap, and the matrix body after its head: `closed` (closed loop at
    c = 1, 4, 16, 64; 2 requests per unit of concurrency, at least 8) and `paced` (c = 16 at 5 requests/s, 32
    requests, temperature 0.7: a request takes ~0.1 s, so the cap of 8 is reached in flight only if the machine runs
    the server 16x slow; at 10/s a loaded 2-core machine reached it), each server writing its realized truth to
    `truth_dir`/<label>.json."""
    import sys

    t = SATURATION
    cmd = [sys.executable, "-m", "specbench.testing.instant_server", "--step-ms", str(t["step_ms"]),
           "--step-ms-per-running", str(t["per_running_ms"]), "--max-running", str(t["cap"])]
    specs = "".join(f'\n[[server.spec]]\nlabel = "{label}"\nflags = {{ "--truth-file" = '
                    f'{json.dumps(os.path.join(truth_dir, label + ".json"))} }}\n' for label in ("closed", "paced"))
    return cmd, specs + f"""
[client]
concurrency = [1, 4, 16, 64]
prompt_tokens = 24
output_tokens = {t["output_tokens"]}
num_requests = 8
requests_per_concurrency = 2
warmup_requests = 0

[[override]]
when = {{ spec = "paced" }}
client = {{ concurrency = 16, request_rate = 5.0, temperature = 0.7 }}
"""


def tokens_per_step(rates: tuple[float, ...]) -> float:
    """The truth's common accept length: 1 + sum_i prod_{j<=i} r_j."""
    return 1.0 + sum(math.prod(rates[:i + 1]) for i in range(len(rates)))


def acceptance_per_pos(rates: tuple[float, ...]) -> list[float]:
    return [math.prod(rates[:i + 1]) for i in range(len(rates))]
