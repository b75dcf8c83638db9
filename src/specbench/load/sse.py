"""After the run: a request's timestamps and the few SSE events kept of it (the first ones, to skip the chat
role chunk; the last ones: `usage`, SGLang `meta_info`, `[DONE]`) -> its `RequestResult`.

A response is measured only when it is whole: an event that is not a JSON object (the hot path counts those whose
payload does not start like one; the kept last events are parsed), a stream that ends without `[DONE]` (both
engines send it on every endpoint: vllm/entrypoints/openai/serving_completion.py, sglang/srt/entrypoints/http_server
.py), or, where the request asked for it (`stream_options.include_usage`), without the usage chunk, is a request
error with its reason, never a shorter measurement."""

from __future__ import annotations

import dataclasses
import json
import operator
from dataclasses import dataclass

from specbench.load import counting, honesty
from specbench.load.results import RequestResult
from specbench.load.stream import EV, Raw


def _payloads(seg: bytes, limit: int = -1) -> list[bytes]:
    """The `data:` payloads in a stretch of a (possibly chunk-framed) SSE body, in order (the first `limit` only)."""
    if seg.startswith(b"data:"):  # a body framed by Content-Length or the connection's close starts with an event
        seg = b"\n" + seg
    out = []
    for part in seg.split(EV, limit)[1:limit + 1 if limit >= 0 else None]:
        end = part.find(b"\n")
        out.append((part if end < 0 else part[:end]).strip())
    return out


def _loads(p: bytes) -> dict[str, object] | None:
    """The payload parsed, if it is a JSON object (its values still to be narrowed where read)."""
    try:
        obj = json.loads(p)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def _has_content(obj: dict[str, object], api: str) -> bool:
    if api == "generate":
        return True
    choices = obj.get("choices")
    if not isinstance(choices, list) or not choices:
        return False
    c = choices[0]
    if not isinstance(c, dict):
        return False
    if api == "chat":
        d = c.get("delta")
        if not isinstance(d, dict):
            return False
        return bool(d.get("content") or d.get("reasoning_content") or d.get("reasoning") or d.get("tool_calls"))
    return bool(c.get("text"))


def _error_text(seg: bytes) -> str | None:
    """The message of the first error event (`{"error": ...}`, any spelling or key order) in a stretch of body."""
    for p in _payloads(seg):
        if b'"error"' in p:
            obj = _loads(p) or {}
            err = obj.get("error")
            if err:
                msg = err.get("message") if isinstance(err, dict) else err
                return f"error event: {msg}"
    return None


@dataclass(frozen=True)
class _Tail:
    """What the last events of a response say: how many are not content, the usage / meta_info, an error."""
    k_end: int = 0
    usage: dict[str, object] | None = None
    meta: dict[str, object] | None = None
    error: str | None = None
    done: bool = False  # the last event was [DONE]
    malformed: int = 0  # kept last events that are not JSON
    objs: tuple[dict[str, object] | None, ...] = ()  # the kept last events, parsed (None: [DONE] or not JSON)


