"""What the instant server (`instant_server.py`) sends, as bytes: pure functions, no sockets.

The HTTP/1.1 and SSE framing (one chunk per event, as uvicorn frames it), the stream events and the whole
(non-stream) response of each API (OpenAI completions and chat, SGLang's `/generate`), and the vLLM-named
Prometheus counters of `/metrics`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

WORDS = (
    "the of and to in is that for it as was with be by on not he this are or his from at which but have an they"
    " you were her she there been one all we their has would when if so no will more can out up into do any your"
    " what about time"
).split()


class Stats:
    __slots__ = ("requests", "prompt_tokens", "generation_tokens", "drafts", "draft_tokens", "accepted", "success",
                 "per_pos")

    def __init__(self) -> None:
        self.requests = self.prompt_tokens = self.generation_tokens = 0
        self.drafts = self.draft_tokens = self.accepted = self.success = 0
        self.per_pos: list[int] = []  # accepted tokens at draft position 0, 1, ... (vLLM's per-position counter)

    def prometheus(self, model: str, names: str = "vllm") -> bytes:
        if names == "sglang":  # observability/metrics_collector.py@0.5.15.post1 (with --enable-metrics)
            lab = f'{{model_name="{model}"}}'
            return "".join(f"# TYPE {n} counter\n{n}{lab} {float(v)}\n" for n, v in (
                ("sglang:generation_tokens_total", self.generation_tokens),
                ("sglang:spec_verify_calls_total", self.drafts))).encode()
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

    def account(self, n: int, prompt_tokens: int | None, accept_length: int, num_spec_tokens: int) -> None:
        """One request served in full: `n` output tokens in steps of `accept_length` (1: no speculation)."""
        self.success += 1
        self.prompt_tokens += prompt_tokens or 0
        self.generation_tokens += n
        if accept_length > 1:
            sizes = steps(n, accept_length)
            count = len(sizes)
            for k in sizes:  # a step of k tokens accepted its drafts at positions 0 .. k-2
                self.per_pos += [0] * max(0, k - 1 - len(self.per_pos))
                for i in range(k - 1):
                    self.per_pos[i] += 1
            self.drafts += count
            self.draft_tokens += count * num_spec_tokens
            self.accepted += n - count


def chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


# How the stream's JSON is spelled (`--json-style`): `compact` as both engines write it (`json.dumps` with separators
# `,` `:`); `spaces` as Python's `json.dumps` writes by default (`", "`, `": "`, non-ASCII escaped), as FastChat-style
# servers do; `loose` every other spelling JSON allows at once: keys in reverse order, spaces and tabs around every
# separator, every character of every string value written as a `\uXXXX` escape, and `data:` framed without its space.
JSON_STYLES = ("compact", "spaces", "loose")


def _loose(v: Any) -> str:
    if isinstance(v, dict):
        return "{ " + " ,\t".join(f"{json.dumps(k)} :\t{_loose(x)}" for k, x in reversed(v.items())) + " }"
    if isinstance(v, (list, tuple)):
        return "[ " + " , ".join(_loose(x) for x in v) + " ]"
    if isinstance(v, str):
        units = v.encode("utf-16-be")
        return '"' + "".join(f"\\u{units[i]:02x}{units[i + 1]:02x}" for i in range(0, len(units), 2)) + '"'
    return json.dumps(v)


def dumps(obj: Any, style: str = "compact") -> bytes:
    """`obj` as JSON in one of JSON_STYLES."""
    if style == "compact":
        return json.dumps(obj, separators=(",", ":")).encode()
    if style == "spaces":
        return json.dumps(obj).encode()
    if style == "loose":
        return _loose(obj).encode()
    raise ValueError(f"unknown JSON style {style!r}; use one of {JSON_STYLES}")


def field(key: str, value: Any, style: str = "compact") -> bytes:
    """How `"key": value` is spelled inside an object of `style` (the instant server patches fields of cached
    events)."""
    whole = dumps({key: value}, style)
    return whole[2:-2] if style == "loose" else whole[1:-1]


def sse(obj: Any, style: str = "compact") -> bytes:
    return chunk((b"data:" if style == "loose" else b"data: ") + dumps(obj, style) + b"\n\n")


DONE = chunk(b"data: [DONE]\n\n")
END = b"0\r\n\r\n"
SSE_HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
            b"transfer-encoding: chunked\r\ncache-control: no-cache\r\n\r\n")


_STEPS = [k for k in range(1, len(WORDS)) if math.gcd(k, len(WORDS)) == 1]


def text(i: int, k: int, salt: int = 0) -> str:
    """Words i .. i+k-1 of the answer numbered `salt` (0: WORDS in order; another salt walks WORDS with another step
    and start, so the answers to different prompts differ: 24 x 56 different answers). Each step is coprime with
    len(WORDS), so every answer cycles through all the words, as salt 0 does: no answer repeats a word that a
    tokenizer splits in two more often than WORDS in order does (a text count then stays within its tolerance)."""
    step, start = _STEPS[salt % len(_STEPS)], (salt // len(_STEPS)) % len(WORDS)
    return "".join(" " + WORDS[((i + j) * step + start) % len(WORDS)] for j in range(k))


def ids_of(i: int, k: int, salt: int = 0) -> list[int]:
    """The token ids of the same words (one id per word; another salt, other ids)."""
    return [salt * 4096 + x for x in range(i, i + k)]


def prompt_salt(body: Mapping[str, object]) -> int:
    """Which answer a request gets: a hash of its prompt (`prompt`, `messages`, `input_ids` / `text`), so one prompt
    always gets the same answer and different prompts (almost always) different ones, as a model's would."""
    import zlib

    key = {k: body.get(k) for k in ("prompt", "messages", "input_ids", "text")}
    return zlib.crc32(json.dumps(key, sort_keys=True).encode()) % (len(_STEPS) * len(WORDS))


