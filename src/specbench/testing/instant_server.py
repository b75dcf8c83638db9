"""A minimal OpenAI-compatible streaming server that answers instantly (a test and benchmark fixture).

It stands in for an engine only where the *client* is what is measured or tested: stdlib asyncio, one
process, HTTP/1.1 keep-alive, chunked SSE exactly as uvicorn frames it (one chunk per event).

Endpoints: `POST /v1/completions`, `POST /v1/chat/completions` (stream and not), SGLang-style
`POST /generate` (stream: cumulative `text` + `meta_info` with `completion_tokens`, `spec_verify_ct`),
`GET /health`, `GET /v1/models`, `GET /metrics` (vLLM-named counters, spec-decode ones included),
`GET /get_server_info`.

Every request gets exactly `max_tokens` output tokens (one word each, from WORDS) unless `--max-output`
caps it. `--accept-length A` simulates speculative decoding: each event carries A tokens, one verify step
per event. `--burst N` puts N events in one socket write; `--ttft-ms` / `--itl-ms` pace the stream.
Failure injection for tests: `--fail-every K` (HTTP 500), `--close-every K` (connection dropped
mid-stream), `--error-event-every K` (an SSE `{"error": ...}` event mid-stream, as vLLM sends); a misbehaving
server: `--malformed-every K` (an event that is not JSON mid-stream), `--truncate-every K` (the stream ends cleanly
at the HTTP level without `[DONE]`, after half its events), `--stall-every K` (the stream stops after half its events
and the connection stays open), `--no-usage` (no usage chunk even when asked). `--api-key KEY` is taken and echoed
in the startup line, as SGLang prints its server_args (tests check that no copy of it is kept).
`--record FILE` appends every POST body it receives to FILE, one `{"path": ..., "body": ...}` JSON line each
(tests read what the client really sent).

    python -m specbench.testing.instant_server --port 0 --burst 16    # prints "READY <port>"
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys
from dataclasses import dataclass
from typing import Any

WORDS = (
    "the of and to in is that for it as was with be by on not he this are or his from at which but have an they"
    " you were her she there been one all we their has would when if so no will more can out up into do any your"
    " what about time"
).split()


@dataclass(frozen=True)
class Options:
    burst: int = 16
    ttft_ms: float = 0.0
    itl_ms: float = 0.0
    max_output: int | None = None
    default_output: int = 16
    accept_length: int = 1
    num_spec_tokens: int = 3
    fail_every: int = 0
    close_every: int = 0
    error_event_every: int = 0
    malformed_every: int = 0
    truncate_every: int = 0
    stall_every: int = 0
    no_usage: bool = False
    model: str = "instant"
    record: str | None = None


class Stats:
    __slots__ = ("requests", "prompt_tokens", "generation_tokens", "drafts", "draft_tokens", "accepted", "success",
                 "per_pos")

    def __init__(self) -> None:
        self.requests = self.prompt_tokens = self.generation_tokens = 0
        self.drafts = self.draft_tokens = self.accepted = self.success = 0
        self.per_pos: list[int] = []  # accepted tokens at draft position 0, 1, ... (vLLM's per-position counter)

    def prometheus(self, model: str) -> bytes:
        lab = f'{{model_name="{model}",engine="0"}}'
        rows = [
            ("vllm:request_success_total", self.success),
            ("vllm:prompt_tokens_total", self.prompt_tokens),
            ("vllm:generation_tokens_total", self.generation_tokens),
            ("vllm:spec_decode_num_drafts_total", self.drafts),
            ("vllm:spec_decode_num_draft_tokens_total", self.draft_tokens),
            ("vllm:spec_decode_num_accepted_tokens_total", self.accepted),
        ]
        out = []
        for name, v in rows:
            out.append(f"# HELP {name} counter\n# TYPE {name} counter\n{name}{lab} {float(v)}\n")
        for i, v in enumerate(self.per_pos):
            out.append(f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{model_name="{model}",engine="0",'
                       f'position="{i}"}} {float(v)}\n')
        out.append(f"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{lab} 0.0\n")
        return "".join(out).encode()


def _chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def _sse(obj: Any) -> bytes:
    return _chunk(b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n")


_DONE = _chunk(b"data: [DONE]\n\n")
_END = b"0\r\n\r\n"
_SSE_HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
             b"transfer-encoding: chunked\r\ncache-control: no-cache\r\n\r\n")


def _text(i: int, k: int) -> str:
    return "".join(" " + WORDS[(i + j) % len(WORDS)] for j in range(k))


def _steps(n: int, a: int) -> list[int]:
    """Tokens per event: `a` each, the remainder in the last one."""
    return [min(a, n - s) for s in range(0, n, a)]


class Server:
    def __init__(self, opts: Options) -> None:
        self.o = opts
        self.stats = Stats()
        self.count = 0
        self._cache: dict[tuple[str, int], list[bytes]] = {}

    # ---- event bodies, cached per (api, n) ------------------------------------------------
    def events(self, api: str, n: int) -> list[bytes]:
        key = (api, n)
        if key in self._cache:
            return self._cache[key]
        steps = _steps(n, self.o.accept_length)
        evs: list[bytes] = []
        pos = 0
        m = self.o.model
        if api == "chat":
            evs.append(_sse({"id": "chatcmpl-0", "object": "chat.completion.chunk", "created": 0, "model": m,
                             "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                          "logprobs": None, "finish_reason": None}]}))
        for k, size in enumerate(steps):
            last = k == len(steps) - 1
            fin = "length" if last else None
            if api == "chat":
                obj: dict[str, Any] = {"id": "chatcmpl-0", "object": "chat.completion.chunk", "created": 0, "model": m,
                                       "choices": [{"index": 0, "delta": {"content": _text(pos, size)},
                                                    "logprobs": None, "finish_reason": fin}]}
            elif api == "completions":
                obj = {"id": "cmpl-0", "object": "text_completion", "created": 0, "model": m,
                       "choices": [{"index": 0, "text": _text(pos, size), "logprobs": None, "finish_reason": fin}]}
            else:  # generate: cumulative text, meta_info per event (SGLang native)
                obj = {"text": _text(0, pos + size),
                       "meta_info": {"id": "0", "finish_reason": {"type": "length", "length": n} if last else None,
                                     "prompt_tokens": -1, "completion_tokens": pos + size, "cached_tokens": 0,
                                     "spec_verify_ct": k + 1 if self.o.accept_length > 1 else 0}}
            pos += size
            evs.append(_sse(obj))
        if len(self._cache) < 4096:
            self._cache[key] = evs
        return evs

    def tail(self, api: str, n: int, prompt_tokens: int, usage: bool) -> bytes:
        if api in ("chat", "completions") and usage and not self.o.no_usage:
            obj = {"id": "0", "object": "chat.completion.chunk" if api == "chat" else "text_completion", "created": 0,
                   "model": self.o.model, "choices": [],
                   "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + n, "completion_tokens": n}}
            return _sse(obj) + _DONE + _END
        return _DONE + _END

    def account(self, n: int, prompt_tokens: int) -> None:
        s = self.stats
        s.success += 1
        s.prompt_tokens += prompt_tokens
        s.generation_tokens += n
        if self.o.accept_length > 1:
            sizes = _steps(n, self.o.accept_length)
            steps = len(sizes)
            for k in sizes:  # a step of k tokens accepted its drafts at positions 0 .. k-2
                s.per_pos += [0] * max(0, k - 1 - len(s.per_pos))
                for i in range(k - 1):
                    s.per_pos[i] += 1
            s.drafts += steps
            s.draft_tokens += steps * self.o.num_spec_tokens
            s.accepted += n - steps


def _prompt_tokens(body: dict[str, Any]) -> int:
    """The server has no tokenizer: token ids are counted, text is estimated at 4 bytes per token."""
    if "input_ids" in body:
        return len(body["input_ids"])
    p = body.get("prompt")
    if isinstance(p, list) and p and isinstance(p[0], int):
        return len(p)
    if "messages" in body:
        return max(1, sum(len(str(m.get("content", ""))) for m in body["messages"]) // 4)
    return max(1, len(str(p if p is not None else body.get("text", ""))) // 4)


def _json_response(status: str, obj: Any, close: bool = False) -> bytes:
    body = json.dumps(obj).encode()
    conn = b"connection: close\r\n" if close else b""
    return (b"HTTP/1.1 %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n%s\r\n"
            % (status.encode(), len(body), conn)) + body


class _Proto(asyncio.Protocol):
    def __init__(self, srv: Server) -> None:
        self.srv = srv
        self.buf = b""
        self.t: asyncio.Transport | None = None
        self.busy = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.t = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while not self.busy:
            h = self.buf.find(b"\r\n\r\n")
            if h < 0:
                return
            head = self.buf[:h].decode("latin-1")
            lines = head.split("\r\n")
            try:
                method, path, _ = lines[0].split(" ", 2)
            except ValueError:
                self._send(_json_response("400 Bad Request", {"error": "bad request line"}, close=True))
                assert self.t is not None
                self.t.close()
                return
            length = 0
            for line in lines[1:]:
                k, _, v = line.partition(":")
                if k.strip().lower() == "content-length":
                    length = int(v.strip())
            if len(self.buf) < h + 4 + length:
                return
            body = self.buf[h + 4:h + 4 + length]
            self.buf = self.buf[h + 4 + length:]
            self.handle(method, path.split("?", 1)[0], body)

    def _send(self, b: bytes) -> None:
        if self.t is not None and not self.t.is_closing():
            self.t.write(b)

    def handle(self, method: str, path: str, raw: bytes) -> None:
        srv, o = self.srv, self.srv.o
        if method == "GET":
            if path == "/health":
                self._send(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
            elif path == "/v1/models":
                self._send(_json_response("200 OK", {"object": "list", "data": [
                    {"id": o.model, "object": "model", "owned_by": "specbench", "max_model_len": 32768}]}))
            elif path == "/metrics":
                body = srv.stats.prometheus(o.model)
                self._send(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: %d\r\n\r\n"
                           % len(body) + body)
            elif path == "/get_server_info":
                self._send(_json_response("200 OK", {"model_path": o.model, "context_length": 32768,
                                                     "speculative_num_draft_tokens": o.num_spec_tokens + 1,
                                                     "instant_server": True}))
            else:
                self._send(_json_response("404 Not Found", {"detail": "Not Found"}))
            return
        api = {"/v1/completions": "completions", "/v1/chat/completions": "chat", "/generate": "generate"}.get(path)
        if method != "POST" or api is None:
            self._send(_json_response("404 Not Found", {"detail": "Not Found"}))
            return
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            self._send(_json_response("400 Bad Request", {"object": "error", "message": "body is not JSON",
                                                          "type": "BadRequestError", "code": 400}))
            return
        if o.record:
            with open(o.record, "a", encoding="utf-8") as f:
                f.write(json.dumps({"path": path, "body": body}) + "\n")
        srv.count += 1
        nth = srv.count
        srv.stats.requests += 1
        if o.fail_every and nth % o.fail_every == 0:
            self._send(_json_response("500 Internal Server Error", {"object": "error", "message":
                                      f"injected failure on request {nth}", "type": "InternalServerError",
                                      "code": 500}))
            return
        if api == "generate":
            sp = body.get("sampling_params") or {}
            n = int(sp.get("max_new_tokens", o.default_output))
        else:
            n = int(body.get("max_completion_tokens") or body.get("max_tokens") or o.default_output)
        if o.max_output is not None:
            n = min(n, o.max_output)
        n = max(1, n)
        ptoks = _prompt_tokens(body)
        usage = bool((body.get("stream_options") or {}).get("include_usage"))
        if not body.get("stream"):
            self._send(self._whole(api, n, ptoks))
            srv.account(n, ptoks)
            return
        evs = srv.events(api, n)
        if api == "generate":  # prompt_tokens is per request: patch it into the cached events
            evs = [e.replace(b'"prompt_tokens":-1', b'"prompt_tokens":%d' % ptoks) for e in evs]
            evs = [_chunk(e[e.find(b"\r\n") + 2:-2]) for e in evs]
        tail = srv.tail(api, n, ptoks, usage)
        faults = {what: len(evs) // 2 for what, every in (("close", o.close_every), ("error", o.error_event_every),
                                                          ("malformed", o.malformed_every),
                                                          ("truncate", o.truncate_every), ("stall", o.stall_every))
                  if every and nth % every == 0}
        if o.ttft_ms or o.itl_ms or faults:
            self.busy = True
            asyncio.ensure_future(self._paced(evs, tail, faults, n, ptoks))
            return
        b = o.burst
        self._send(_SSE_HEAD)
        if b >= len(evs):
            self._send(b"".join(evs) + tail)
        else:
            for i in range(0, len(evs), b):
                self._send(b"".join(evs[i:i + b]))
            self._send(tail)
        srv.account(n, ptoks)

    async def _paced(self, evs: list[bytes], tail: bytes, faults: dict[str, int], n: int, ptoks: int) -> None:
        o = self.srv.o
        try:
            self._send(_SSE_HEAD)
            if o.ttft_ms:
                await asyncio.sleep(o.ttft_ms / 1000)
            for i in range(0, len(evs), o.burst):
                if i and o.itl_ms:
                    await asyncio.sleep(o.itl_ms / 1000)
                group = evs[i:i + o.burst]
                for j, e in enumerate(group):
                    if await self._fault(faults, i + j):
                        return
                    self._send(e)
            self._send(tail)
            self.srv.account(n, ptoks)
        finally:
            self.busy = False
            if self.buf:
                self.data_received(b"")

    async def _fault(self, faults: dict[str, int], k: int) -> bool:
        """Inject the fault due at event `k`; True when the response ends here."""
        if faults.get("close") == k:
            assert self.t is not None
            self.t.abort()
            return True
        if faults.get("error") == k:
            self._send(_sse({"error": {"object": "error", "message": "injected mid-stream error",
                                       "type": "InternalServerError", "code": 500}}) + _DONE + _END)
            return True
        if faults.get("malformed") == k:
            self._send(_chunk(b"data: <html>not json</html>\n\n"))  # then the stream goes on as if nothing happened
        if faults.get("truncate") == k:
            self._send(_END)  # the last chunk: a clean end, with no [DONE]
            return True
        if faults.get("stall") == k:
            await asyncio.sleep(3600)  # the client's request timeout ends it
            return True
        return False

    def _whole(self, api: str, n: int, ptoks: int) -> bytes:
        text = _text(0, n)
        usage = {"prompt_tokens": ptoks, "completion_tokens": n, "total_tokens": ptoks + n}
        if api == "chat":
            obj: dict[str, Any] = {"id": "chatcmpl-0", "object": "chat.completion", "created": 0, "model": self.srv.o.model,
                                   "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                                "finish_reason": "length"}], "usage": usage}
        elif api == "completions":
            obj = {"id": "cmpl-0", "object": "text_completion", "created": 0, "model": self.srv.o.model,
                   "choices": [{"index": 0, "text": text, "finish_reason": "length"}], "usage": usage}
        else:
            a = self.srv.o.accept_length
            obj = {"text": text, "meta_info": {"prompt_tokens": ptoks, "completion_tokens": n,
                                               "spec_verify_ct": math.ceil(n / a) if a > 1 else 0,
                                               "finish_reason": {"type": "length", "length": n}}}
        return _json_response("200 OK", obj)


async def serve(host: str, port: int, opts: Options, ready: Any = None) -> None:
    srv = Server(opts)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Proto(srv), host, port, reuse_address=True, backlog=1024)
    actual = server.sockets[0].getsockname()[1]
    print(f"READY {actual}", flush=True)
    async with server:
        await server.serve_forever()


def parse_args(argv: list[str] | None = None) -> tuple[str, int, Options]:
    p = argparse.ArgumentParser(prog="python -m specbench.testing.instant_server", description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 picks a free port; the line 'READY <port>' tells which")
    p.add_argument("--burst", type=int, default=16, help="SSE events per socket write (default 16)")
    p.add_argument("--ttft-ms", type=float, default=0.0)
    p.add_argument("--itl-ms", type=float, default=0.0, help="delay between bursts")
    p.add_argument("--max-output", type=int, default=None, help="cap on output tokens per request")
    p.add_argument("--default-output", type=int, default=16, help="output tokens when max_tokens is absent")
    p.add_argument("--accept-length", type=int, default=1, help="tokens per event (simulated verify step)")
    p.add_argument("--num-spec-tokens", type=int, default=3, help="draft tokens per verify step, for /metrics")
    p.add_argument("--fail-every", type=int, default=0)
    p.add_argument("--close-every", type=int, default=0)
    p.add_argument("--error-event-every", type=int, default=0)
    p.add_argument("--malformed-every", type=int, default=0, help="a non-JSON event mid-stream every K requests")
    p.add_argument("--truncate-every", type=int, default=0, help="end the stream without [DONE] every K requests")
    p.add_argument("--stall-every", type=int, default=0, help="stop the stream half-way every K requests")
    p.add_argument("--no-usage", action="store_true", help="never send the usage chunk")
    p.add_argument("--api-key", default=None, help="taken and echoed at startup (as SGLang prints server_args)")
    p.add_argument("--model", default="instant")
    p.add_argument("--record", default=None, help="append every POST body received to this file (JSON lines)")
    a = p.parse_args(argv)
    if a.burst < 1 or a.accept_length < 1:
        p.error("--burst and --accept-length must be >= 1")
    opts = Options(burst=a.burst, ttft_ms=a.ttft_ms, itl_ms=a.itl_ms, max_output=a.max_output,
                   default_output=a.default_output, accept_length=a.accept_length, num_spec_tokens=a.num_spec_tokens,
                   fail_every=a.fail_every, close_every=a.close_every, error_event_every=a.error_event_every,
                   malformed_every=a.malformed_every, truncate_every=a.truncate_every, stall_every=a.stall_every,
                   no_usage=a.no_usage, model=a.model, record=a.record)
    if a.api_key is not None:
        print(f"server_args=ServerArgs(model_path={a.model!r}, api_key={a.api_key!r}, port={a.port})", flush=True)
    return a.host, a.port, opts


def main(argv: list[str] | None = None) -> None:
    host, port, opts = parse_args(argv)
    if os.environ.get("SPECBENCH_UVLOOP") == "1":
        try:
            import uvloop  # type: ignore[import-not-found]

            uvloop.install()
        except ImportError:
            pass
    try:
        asyncio.run(serve(host, port, opts))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