def finalize(rec: Raw, api: str, t_start: float, usage_expected: bool = False, *, body: bytes | None = None,
             ignore_eos: bool = False, recount: bool = False, model: str = "",
             served: tuple[str, ...] = ()) -> RequestResult:
    """One request's record -> its RequestResult (times relative to `t_start`, the start of the measured run).
    `usage_expected`: the request asked for the usage chunk (chat / completions with include_usage). The server's
    output-token count is checked (load/counting.py::check) against the token ids counted as the request ended
    (`rec.ids`) or those in `body` (the kept body, or /generate's last events) when it holds them, else against the content events and the max_tokens asked; the
    tokenizer's count of a text body follows in counting.verify (`recount`: the check waits for it there when the
    body holds no ids). Identity (load/honesty.py): the answer must name `model`, the model the request asked for;
    the server's prompt_tokens must be the client's count (which is the request's); a kept body's events are read
    whole, so that events without content are no tokens and have no times."""
    start = rec.t0 - t_start
    e2e = rec.t_end - rec.t0 if rec.t_end else None
    error = _transport_error(rec)
    if error is not None:
        return RequestResult(rec.idx, start, None, e2e, (), rec.prompt_tokens, 0, error, events=rec.n_ev)
    # non-content events at the start (the chat role chunk) and at the end ([DONE], usage-only chunk)
    k_start = _leading_non_content(rec.head, api)
    tail = _read_tail(rec.tail, api)
    if tail.error is None:
        tail = dataclasses.replace(tail, error=_incomplete(rec, api, tail, usage_expected))
    if tail.error is not None:
        return RequestResult(rec.idx, start, None, e2e, (), rec.prompt_tokens, 0, tail.error, events=rec.n_ev)
    objs = honesty.parse_events(body) if body is not None and api != "generate" else None
    if objs is not None and len(objs) == rec.n_ev:  # the whole stream: its content events, one by one
        ts = [t for t, c in zip(_event_times(rec), honesty.content_mask(objs, api)) if c]
        n_content = len(ts)
    else:
        n_content = max(0, rec.n_ev - k_start - tail.k_end)
        ts = _content_times(rec, k_start, n_content)
        objs = [_loads(p) for p in _payloads(rec.head, 4)] + list(tail.objs)
    ttft = ts[0] - rec.t0 if ts else None
    itl = tuple(map(operator.sub, ts[1:], ts))
    prompt_tokens, server, verify, accept, count_error = _token_counts(rec.prompt_tokens, tail)
    count_error = honesty.model_problem(model, honesty.named_models(objs), served) or count_error
    if not ts:
        return RequestResult(rec.idx, start, None, e2e, (), prompt_tokens, server if server is not None else 0,
                             "no content events in the response", verify, accept, 0, server,
                             max_tokens=rec.max_tokens)
    counted = counting.Counted(rec.ids, "token_ids") if rec.ids is not None else counting.Counted(None, None)
    answer = rec.digest
    if body is not None and rec.ids is None:
        n = counting.ids_count(body, api, n_content if api == "generate" else None)
        if n is not None:
            counted = counting.Counted(n, "token_ids")
        answer = _answer_digest(body, api, tail)
    if count_error is not None:
        out = n_content
    elif recount and counted.tokens is None:  # counting.verify counts the text and checks then
        out = server if server is not None else n_content
    else:
        out, count_error = counting.check(server, counted, rec.max_tokens, n_content)
    early = bool(ignore_eos and count_error is None and rec.max_tokens is not None and out < rec.max_tokens
                 and not (recount and counted.tokens is None))  # deferred: counting.verify flags it
    if verify:
        accept = out / verify  # SGLang's own definition, over the verified count
    hist = (tail.meta or {}).get("spec_correct_drafts_histogram")
    hist_t = tuple(int(x) for x in hist) if isinstance(hist, list) and all(
        isinstance(x, int) and not isinstance(x, bool) for x in hist) else None
    return RequestResult(rec.idx, start, ttft, e2e, itl, prompt_tokens, out, count_error, verify, accept, n_content,
                         server, counted.tokens, counted.source, rec.max_tokens, early, accept_hist=hist_t,
                         answer_digest=answer)


def _answer_digest(body: bytes, api: str, tail: _Tail) -> str | None:
    """The digest of the answer a kept body holds (load/honesty.py): its token ids, else its text."""
    if api == "generate":
        return honesty.generate_digest(tail.objs)
    scan = counting.ids_scan(body)
    return scan.digest if scan is not None else honesty.text_digest(counting.received_text(body, api))


def _incomplete(rec: Raw, api: str, tail: _Tail, usage_expected: bool) -> str | None:
    """Why a response that ended cleanly at the HTTP level is still not a whole measurement."""
    bad = max(rec.bad_ev, tail.malformed)
    if bad:
        return f"{bad} malformed SSE event(s) (not JSON) in {rec.n_ev} events"
    if not tail.done:
        return f"stream ended without [DONE] after {rec.n_ev} events (cut short)"
    if usage_expected and api != "generate" and tail.usage is None:
        return f"stream ended without the usage chunk it asked for (include_usage) after {rec.n_ev} events"
    return None


