"""The instant server's socket side: one asyncio protocol per connection that reads HTTP/1.1 requests (keep-alive,
`Authorization` when a key is enforced) and answers each endpoint, instantly, paced, through the fault modes or
through the ground-truth scheduler; `Server` holds what the connections share (counters, cached event bodies, the
names it serves). What it sends, as bytes: instant_bodies.py; the faults: instant_faults.py; the knobs:
instant_options.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from specbench.testing import instant_faults, instant_truth
from specbench.testing.instant_bodies import (
    DONE,
    END,
    SSE_HEAD,
    Stats,
    chunk,
    empty_event,
    field,
    json_response,
    prompt_salt,
    sse,
    stream_events,
    stream_tail,
    truth_event,
    whole_response,
)
from specbench.testing.instant_options import Options


class Server:
    def __init__(self, opts: Options) -> None:
        self.o = opts
        self.stats = Stats()
        self.count = 0
        self._cache: dict[tuple[str, int, bool, int, str], list[bytes]] = {}
        self.sched: instant_truth.Scheduler | None = None
        if opts.step_ms > 0:
            self.sched = instant_truth.Scheduler(opts.step_ms / 1000, opts.max_running, opts.accept_rates, opts.seed,
                                                 opts.step_ms_per_running / 1000)

    # ---- event bodies, cached per (api, n) ------------------------------------------------
    def events(self, api: str, n: int, ids: bool = False, salt: int = 0, model: str = "") -> list[bytes]:
        key = (api, n, ids, salt, model)
        if key in self._cache:
            return self._cache[key]
        evs = stream_events(api, n, self.o.accept_length, model or self.o.model, ids, self.o.json_style, salt)
        if self.o.empty_events and api != "generate" and evs:
            empty = empty_event(api, model or self.o.model, self.o.json_style)
            evs = [x for e in evs[:-1] for x in (e, empty)] + evs[-1:]
        if len(self._cache) < 4096:
            self._cache[key] = evs
        return evs

    def tail(self, api: str, n: int, prompt_tokens: int | None, usage: bool, model: str = "") -> bytes:
        return stream_tail(api, n, prompt_tokens, usage and not self.o.no_usage, model or self.o.model,
                           self.o.json_style)

    def served_name(self) -> str:
        """What /v1/models lists: the switched model once `switch_after` answers were sent."""
        o = self.o
        if o.switch_model and self.count > o.switch_after:
            return o.switch_model
        return o.models_name or o.model

    def answer_model(self, body: Mapping[str, object]) -> str:
        """The model an answer names: the one the request named (as vLLM and SGLang echo it), unless lying."""
        o = self.o
        if o.answer_model:
            return o.answer_model
        if o.switch_model and self.count > o.switch_after:
            return o.switch_model
        sent = body.get("model")
        return sent if isinstance(sent, str) and sent else self.served_name()

    def account(self, n: int, prompt_tokens: int | None) -> None:
        self.stats.account(n, prompt_tokens, self.o.accept_length, self.o.num_spec_tokens)


def _prompt_tokens(body: Mapping[str, object]) -> int | None:
    """The server has no tokenizer: token ids are counted; text is not (reported as null: unknown, never a guess)."""
    if "input_ids" in body:
        ids = body["input_ids"]
        return len(ids) if isinstance(ids, (list, str)) else None
    p = body.get("prompt")
    if isinstance(p, list) and p and isinstance(p[0], int):
        return len(p)
    return None


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
                self._send(json_response("400 Bad Request", {"error": "bad request line"}, close=True))
                assert self.t is not None
                self.t.close()
                return
            length = 0
            auth = ""
            for line in lines[1:]:
                k, _, v = line.partition(":")
                if k.strip().lower() == "content-length":
                    length = int(v.strip())
                elif k.strip().lower() == "authorization":
                    auth = v.strip()
            if len(self.buf) < h + 4 + length:
                return
            body = self.buf[h + 4:h + 4 + length]
            self.buf = self.buf[h + 4 + length:]
            key = self.srv.o.require_key
            if key and path.startswith(("/v1", "/generate")) and auth != f"Bearer {key}":
                self._send(json_response("401 Unauthorized", {"error": "Unauthorized"}))
                continue
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
                self._send(json_response("200 OK", {"object": "list", "data": [
                    {"id": srv.served_name(), "object": "model", "owned_by": "specbench",
                     "max_model_len": 32768}]}))
            elif path == "/metrics":
                body = srv.stats.prometheus(o.model, "sglang" if srv.sched is not None and o.metrics == "sglang"
                                            else "vllm")
                self._send(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: %d\r\n\r\n"
                           % len(body) + body)
            elif path == "/get_server_info":
                info: dict[str, object] = {"model_path": o.model, "context_length": 32768,
                                           "speculative_num_draft_tokens": o.num_spec_tokens + 1,
                                           "instant_server": True}
                if srv.sched is not None:  # as SGLang 0.5.15.post1's /server_info reports its effective cap
                    info["dp_size"] = 1
                    info["internal_states"] = [{"effective_max_running_requests_per_dp":
                                                o.report_cap if o.report_cap is not None else o.max_running}]
                self._send(json_response("200 OK", info))
            else:
                self._send(json_response("404 Not Found", {"detail": "Not Found"}))
            return
        api = {"/v1/completions": "completions", "/v1/chat/completions": "chat", "/generate": "generate"}.get(path)
        if method != "POST" or api is None:
            self._send(json_response("404 Not Found", {"detail": "Not Found"}))
            return
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            self._send(json_response("400 Bad Request", {"object": "error", "message": "body is not JSON",
                                                          "type": "BadRequestError", "code": 400}))
            return
        if o.record:
            with open(o.record, "a", encoding="utf-8") as f:
                f.write(json.dumps({"path": path, "body": body}) + "\n")
        srv.count += 1
        nth = srv.count
        srv.stats.requests += 1
        if o.fail_every and nth % o.fail_every == 0:
            self._send(json_response("500 Internal Server Error", {"object": "error", "message":
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
        ptoks = _prompt_tokens(body) if o.prompt_tokens_lie is None else o.prompt_tokens_lie
        salt = 0 if o.same_answer else prompt_salt(body)
        model = srv.answer_model(body)
        usage = bool((body.get("stream_options") or {}).get("include_usage"))
        if srv.sched is not None:  # every request through the scheduler, the readiness probe's too
            self.busy = True
            asyncio.ensure_future(self._truth(api, n, ptoks, usage, bool(body.get("return_token_ids")),
                                              bool(body.get("stream")), salt, model))
            return
        if not body.get("stream"):
            self._send(whole_response(api, n, ptoks, model, o.accept_length))
            srv.account(n, ptoks)
            return
        evs = srv.events(api, n, bool(body.get("return_token_ids")), salt, model)
        if api == "generate":  # prompt_tokens is per request: patch it into the cached events
            mark = field("prompt_tokens", -1, o.json_style)
            evs = [e.replace(mark, field("prompt_tokens", ptoks, o.json_style)) for e in evs]
            evs = [chunk(e[e.find(b"\r\n") + 2:-2]) for e in evs]
        tail = srv.tail(api, n, ptoks, usage, model)
        faults = instant_faults.due(o.fault_every(), nth, len(evs))
        if o.ttft_ms or o.itl_ms or faults:
            self.busy = True
            asyncio.ensure_future(self._paced(evs, tail, faults, n, ptoks))
            return
        b = o.burst
        self._send(SSE_HEAD)
        if b >= len(evs):
            self._send(b"".join(evs) + tail)
        else:
            for i in range(0, len(evs), b):
                self._send(b"".join(evs[i:i + b]))
            self._send(tail)
        srv.account(n, ptoks)

    async def _paced(self, evs: list[bytes], tail: bytes, faults: dict[str, int], n: int, ptoks: int | None) -> None:
        o = self.srv.o
        try:
            self._send(SSE_HEAD)
            if o.ttft_ms:
                await asyncio.sleep(o.ttft_ms / 1000)
            for i in range(0, len(evs), o.burst):
                if i and o.itl_ms:
                    await asyncio.sleep(o.itl_ms / 1000)
                group = evs[i:i + o.burst]
                for j, e in enumerate(group):
                    if await instant_faults.inject(faults, i + j, self._send, self.t, o.json_style):
                        return
                    self._send(e)
            self._send(tail)
            self.srv.account(n, ptoks)
        finally:
            self.busy = False
            if self.buf:
                self.data_received(b"")

    async def _truth(self, api: str, n: int, ptoks: int | None, usage: bool, ids: bool, stream: bool = True,
                     salt: int = 0, model: str = "") -> None:
        """One answer through the ground-truth scheduler (instant_truth.py), streamed with the lies asked for, or
        whole (not streamed: the readiness probe) once its last step is done."""
        srv, o = self.srv, self.srv.o
        sched = srv.sched
        assert sched is not None
        try:
            stop_at = max(1, int(n * o.early_eos)) if o.early_eos is not None else n
            job = sched.submit(stop_at)
            if not stream:
                while await job.steps.get():
                    pass
                self._send(whole_response(api, stop_at, ptoks, model or o.model, 1))
                self._account_truth(ptoks)
                return
            self._send(SSE_HEAD)
            if api == "chat":
                self._send(truth_event(api, 0, 0, False, model or o.model, ids, None, style=o.json_style))
            pos = 0
            while True:
                k = await job.steps.get()
                if k == 0:
                    break
                last = pos + k >= stop_at
                meta: dict[str, object] | None = None
                if api == "generate":
                    meta = {"id": "0", "prompt_tokens": ptoks, "completion_tokens": pos + k, "cached_tokens": 0,
                            "finish_reason": ({"type": "length", "length": n} if stop_at == n else
                                              {"type": "stop", "matched": 0}) if last else None}
                    if last:
                        assert meta is not None
                        meta["completion_tokens"] = o.lie(stop_at)
                        if sched.rates:
                            meta["spec_verify_ct"] = job.verify_steps
                            meta["spec_correct_drafts_histogram"] = list(job.accepted_hist)
                if pos and o.empty_events and api != "generate":
                    self._send(empty_event(api, model or o.model, o.json_style))
                self._send(truth_event(api, pos, k, last, model or o.model, ids, meta, stop_at == n, o.json_style,
                                       salt))
                pos += k
            tail = b""
            if api in ("chat", "completions") and usage and not o.no_usage:
                tail = sse({"id": "0", "object": "chat.completion.chunk" if api == "chat" else "text_completion",
                            "created": 0, "model": model or o.model, "choices": [],
                            "usage": {"prompt_tokens": ptoks, "completion_tokens": o.lie(stop_at),
                                      "total_tokens": (ptoks or 0) + stop_at}}, o.json_style)
            self._send(tail + DONE + END)
            self._account_truth(ptoks)
        finally:
            self.busy = False
            if self.buf:
                self.data_received(b"")


    def _account_truth(self, ptoks: int | None) -> None:
        """The counters /metrics shows, from what the scheduler did (every request it served), and the truth file."""
        srv = self.srv
        sched = srv.sched
        assert sched is not None
        st = srv.stats
        st.success += 1
        st.prompt_tokens += ptoks or 0
        lie = srv.o.accepted_scale
        st.generation_tokens, st.drafts = sched.generated, sched.verify_steps
        st.accepted = round(sched.accepted * lie)
        st.draft_tokens = sched.verify_steps * len(sched.rates)
        st.per_pos = [round(x * lie) for x in sched.per_pos]
        sched.write(srv.o.truth_file)


async def serve(host: str, port: int, opts: Options, ready: Any = None) -> None:
    srv = Server(opts)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Proto(srv), host, port, reuse_address=True, backlog=1024)
    actual = server.sockets[0].getsockname()[1]
    print(f"READY {actual}", flush=True)
    async with server:
        await server.serve_forever()
