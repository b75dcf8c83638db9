"""The hot path: one asyncio Protocol per keep-alive connection, one streamed response at a time.

For every socket read it takes one `perf_counter()` timestamp and counts SSE events with `bytes.count(EV)`;
it keeps the first bytes (`head`) and the last reads (`tail`) of the body for `sse.finalize` to parse after the
run. HTTP framing: chunked, Content-Length or until-close bodies, markers and the last chunk split over reads.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import deque

EV = b"\ndata:"
KEEP = 6  # event starts kept from the end of a response (one or two more than ever parsed: markers can straddle reads)
HEAD_BYTES = 4096
LAST_CHUNK = b"\r\n0\r\n\r\n"
_JSON_EV = b"\ndata: {"  # how both engines frame an event; anything else is checked by _well_formed
_DONE_EV = b"\ndata: [DONE]"  # the stream's last event (sse.py: both engines end every stream with it)


# an event whose payload starts with neither `{` (a JSON object) nor `[` ([DONE]), after any spaces or tabs (SSE
# strips one space; JSON allows leading whitespace)
_BAD_EV = re.compile(rb"\ndata:[ \t]*[^ \t{\[]")
EDGE = 16  # bytes of the stream kept across reads: longer than any marker above


class Raw:
    """What the hot path records about one request; turned into a RequestResult after the run."""

    __slots__ = ("idx", "prompt_tokens", "t0", "t_end", "marks", "n_ev", "head", "reads", "reads_ev", "tail",
                 "status", "error", "error_ev", "err_body", "bad_ev", "body", "max_tokens", "ids", "digest")

    def __init__(self, idx: int, prompt_tokens: int, max_tokens: int | None = None, keep_body: bool = False) -> None:
        self.idx = idx
        self.prompt_tokens = prompt_tokens
        self.max_tokens = max_tokens  # the output tokens the request asked for (max_tokens / max_new_tokens)
        # every body read, by reference (no copy), for counting the received tokens after the run (load/counting.py)
        self.body: list[bytes] | None = [] if keep_body else None
        self.ids: int | None = None  # the token ids the body carried, counted as the request ended (client._Keeper)
        self.digest: str | None = None  # and their digest (load/honesty.py: identical answers to different prompts)
        self.t0 = self.t_end = 0.0
        self.marks: list[tuple[float, int]] = []
        self.n_ev = 0
        self.head = b""  # the first bytes of the body (the first events: the chat role chunk)
        self.reads: deque[tuple[bytes, int]] = deque()  # the last reads, enough to hold the last KEEP events
        self.reads_ev = 0
        self.tail = b""
        self.status = 0
        self.error: str | None = None
        self.error_ev = False
        self.err_body = b""
        self.bad_ev = 0  # events whose payload is neither a JSON object nor [DONE] (sse.finalize: a request error)


HEAD, CHUNKED, LENGTH, UNTIL_CLOSE, IDLE = range(5)  # Conn.state


class Conn(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.state = IDLE
        self.rec: Raw | None = None
        self.fut: asyncio.Future[None] | None = None
        self.hbuf = b""
        self.edge = b""  # the last EDGE bytes of the stream: event markers and the last chunk split across reads
        self.remaining = 0
        self.keep_alive = True
        self.closed = False
        self.timer: asyncio.TimerHandle | None = None
        self.check_next = False  # the last read may have ended inside an event start (_check_events)

    # asyncio callbacks ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        rec = self.rec
        if rec is None:
            return
        if self.state == UNTIL_CLOSE:
            self._finish(time.perf_counter())
        elif self.state == HEAD:
            self._fail(f"connection closed before a response ({exc or 'EOF'})")
        else:
            self._fail(f"connection closed mid-stream after {rec.n_ev} events ({exc or 'EOF'})")

    def data_received(self, data: bytes) -> None:
        t = time.perf_counter()
        if self.state == HEAD:
            self._headers(t, data)
        else:
            self._feed(t, data)

    def _feed(self, t: float, data: bytes) -> None:
        """Body bytes read at time `t` (the headers' read time for body bytes that came with them)."""
        state = self.state
        if state == CHUNKED:
            self._body(t, data)
            # the last chunk `0\r\n\r\n` after a chunk's CRLF; it may come split over reads
            done = data.endswith(LAST_CHUNK) if len(data) >= 7 else (self.edge + data).endswith(LAST_CHUNK)
            self._edge(data)
            if done:
                self._finish(t)
        elif state == LENGTH:
            self._body(t, data)
            self._edge(data)
            self.remaining -= len(data)
            if self.remaining <= 0:
                self._finish(t)
        elif state == UNTIL_CLOSE:
            self._body(t, data)
            self._edge(data)

    def _edge(self, data: bytes) -> None:
        """The stream's last EDGE bytes, however small the reads."""
        self.edge = data[-EDGE:] if len(data) >= EDGE else (self.edge + data)[-EDGE:]

    # parsing ------------------------------------------------------------------------------
    def _body(self, t: float, data: bytes) -> None:
        rec = self.rec
        assert rec is not None
        if rec.status != 200:
            rec.err_body += data[:2048]
            return
        n = data.count(EV)
        if self.edge:  # a marker that started in the previous read(s)
            n += (self.edge[-5:] + data[:5]).count(EV)
        if n:
            rec.marks.append((t, n))
            rec.n_ev += n
        if n or self.check_next:
            self._check_events(rec, data, n)
        if len(rec.head) < HEAD_BYTES:
            rec.head += data[:HEAD_BYTES]
        if rec.body is not None:
            rec.body.append(data)
        # keep references to the last reads (no copy) while they hold the last KEEP event starts
        reads = rec.reads
        reads.append((data, n))
        rec.reads_ev += n
        while len(reads) > 1 and rec.reads_ev - reads[0][1] >= KEEP:
            rec.reads_ev -= reads.popleft()[1]
        if b'{"error"' in data:
            rec.error_ev = True

    def _check_events(self, rec: Raw, data: bytes, n: int) -> None:
        """Count malformed event starts completed in this read. Fast path: every event of the read is wholly in it
        and starts `data: {`. Else the stream's last bytes + this read are searched (a match is counted in the read
        where it ends), and the next read is searched too when this one may end inside an event start. The read
        that ends the stream takes the fast path too when its one other event is the closing `data: [DONE]`."""
        if n:
            good = data.count(_JSON_EV)
            # the read that ends the stream also holds [DONE]: one scan of its last bytes, not a regex over the read
            if good == n or (good == n - 1 and data.find(_DONE_EV, max(0, len(data) - 64)) >= 0):
                self.check_next = False
                return
        w = self.edge + data
        cut = len(self.edge)
        rec.bad_ev += sum(1 for m in _BAD_EV.finditer(w) if m.end() > cut)
        self.check_next = len(data) < 8 or b"\n" in data[-7:]

    def _headers(self, t: float, data: bytes) -> None:
        buf = self.hbuf + data if self.hbuf else data  # no copy of a read that holds the headers and the body
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
            self.state = CHUNKED
            if rest:
                self._feed(t, rest)
        elif length >= 0:
            self.state = LENGTH
            self.remaining = length
            if length == 0:
                self._finish(t)
            elif rest:
                self._feed(t, rest)
        else:
            self.state = UNTIL_CLOSE
            self.keep_alive = False
            if rest:
                self._feed(t, rest)

    # lifecycle -------------------------------------------------------------------------------
    def start(self, rec: Raw, request: bytes, timeout_s: float) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        self.rec = rec
        self.fut = loop.create_future()
        self.state = HEAD
        self.edge = b""
        self.check_next = False
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
        for _ in range(KEEP - 1):  # [DONE], usage, an empty finish chunk, the last content event(s)
            j = seg.rfind(EV, 0, i)
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
        self.state = IDLE
        self.rec = None
        if not self.keep_alive and self.transport is not None:
            self.transport.close()
            self.closed = True
        fut, self.fut = self.fut, None
        if fut is not None and not fut.done():
            fut.set_result(None)


class Pool:
    """Idle keep-alive connections to one host."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.idle: list[Conn] = []

    async def get(self) -> Conn:
        while self.idle:
            c = self.idle.pop()
            if not c.closed:
                return c
        loop = asyncio.get_running_loop()
        _, conn = await loop.create_connection(Conn, self.host, self.port)
        return conn

    def put(self, c: Conn) -> None:
        if not c.closed:
            self.idle.append(c)

    def close(self) -> None:
        for c in self.idle:
            if c.transport is not None:
                c.transport.close()
        self.idle.clear()


async def one_request(pool: Pool, rec: Raw, request: bytes, timeout_s: float) -> None:
    try:
        conn = await pool.get()
    except OSError as exc:
        rec.t0 = rec.t_end = time.perf_counter()
        rec.error = f"cannot connect to {pool.host}:{pool.port}: {exc.strerror or exc}"
        return
    await conn.start(rec, request, timeout_s)
    pool.put(conn)