def _transport_error(rec: Raw) -> str | None:
    """The connection's own error, or the text of an error event the hot path saw."""
    if rec.error is not None:
        return rec.error
    if rec.error_ev:
        return _error_text(rec.head) or _error_text(rec.tail) or "error event in stream"
    return None


def _leading_non_content(head: bytes, api: str) -> int:
    """How many of the first events carry no content (the chat role chunk)."""
    k_start = 0
    for p in _payloads(head, 4):
        if p == b"[DONE]":
            k_start += 1
            continue
        obj = _loads(p)
        if obj is None or _has_content(obj, api):  # None: cut off by the head's size limit, a long event
            break
        k_start += 1
    return k_start


def _read_tail(tail: bytes, api: str) -> _Tail:
    """The last events, newest first, back to the last content event (or SGLang's meta_info)."""
    k_end = 0
    usage: dict[str, object] | None = None
    meta: dict[str, object] | None = None
    payloads = _payloads(tail)
    done = bool(payloads) and payloads[-1] == b"[DONE]"
    whole = tail.startswith(EV)  # cut at an event start (else the 4 KiB fallback: its first event may be partial)
    objs = [None if p == b"[DONE]" else _loads(p) for p in payloads]  # each kept event parsed once
    malformed = sum(1 for i, (p, o) in enumerate(zip(payloads, objs)) if p != b"[DONE]" and o is None and (whole or i))
    for p, obj in zip(reversed(payloads), reversed(objs)):
        if p == b"[DONE]":
            k_end += 1
            continue
        if obj is None:
            break
        err = obj.get("error")
        if err:  # an error event whose marker a read boundary split (the hot path saw no match)
            msg = err.get("message") if isinstance(err, dict) else err
            return _Tail(error=f"error event: {msg}", done=done)
        u = obj.get("usage")
        if usage is None and isinstance(u, dict):
            usage = u
        if api == "generate":
            m = obj.get("meta_info")
            meta = m if isinstance(m, dict) else None
            break
        if _has_content(obj, api):
            break
        k_end += 1
    return _Tail(k_end, usage, meta, None, done, malformed, tuple(objs))


def _event_times(rec: Raw) -> list[float]:
    """One timestamp per event (events of one read share its time)."""
    ts: list[float] = []
    for t, k in rec.marks:
        ts.extend([t] * k)
    return ts


def _content_times(rec: Raw, k_start: int, n_content: int) -> list[float]:
    """One timestamp per content event, where the events in between are taken to be all content."""
    return _event_times(rec)[k_start:k_start + n_content]


def _token_counts(prompt_tokens: int | None,
                  tail: _Tail) -> tuple[int | None, int | None, int | None, float | None, str | None]:
    """(prompt tokens, the server's output-token count, spec_verify_ct, accept length, why the server's count is not a
    count): the client's prompt count where it has one (the server's checked against it: honesty.prompt_problem),
    the server's output counts where it gives them (checked against the client's in load/counting.py)."""
    server_count = counting.server_count
    server: int | None = None
    error: str | None = None
    verify: int | None = None
    accept: float | None = None
    usage, meta = tail.usage, tail.meta
    said: object = None
    if usage is not None:
        said = usage.get("prompt_tokens")
        server, error = server_count(usage.get("completion_tokens"))
    if meta is not None:
        said = meta.get("prompt_tokens")
        server, error = server_count(meta.get("completion_tokens"))
        v = meta.get("spec_verify_ct")
        length = meta.get("spec_accept_length")
        if isinstance(v, int) and v > 0:
            verify = v
            accept = server / v if server is not None else None
        elif isinstance(length, (int, float)):
            accept = float(length)
    said_n = said if isinstance(said, int) and not isinstance(said, bool) else None
    known = prompt_tokens if isinstance(prompt_tokens, int) and prompt_tokens > 0 else None
    error = error or honesty.prompt_problem(known, said_n)
    return (known if known is not None else said_n), server, verify, accept, error