def steps(n: int, a: int) -> list[int]:
    """Tokens per event: `a` each, the remainder in the last one."""
    return [min(a, n - s) for s in range(0, n, a)]


def truth_event(api: str, pos: int, k: int, last: bool, model: str, ids: bool, meta: Mapping[str, object] | None,
                full: bool = True, style: str = "compact", salt: int = 0) -> bytes:
    """One event of the ground-truth stream: `k` tokens after `pos` (k = 0: the chat role chunk); token ids when the
    request asked `return_token_ids` (vLLM) and always on /generate (SGLang's cumulative `output_ids`). The objects
    built here (and below) are JSON only written, never read back: dict[str, object]."""
    fin = ("length" if full else "stop") if last else None
    if api == "generate":
        return sse({"text": text(0, pos + k, salt), "output_ids": ids_of(0, pos + k, salt), "meta_info": meta},
                   style)
    if api == "chat":
        delta: dict[str, str] = {"role": "assistant", "content": ""} if k == 0 else {"content": text(pos, k, salt)}
        choice: dict[str, object] = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": fin}
        obj: dict[str, object] = {"id": "chatcmpl-0", "object": "chat.completion.chunk", "created": 0, "model": model}
    else:
        choice = {"index": 0, "text": text(pos, k, salt), "logprobs": None, "finish_reason": fin}
        obj = {"id": "cmpl-0", "object": "text_completion", "created": 0, "model": model}
    if ids and k:
        choice["token_ids"] = ids_of(pos, k, salt)
    obj["choices"] = [choice]
    return sse(obj, style)


def empty_event(api: str, model: str, style: str = "compact") -> bytes:
    """An event that carries no text and no token (as servers send between tokens: a held-back partial character, a
    keep-alive): chat `delta.content` "", completions `text` "" (`/generate`: none, its events are cumulative)."""
    if api == "chat":
        return sse({"id": "chatcmpl-0", "object": "chat.completion.chunk", "created": 0, "model": model,
                    "choices": [{"index": 0, "delta": {"content": ""}, "logprobs": None, "finish_reason": None}]}, style)
    return sse({"id": "cmpl-0", "object": "text_completion", "created": 0, "model": model,
                "choices": [{"index": 0, "text": "", "logprobs": None, "finish_reason": None}]}, style)


