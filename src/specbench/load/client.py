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

Two load shapes: fixed concurrency (N closed-loop workers) and Poisson arrivals at a request rate
(optionally capped at `concurrency` in flight). Warm-up requests run first and are not counted. A run is
bounded by `num_requests` and, optionally, `duration_s` (no new request starts after it).
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from specbench.errors import UserError
from specbench.load.prompts import Prompt

Api = Literal["completions", "chat", "generate"]
_PATHS: dict[str, str] = {"completions": "/v1/completions", "chat": "/v1/chat/completions", "generate": "/generate"}
_EV = b"\ndata:"
_KEEP = 6  # event starts kept from the end of a response (one or two more than ever parsed: markers can straddle reads)
_HEAD_BYTES = 4096
_LAST_CHUNK = b"\r\n0\r\n\r\n"


@dataclass(frozen=True, slots=True)
class RequestResult:
    """One measured request. Times in seconds; `itl_s` has one gap per content event after the first."""

    idx: int
    start_s: float  # when it was sent, relative to the start of the measured run
    ttft_s: float | None
    e2e_s: float | None
    itl_s: tuple[float, ...]
    prompt_tokens: int | None  # the server's `usage` / `meta_info` count, else the prompt's own count
    output_tokens: int  # the server's count when given, else the number of content events
    error: str | None = None
    spec_verify_ct: int | None = None  # SGLang meta_info
    accept_len: float | None = None  # SGLang: completion_tokens / spec_verify_ct
    events: int = 0  # content SSE events received

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def tpot_s(self) -> float | None:
        """(E2E - TTFT) / (output tokens - 1), as vLLM and SGLang's bench clients define it."""
        if self.error is not None or self.ttft_s is None or self.e2e_s is None or self.output_tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)


@dataclass(frozen=True)
class LoadSpec:
    """What to send and how. `request_rate=None` means closed loop at `concurrency`."""

    base_url: str
    api: Api = "completions"
    model: str = ""
    output_tokens: int = 128
    concurrency: int | None = 1
    request_rate: float | None = None
    num_requests: int = 100
    duration_s: float | None = None
    warmup_requests: int = 0
    include_usage: bool = True
    ignore_eos: bool = True
    temperature: float = 0.0
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    request_timeout_s: float = 600.0
    api_key: str | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.api not in _PATHS:
            raise UserError(f"unknown api '{self.api}' (completions, chat or generate)")
        if self.output_tokens < 1:
            raise UserError(f"output tokens must be >= 1 (got {self.output_tokens})")
        if self.num_requests < 1:
            raise UserError(f"number of requests must be >= 1 (got {self.num_requests})")
        if self.warmup_requests < 0:
            raise UserError(f"warm-up requests must be >= 0 (got {self.warmup_requests})")
        if self.request_rate is None and (self.concurrency is None or self.concurrency < 1):
            raise UserError("give a concurrency >= 1 or a request rate")
        if self.request_rate is not None and not self.request_rate > 0:
            raise UserError(f"request rate must be > 0 (got {self.request_rate})")
        if self.concurrency is not None and self.concurrency < 1:
            raise UserError(f"concurrency must be >= 1 (got {self.concurrency})")
        if self.duration_s is not None and not self.duration_s > 0:
            raise UserError(f"duration must be > 0 s (got {self.duration_s})")
        u = urlsplit(self.base_url)
        if u.scheme != "http" or not u.hostname:
            raise UserError(f"base URL must be http://HOST:PORT (got '{self.base_url}')")


@dataclass(frozen=True)
class LoadRun:
    """The measured requests of one run (warm-up excluded) and the wall time they took."""

    results: tuple[RequestResult, ...]
    duration_s: float  # first measured send to last measured completion
    started_at: float  # time.time() at the first measured send
    warmup_errors: tuple[str, ...] = ()
    client_cpu_s: float = 0.0  # this process's CPU time (user + system) over the measured window


# ---------------------------------------------------------------------------------------------
# request bodies (built before the run)