def json_response(status: str, obj: Any, close: bool = False) -> bytes:
    body = json.dumps(obj).encode()
    conn = b"connection: close\r\n" if close else b""
    return (b"HTTP/1.1 %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n%s\r\n"
            % (status.encode(), len(body), conn)) + body


def stream_events(api: str, n: int, accept_length: int, model: str, ids: bool = False,
                  style: str = "compact", salt: int = 0) -> list[bytes]:
    """The SSE events of one streamed answer of `n` tokens, `accept_length` a step (`/generate`: prompt_tokens -1,
    patched in per request); `ids`: each choice carries its `token_ids`, as vLLM's with `return_token_ids`; `style`:
    how its JSON is spelled (JSON_STYLES)."""
    sizes = steps(n, accept_length)
    evs: list[bytes] = []
    pos = 0
    m = model
    if api == "chat":
        evs.append(sse({"id": "chatcmpl-0", "object": "chat.completion.chunk", "created": 0, "model": m,
                        "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                     "logprobs": None, "finish_reason": None}]}, style))
    for k, size in enumerate(sizes):
        last = k == len(sizes) - 1
        fin = "length" if last else None
        choice: dict[str, object]
        if api == "chat":
            choice = {"index": 0, "delta": {"content": text(pos, size, salt)}, "logprobs": None, "finish_reason": fin}
            obj: dict[str, object] = {"id": "chatcmpl-0", "object": "chat.completion.chunk", "created": 0, "model": m,
                                      "choices": [choice]}
        elif api == "completions":
            choice = {"index": 0, "text": text(pos, size, salt), "logprobs": None, "finish_reason": fin}
            obj = {"id": "cmpl-0", "object": "text_completion", "created": 0, "model": m, "choices": [choice]}
        else:  # generate: cumulative text, meta_info per event (SGLang native)
            obj = {"text": text(0, pos + size, salt), "output_ids": ids_of(0, pos + size, salt),
                   "meta_info": {"id": "0", "finish_reason": {"type": "length", "length": n} if last else None,
                                 "prompt_tokens": -1, "completion_tokens": pos + size, "cached_tokens": 0,
                                 "spec_verify_ct": k + 1 if accept_length > 1 else 0}}
        if ids and api != "generate":
            choice["token_ids"] = ids_of(pos, size, salt)
        pos += size
        evs.append(sse(obj, style))
    return evs


def stream_tail(api: str, n: int, prompt_tokens: int | None, usage: bool, model: str, style: str = "compact") -> bytes:
    """What follows the events: the usage chunk (OpenAI APIs, when asked), `[DONE]` and the last chunk."""
    if api in ("chat", "completions") and usage:
        obj: dict[str, object] = {
            "id": "0", "object": "chat.completion.chunk" if api == "chat" else "text_completion", "created": 0,
            "model": model, "choices": [],
            "usage": {"prompt_tokens": prompt_tokens, "total_tokens": (prompt_tokens or 0) + n,
                      "completion_tokens": n}}
        return sse(obj, style) + DONE + END
    return DONE + END


def whole_response(api: str, n: int, ptoks: int | None, model: str, accept_length: int) -> bytes:
    """The non-stream answer of `n` tokens, as one HTTP response."""
    t = text(0, n)
    usage = {"prompt_tokens": ptoks, "completion_tokens": n, "total_tokens": (ptoks or 0) + n}
    if api == "chat":
        obj: dict[str, object] = {"id": "chatcmpl-0", "object": "chat.completion", "created": 0, "model": model,
                                  "choices": [{"index": 0, "message": {"role": "assistant", "content": t},
                                               "finish_reason": "length"}], "usage": usage}
    elif api == "completions":
        obj = {"id": "cmpl-0", "object": "text_completion", "created": 0, "model": model,
               "choices": [{"index": 0, "text": t, "finish_reason": "length"}], "usage": usage}
    else:
        a = accept_length
        obj = {"text": t, "meta_info": {"prompt_tokens": ptoks, "completion_tokens": n,
                                        "spec_verify_ct": math.ceil(n / a) if a > 1 else 0,
                                        "finish_reason": {"type": "length", "length": n}}}
    return json_response("200 OK", obj)