def request_body(spec: LoadSpec, prompt: Prompt) -> dict[str, Any]:
    """The JSON body one request sends (`extra_body` merged last)."""
    if spec.api == "generate":
        sp: dict[str, Any] = {"max_new_tokens": spec.output_tokens, "temperature": spec.temperature}
        if spec.ignore_eos:
            sp["ignore_eos"] = True
        body: dict[str, Any] = {"sampling_params": sp, "stream": True}
        if prompt.token_ids is not None:
            body["input_ids"] = list(prompt.token_ids)
        elif prompt.text is not None:
            body["text"] = prompt.text
        else:
            raise UserError("the /generate api takes text or token-id prompts, not chat messages")
    else:
        body = {"model": spec.model, "max_tokens": spec.output_tokens, "temperature": spec.temperature,
                "stream": True}
        if spec.include_usage:
            body["stream_options"] = {"include_usage": True}
        if spec.ignore_eos:
            body["ignore_eos"] = True
        if spec.api == "chat":
            if prompt.messages is None:
                raise UserError("the chat api needs chat prompts (prompt mode 'chat')")
            body["messages"] = list(prompt.messages)
        elif prompt.messages is not None:
            raise UserError("the completions api takes text or token-id prompts, not chat messages")
        else:
            body["prompt"] = prompt.text if prompt.text is not None else list(prompt.token_ids or ())
    body.update(spec.extra_body)
    return body


def _http_request(spec: LoadSpec, body: dict[str, Any]) -> bytes:
    u = urlsplit(spec.base_url)
    path = (u.path.rstrip("/") + _PATHS[spec.api]).encode()
    payload = json.dumps(body, separators=(",", ":")).encode()
    auth = b"Authorization: Bearer %s\r\n" % spec.api_key.encode() if spec.api_key else b""
    return (b"POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\n"
            b"%sContent-Length: %d\r\n\r\n" % (path, u.netloc.encode(), auth, len(payload))) + payload


# ---------------------------------------------------------------------------------------------
# the hot path: one connection, one response at a time


class _Raw:
    """What the hot path records about one request; turned into a RequestResult after the run."""

    __slots__ = ("idx", "prompt_tokens", "t0", "t_end", "marks", "n_ev", "head", "reads", "reads_ev", "tail",
                 "status", "error", "error_ev", "err_body")

    def __init__(self, idx: int, prompt_tokens: int) -> None:
        self.idx = idx
        self.prompt_tokens = prompt_tokens
        self.t0 = self.t_end = 0.0
        self.marks: list[tuple[float, int]] = []
        self.n_ev = 0
        self.head = b""  # the first bytes of the body (the first events: the chat role chunk)
        self.reads: deque[tuple[bytes, int]] = deque()  # the last reads, enough to hold the last _KEEP events
        self.reads_ev = 0
        self.tail = b""
        self.status = 0
        self.error: str | None = None
        self.error_ev = False
        self.err_body = b""


_HEAD, _CHUNKED, _LENGTH, _UNTIL_CLOSE, _IDLE = range(5)


class _Conn(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.state = _IDLE
        self.rec: _Raw | None = None
        self.fut: asyncio.Future[None] | None = None
        self.hbuf = b""
        self.edge = b""  # the last 8 bytes of the stream: event markers and the last chunk split across reads
        self.remaining = 0
        self.keep_alive = True
        self.closed = False
        self.timer: asyncio.TimerHandle | None = None

    # asyncio callbacks ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        rec = self.rec
        if rec is None:
            return
        if self.state == _UNTIL_CLOSE:
            self._finish(time.perf_counter())
        elif self.state == _HEAD:
            self._fail(f"connection closed before a response ({exc or 'EOF'})")
        else:
            self._fail(f"connection closed mid-stream after {rec.n_ev} events ({exc or 'EOF'})")

    def data_received(self, data: bytes) -> None:
        t = time.perf_counter()
        if self.state == _HEAD:
            self._headers(t, data)
        else:
            self._feed(t, data)

    def _feed(self, t: float, data: bytes) -> None:
        """Body bytes read at time `t` (the headers' read time for body bytes that came with them)."""
        state = self.state
        if state == _CHUNKED:
            self._body(t, data)
            # the last chunk `0\r\n\r\n` after a chunk's CRLF; it may come split over reads
            done = data.endswith(_LAST_CHUNK) if len(data) >= 7 else (self.edge + data).endswith(_LAST_CHUNK)
            self._edge(data)
            if done:
                self._finish(t)
        elif state == _LENGTH:
            self._body(t, data)
            self._edge(data)
            self.remaining -= len(data)
            if self.remaining <= 0:
                self._finish(t)
        elif state == _UNTIL_CLOSE:
            self._body(t, data)
            self._edge(data)

    def _edge(self, data: bytes) -> None:
        """The stream's last 8 bytes, however small the reads."""
        self.edge = data[-8:] if len(data) >= 8 else (self.edge + data)[-8:]

    # parsing ------------------------------------------------------------------------------
    def _body(self, t: float, data: bytes) -> None:
        rec = self.rec
        assert rec is not None
        if rec.status != 200:
            rec.err_body += data[:2048]
            return
        n = data.count(_EV)
        if self.edge:  # a marker that started in the previous read(s)
            n += (self.edge[-5:] + data[:5]).count(_EV)
        if n:
            rec.marks.append((t, n))
            rec.n_ev += n
        if len(rec.head) < _HEAD_BYTES:
            rec.head += data[:_HEAD_BYTES]
        # keep references to the last reads (no copy) while they hold the last _KEEP event starts
        reads = rec.reads
        reads.append((data, n))
        rec.reads_ev += n
        while len(reads) > 1 and rec.reads_ev - reads[0][1] >= _KEEP:
            rec.reads_ev -= reads.popleft()[1]
        if b'{"error"' in data:
            rec.error_ev = True

    def _headers(self, t: float, data: bytes) -> None:
        buf = self.hbuf + data
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            self.hbuf = buf
            return
        self.hbuf = b""
        rec = self.rec
        assert rec is not None
        lines = buf[:end].split(b"\r\n")
        try:
            rec.status = int(lines[0].split(b" ", 2)[1])
        except (IndexError, ValueError):
            self._fail(f"bad HTTP status line {lines[0][:80]!r}")
            return
        chunked, length, close = False, -1, lines[0].startswith(b"HTTP/1.0")
        for line in lines[1:]:
            k, _, v = line.partition(b":")
            k = k.strip().lower()
            if k == b"transfer-encoding":
                chunked = b"chunked" in v.lower()
            elif k == b"content-length":
                length = int(v.strip())
            elif k == b"connection":
                close = v.strip().lower() == b"close"
        self.keep_alive = not close
        rest = buf[end + 4:]
        self.edge = b"\r\n\r\n"
        if chunked:
            self.state = _CHUNKED
            if rest:
                self._feed(t, rest)
        elif length >= 0:
            self.state = _LENGTH
            self.remaining = length
            if length == 0:
                self._finish(t)
            elif rest:
                self._feed(t, rest)
        else:
            self.state = _UNTIL_CLOSE
            self.keep_alive = False
            if rest:
                self._feed(t, rest)

    # lifecycle -------------------------------------------------------------------------------
    def start(self, rec: _Raw, request: bytes, timeout_s: float) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        self.rec = rec
        self.fut = loop.create_future()
        self.state = _HEAD
        self.edge = b""
        self.timer = loop.call_later(timeout_s, self._timeout, timeout_s)
        rec.t0 = time.perf_counter()
        assert self.transport is not None
        self.transport.write(request)
        return self.fut

    def _timeout(self, timeout_s: float) -> None:
        self.timer = None
        if self.rec is not None:
            self._fail(f"timed out after {timeout_s:g} s ({self.rec.n_ev} events received)")

    def _finish(self, t: float) -> None:
        rec = self.rec
        assert rec is not None
        rec.t_end = t
        seg = b"".join(d for d, _ in rec.reads)
        i = len(seg)
        for _ in range(_KEEP - 1):  # [DONE], usage, an empty finish chunk, the last content event(s)
            j = seg.rfind(_EV, 0, i)
            if j < 0:
                break
            i = j
        rec.tail = seg[i:] if i < len(seg) else seg[-4096:]
        rec.reads.clear()
        if rec.status != 200 and rec.error is None:
            body = rec.err_body.decode("utf-8", "replace").strip()
            rec.error = f"HTTP {rec.status}: {body[:500]}"
        self._done()

    def _fail(self, message: str) -> None:
        rec = self.rec
        if rec is None:
            return
        rec.t_end = time.perf_counter()
        rec.error = message
        rec.reads.clear()
        self.keep_alive = False
        if self.transport is not None:
            self.transport.abort()
        self._done()

    def _done(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.state = _IDLE
        self.rec = None
        if not self.keep_alive and self.transport is not None:
            self.transport.close()
            self.closed = True
        fut, self.fut = self.fut, None
        if fut is not None and not fut.done():
            fut.set_result(None)


class _Pool:
    """Idle keep-alive connections to one host."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.idle: list[_Conn] = []

    async def get(self) -> _Conn:
        while self.idle:
            c = self.idle.pop()
            if not c.closed:
                return c
        loop = asyncio.get_running_loop()
        _, conn = await loop.create_connection(_Conn, self.host, self.port)
        return conn

    def put(self, c: _Conn) -> None:
        if not c.closed:
            self.idle.append(c)

    def close(self) -> None:
        for c in self.idle:
            if c.transport is not None:
                c.transport.close()
        self.idle.clear()


async def _one(pool: _Pool, rec: _Raw, request: bytes, timeout_s: float) -> None:
    try:
        conn = await pool.get()
    except OSError as exc:
        rec.t0 = rec.t_end = time.perf_counter()
        rec.error = f"cannot connect to {pool.host}:{pool.port}: {exc.strerror or exc}"
        return
    await conn.start(rec, request, timeout_s)
    pool.put(conn)


# ---------------------------------------------------------------------------------------------
# load shapes


async def _closed_loop(pool: _Pool, requests: Sequence[bytes], recs: list[_Raw], concurrency: int,
                       deadline: float | None, timeout_s: float, on_done: Callable[[_Raw], None] | None) -> None:
    it = iter(range(len(requests)))

    async def worker() -> None:
        for i in it:
            if deadline is not None and time.perf_counter() >= deadline:
                return
            rec = recs[i]
            await _one(pool, rec, requests[i], timeout_s)
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


async def _poisson(pool: _Pool, requests: Sequence[bytes], recs: list[_Raw], rate: float, cap: int | None,
                   deadline: float | None, timeout_s: float, seed: int,
                   on_done: Callable[[_Raw], None] | None) -> None:
    sem = asyncio.Semaphore(cap) if cap else None
    tasks: list[asyncio.Task[None]] = []
    t0 = time.perf_counter()

    async def fire(i: int) -> None:
        try:
            await _one(pool, recs[i], requests[i], timeout_s)
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


async def arun_load(spec: LoadSpec, prompts: Sequence[Prompt],
                    on_done: Callable[[RequestResult], None] | None = None) -> LoadRun:
    """Run warm-up, then the measured requests. Prompts are used in order (cycled when too few);
    warm-up takes its prompts from the end of the list."""
    if not prompts:
        raise UserError("no prompts to send")
    u = urlsplit(spec.base_url)
    host, port = u.hostname or "127.0.0.1", u.port or 80
    n, w = spec.num_requests, spec.warmup_requests
    measured = [_http_request(spec, request_body(spec, prompts[i % len(prompts)])) for i in range(n)]
    warm = [_http_request(spec, request_body(spec, prompts[-1 - (i % len(prompts))])) for i in range(w)]
    pool = _Pool(host, port)
    try:
        warmup_errors: list[str] = []
        if warm:
            wrecs = [_Raw(i, 0) for i in range(w)]
            await _closed_loop(pool, warm, wrecs, spec.concurrency or 1, None, spec.request_timeout_s, None)
            warmup_errors = [r.error for r in wrecs if r.error]
        recs = [_Raw(i, prompts[i % len(prompts)].n_tokens) for i in range(n)]
        t_wall = time.time()
        cpu0 = time.process_time()
        t_start = time.perf_counter()
        deadline = t_start + spec.duration_s if spec.duration_s else None
        hook = None
        if on_done is not None:
            def hook(r: _Raw) -> None:
                on_done(finalize(r, spec.api, t_start))
        if spec.request_rate is None:
            await _closed_loop(pool, measured, recs, spec.concurrency or 1, deadline, spec.request_timeout_s, hook)
        else:
            await _poisson(pool, measured, recs, spec.request_rate, spec.concurrency, deadline,
                           spec.request_timeout_s, spec.seed, hook)
        cpu1 = time.process_time()
        sent = [r for r in recs if r.t0 > 0.0]
        t_last = max((r.t_end for r in sent), default=t_start)
    finally:
        pool.close()
    results = tuple(finalize(r, spec.api, t_start) for r in sent)
    return LoadRun(results=results, duration_s=max(t_last - t_start, 1e-9), started_at=t_wall,
                   warmup_errors=tuple(warmup_errors),
                   client_cpu_s=cpu1 - cpu0)


def run_load(spec: LoadSpec, prompts: Sequence[Prompt],
             on_done: Callable[[RequestResult], None] | None = None) -> LoadRun:
    """Blocking wrapper around `arun_load` (its own event loop)."""
    return asyncio.run(arun_load(spec, prompts, on_done))


# ---------------------------------------------------------------------------------------------
# after the run: timestamps and the few parsed events -> RequestResult


def _payloads(seg: bytes) -> list[bytes]:
    """The `data:` payloads in a stretch of a (possibly chunk-framed) SSE body, in order."""
    out = []
    for part in seg.split(_EV)[1:]:
        end = part.find(b"\n")
        out.append((part if end < 0 else part[:end]).strip())
    return out


def _loads(p: bytes) -> dict[str, Any] | None:
    try:
        obj = json.loads(p)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def _has_content(obj: dict[str, Any], api: str) -> bool:
    if api == "generate":
        return True
    choices = obj.get("choices") or []
    if not choices:
        return False
    c = choices[0]
    if api == "chat":
        d = c.get("delta") or {}
        return bool(d.get("content") or d.get("reasoning_content") or d.get("reasoning") or d.get("tool_calls"))
    return bool(c.get("text"))


def _error_text(seg: bytes) -> str | None:
    for p in _payloads(seg):
        if p.startswith(b'{"error"'):
            obj = _loads(p) or {}
            err = obj.get("error")
            msg = err.get("message") if isinstance(err, dict) else err
            return f"error event: {msg}"
    return None


def finalize(rec: _Raw, api: str, t_start: float) -> RequestResult:
    start = rec.t0 - t_start
    e2e = rec.t_end - rec.t0 if rec.t_end else None
    if rec.error is not None:
        return RequestResult(rec.idx, start, None, e2e, (), rec.prompt_tokens, 0, rec.error, events=rec.n_ev)
    if rec.error_ev:
        msg = _error_text(rec.head) or _error_text(rec.tail) or "error event in stream"
        return RequestResult(rec.idx, start, None, e2e, (), rec.prompt_tokens, 0, msg, events=rec.n_ev)
    # non-content events at the start (the chat role chunk) and at the end ([DONE], usage-only chunk)
    k_start = 0
    for p in _payloads(rec.head)[:4]:
        if p == b"[DONE]":
            k_start += 1
            continue
        obj = _loads(p)
        if obj is None or _has_content(obj, api):  # None: cut off by the head's size limit, a long event
            break
        k_start += 1
    k_end = 0
    usage: dict[str, Any] | None = None
    meta: dict[str, Any] | None = None
    for p in reversed(_payloads(rec.tail)):
        if p == b"[DONE]":
            k_end += 1
            continue
        obj = _loads(p)
        if obj is None:
            break
        if obj.get("error"):  # an error event whose marker a read boundary split (the hot path saw no match)
            err = obj["error"]
            msg = err.get("message") if isinstance(err, dict) else err
            return RequestResult(rec.idx, start, None, e2e, (), rec.prompt_tokens, 0, f"error event: {msg}",
                                 events=rec.n_ev)
        if usage is None and isinstance(obj.get("usage"), dict):
            usage = obj["usage"]
        if api == "generate":
            meta = obj.get("meta_info") if isinstance(obj.get("meta_info"), dict) else None
            break
        if _has_content(obj, api):
            break
        k_end += 1
    n_content = max(0, rec.n_ev - k_start - k_end)
    ts: list[float] = []
    for t, k in rec.marks:
        ts.extend([t] * k)
    ts = ts[k_start:k_start + n_content]
    ttft = ts[0] - rec.t0 if ts else None
    itl = tuple(b - a for a, b in zip(ts, ts[1:]))
    prompt_tokens: int | None = rec.prompt_tokens
    out = n_content
    verify: int | None = None
    accept: float | None = None
    if usage is not None:
        prompt_tokens = usage.get("prompt_tokens", prompt_tokens)
        out = int(usage.get("completion_tokens", out))
    if meta is not None:
        prompt_tokens = meta.get("prompt_tokens", prompt_tokens)
        out = int(meta.get("completion_tokens", out))
        v = meta.get("spec_verify_ct")
        if isinstance(v, int) and v > 0:
            verify = v
            accept = out / v
        elif isinstance(meta.get("spec_accept_length"), (int, float)):
            accept = float(meta["spec_accept_length"])
    if not ts:
        return RequestResult(rec.idx, start, None, e2e, (), prompt_tokens, out, "no content events in the response",
                             verify, accept, 0)
    return RequestResult(rec.idx, start, ttft, e2e, itl, prompt_tokens, out, None, verify, accept, n_content)
