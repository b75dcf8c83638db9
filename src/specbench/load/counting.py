"""Count, don't trust: the output tokens a response really carried, counted by the client after the run (off the hot
path, from the body bytes the hot path kept by reference), checked against the server's own count (`usage.
completion_tokens` on the OpenAI routes, `meta_info.completion_tokens` on SGLang's `/generate`).

How the client counts, best first (`count_source` of a request row):
- `token_ids`: the token ids the stream carried. SGLang `/generate` sends `output_ids` in every event, the whole list so
  far by default and only the new ids with `--incremental-streaming-output`
  (sglang/srt/managers/tokenizer_manager.py::TokenizerManager._handle_batch_output@0.5.15.post1); vLLM sends
  `token_ids` in each streamed choice when the request asks `return_token_ids`
  (vllm/entrypoints/openai/completion/serving.py::OpenAIServingCompletion.completion_stream_generator@0.32.0, the
  engine package asks for it: engines/base.py::ServerAdapter.count_body). Exact: tolerance 0.
- `tokenizer`: the model's tokenizer over the text received (completions `text`, chat `content` /
  `reasoning_content`), special tokens included where the text shows them. Re-tokenizing text need not give back
  the generated ids (a byte-level BPE merges across token boundaries), so the server's count may differ by
  `TEXT_ABS` tokens or `TEXT_REL` of the count, whichever is larger.
- none (no tokenizer, no ids): the server's count, checked only against the content events (each carries >= 1
  token) and the `max_tokens` asked. With ids, a few events may carry none (`spare_events`: one, and one per 32
  tokens; SGLang re-sent its list once after a retraction).

A count that is negative, not a whole number, zero for a response with content, more than the request asked, fewer
than the content events, or outside the tolerance of the client's count makes the request a failure whose reason
names both counts; the verified count (the client's where exact, else the server's once it agrees) is what the
throughputs use. A request that asked `ignore_eos` and ended short of its `max_tokens` is flagged `early_stop`
(the cell is `partial` unless the matrix allows early stops: `allow_early_stop`).

Any valid JSON is read. The scanners are byte patterns of the compact spelling both engines write (`"text":"..."`,
`"token_ids":[1,2]`): every occurrence of the key is matched, the compact spelling in the pattern's group, any other
(whitespace around the colon as Python's `json.dumps` writes by default, a value of another type) as an empty group.
Where an empty group shows up, or no text is found at all (a key spelled with escapes), the body's events are read
again through `json` and written compactly (`compact_events`), and the same scanners read that: every spelling
(whitespace, key order, escapes such as `\u00e9` and `\"`) is counted exactly as its compact spelling. The fallback
runs only where the fast scan missed, and only after the run (`ids_count(..., parse=False)` as a request ends: a body
the fast scan cannot read is kept for after the run). The one spelling not read this way: a `token_ids` key spelled
with escapes (`"\u0074oken_ids"`), which no serializer writes; such a stream is counted with the tokenizer.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from specbench.load.honesty import digest
from specbench.load.stream import EV

TEXT_ABS = 2  # tokens: re-tokenized text vs the server's count
TEXT_REL = 0.10  # fraction of the count

# Every occurrence of the key is matched (SRE's prefix search on the literal key: 2x an alternation's speed): the
# compact value in the group, the empty group where the key is spelled otherwise (the fallback then reads the body).
# (A key is followed by its colon, a string value never is: the optional colon costs nothing and keeps the group
# the value alone.)
_IDS = re.compile(rb'"token_ids":?(\[[0-9, ]*\]|null|)')
_OUT_IDS = re.compile(rb'"output_ids":?(\[[0-9, ]*\]|null|)')
_STR = rb'"[^"\\]*(?:\\.[^"\\]*)*"'  # a JSON string, the unrolled loop (SRE: 2x the alternation)
_TEXT = {"completions": re.compile(rb'"text":?(' + _STR + rb'|null|)'),
         "chat": re.compile(rb'"content":?(' + _STR + rb'|null|)')}
_REASONING = re.compile(rb'"(?:reasoning_content|reasoning)":?(' + _STR + rb'|null|)')
_NULL, _EMPTY = b"null", b"[]"
# essentials: the whole fields in one scan each; a key spelled otherwise (or holding a value of another type) is
# matched as the bare key
_IDS_WHOLE = re.compile(rb'"token_ids"(?::(?:\[[0-9, ]*\]|null))?')
_TEXT_WHOLE = re.compile(rb'"(?:text|content|reasoning_content|reasoning)"(?::(?:' + _STR + rb'|null))?')
_BARE_TEXT = (b'"text"', b'"content"', b'"reasoning_content"', b'"reasoning"')


@dataclass(frozen=True, slots=True)
class Counted:
    tokens: int | None
    source: str | None  # "token_ids" | "tokenizer" | None (not counted)


def compact_events(body: bytes) -> bytes:
    """The JSON events of a (possibly chunk-framed) SSE body, parsed and written again compactly as one JSON array
    (`json.dumps` separators `,` `:`, the parsed key order, non-ASCII as `\\uXXXX`): what the fast scanners read for
    a server that writes JSON another way. One parse and one write for the whole body (C-level); an event that is not
    JSON ([DONE], one cut short) is left out."""
    payloads = []
    for part in (b"\n" + body).split(EV)[1:]:
        end = part.find(b"\n")
        p = (part if end < 0 else part[:end]).strip()
        if p and p != b"[DONE]":
            payloads.append(p)
    try:
        events = json.loads(b"[" + b",".join(payloads) + b"]")
    except ValueError:  # one of them is not JSON: each on its own
        events = []
        for p in payloads:
            try:
                events.append(json.loads(p))
            except ValueError:
                continue
    return json.dumps(events, separators=(",", ":")).encode()


def _groups(pattern: re.Pattern[bytes], body: bytes, parse: bool = True) -> list[bytes] | None:
    """Every match of a key's pattern in `body`: its compact values (`[..]`, `"..."`, `null`). Where the key is
    spelled otherwise, the matches in the body's compactly rewritten events (None with `parse` False: not read)."""
    found = pattern.findall(body)
    if b"" not in found:
        return found
    if not parse:
        return None
    return [g for g in pattern.findall(compact_events(body)) if g]  # what the compact spelling gives


def _n(ids: bytes) -> int:
    ids = ids.strip()
    return ids.count(b",") + 1 if ids else 0


def ids_count(body: bytes, api: str, events: int | None = None, *, parse: bool = True) -> int | None:
    """Output token ids in a streamed body; None when the stream carries none. C-level work only where the body is
    compact JSON (one regex scan, a join and a count): it runs once per request, as the request ends, with `parse`
    False (benchmarks/loadgen_overhead.py): None then also where the key is spelled another way, and the body is
    kept for the JSON fallback after the run.

    `/generate` (`events` given: `body` is only the last events the hot path kept, since SGLang's default resends the
    whole list in every event and a whole body grows as the square of the output): the last event's list when each
    kept list extends the one before; deltas (`--incremental-streaming-output`) are summed only when every event is
    in `body` (a single-event answer, or `events` None: the whole body), else None (not countable)."""
    if api == "generate":
        if b'"output_ids"' not in body:
            return None
        found = _groups(_OUT_IDS, body, parse)
        lists = [g[1:-1] for g in found or () if g != _NULL]
        if not lists:
            return None
        if len(lists) >= 2 and all(b.startswith(a) for a, b in zip(lists, lists[1:])):
            return _n(lists[-1])
        if events is None or events <= len(lists):
            return sum(_n(x) for x in lists) if len(lists) >= 2 or events is None else _n(lists[-1])
        return None
    scan = ids_scan(body, parse=parse)
    return scan.tokens if scan is not None else None


@dataclass(frozen=True, slots=True)
class IdsScan:
    """The token ids of an OpenAI-route stream: how many, how many events carry some, their digest."""
    tokens: int
    events: int
    digest: str


def ids_scan(body: bytes, *, parse: bool = True) -> IdsScan | None:
    """ids_count of an OpenAI-route body, with the events that carry ids and a digest of the ids (load/honesty.py);
    None when the stream carries none (or, `parse` False, spells them another way)."""
    if b'"token_ids"' not in body:
        return None
    found = _groups(_IDS, body, parse)
    if not found:
        return None
    nulls = found.count(_NULL)
    if nulls == len(found):
        return None
    empty = found.count(_EMPTY)
    joined = b",".join(found)
    # every list's ids: its commas + 1, a null or an empty list none (each is one item of the join)
    return IdsScan(joined.count(b",") + 1 - nulls - empty, len(found) - nulls - empty,
                   digest(joined.replace(b" ", b"").replace(b"null", b"").replace(b"[]", b"")))


def essentials(body: bytes) -> bytes:
    """What ids_count / received_text read of an OpenAI-route body, and nothing else, compactly spelled: its token-id
    fields when it has lists, else its text fields (a body cut so still counts the same). Runs as a request ends,
    past the run's body budget only (load/client.py::KEEP_BODY_BYTES); a body in another spelling is parsed then."""
    for parsed in (False, True):  # parsed: a value of another type stays unread, as in its compact spelling
        ids = _IDS_WHOLE.findall(body) if b'"token_ids"' in body else []
        if b'"token_ids"' in ids:
            if not parsed:
                body = compact_events(body)
                continue
            ids = [m for m in ids if m != b'"token_ids"']
        if ids.count(b'"token_ids":null') < len(ids):
            return b"".join(ids)
        texts = _TEXT_WHOLE.findall(body)
        if not texts or any(texts.count(k) for k in _BARE_TEXT):
            if not parsed:
                body = compact_events(body)
                continue
            texts = [m for m in texts if m not in _BARE_TEXT]
        return b"".join(texts)
    return b""


def _text(values: list[bytes]) -> list[str]:
    """The JSON strings (and nulls) of a key's matches, decoded."""
    try:
        return [v for v in json.loads(b"[" + b",".join(values) + b"]") if isinstance(v, str)]
    except ValueError:
        return []


def received_text(body: bytes, api: str) -> str:
    """The text of an OpenAI-route stream (completions `text`; chat `content`, then `reasoning_content` /
    `reasoning`), JSON escapes decoded."""
    if api not in _TEXT:
        return ""
    found = _TEXT[api].findall(body)
    if b"" in found or not found:  # another spelling of the key, or none found: the events through `json`
        body = compact_events(body)
        found = [g for g in _TEXT[api].findall(body) if g]
    parts = _text(found)
    if api == "chat" and b'"reasoning' in body:  # reasoning models stream their thinking in its own field
        parts += _text([g for g in _groups(_REASONING, body) or () if g])
    return "".join(parts)


def server_count(value: Any) -> tuple[int | None, str | None]:
    """The server's completion token count as an int, or the reason it is not one."""
    if value is None:
        return None, None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value != int(value):
        return None, f"server reported completion_tokens={value!r}, not a whole number"
    return int(value), None


def spare_events(tokens: int) -> int:
    """Content events beyond the token count that a stream carrying its token ids may send: one, and one per 32
    tokens. SGLang /generate sent one event more than ids for a request it most likely retracted (H100 Qwen3-30B-A3B,
    c = 32 at 8,192-token prompts, KV for 12: a 9.4 s stall at the 46th event, then 129 events, 128 ids,
    completion_tokens 128; tests/data/h100-moe-long-sglang-0.5.15.post1/README.md). More than that is still a count
    the events contradict: on /generate the ids are the server's own cumulative list, so the events are the one bound
    the client sees for itself."""
    return 1 + max(0, tokens) // 32


def check(server: int | None, counted: Counted, max_tokens: int | None, events: int) -> tuple[int, str | None]:
    """(verified output tokens, the reason the counts cannot be trusted or None)."""
    c = counted.tokens
    if server is not None:
        if server < 0:
            return 0, f"server reported completion_tokens={server} (negative); the client counted {_said(counted, events)}"
        if server == 0 and events > 0:
            return 0, f"server reported completion_tokens=0 for a response with {events} content events"
        if max_tokens is not None and server > max_tokens:
            return server, (f"server reported completion_tokens={server}, more than the max_tokens={max_tokens} "
                            f"asked; the client counted {_said(counted, events)}")
        if server < events - (spare_events(server) if counted.source == "token_ids" else 0):
            return server, (f"server reported completion_tokens={server}, fewer than the {events} content events "
                            "received (each carries at least one token)")
    if c is not None:
        if max_tokens is not None and c > max_tokens + tolerance(counted):
            return c, f"received {c} output tokens ({counted.source}), more than the max_tokens={max_tokens} asked"
        if server is not None:
            tol = tolerance(counted)
            if abs(server - c) > tol:
                return c, (f"server reported completion_tokens={server} but the client counted {c} ({counted.source}"
                           f", tolerance {tol})")
        if counted.source == "token_ids" or server is None:
            return c, None
    return (server if server is not None else events), None


def tolerance(counted: Counted) -> int:
    """How far the server's count may be from the client's: 0 for token ids, else max(TEXT_ABS, TEXT_REL x count)."""
    if counted.source == "token_ids" or counted.tokens is None:
        return 0
    return max(TEXT_ABS, math.ceil(TEXT_REL * counted.tokens))


def _said(counted: Counted, events: int) -> str:
    return f"{counted.tokens} ({counted.source})" if counted.tokens is not None else f"{events} content events"


def verify(results: Sequence[Any], bodies: Sequence[bytes | None], api: str, ignore_eos: bool,
           counter: Callable[[list[str]], list[int]] | None) -> list[Any]:
    """The requests whose stream carried no token ids (sse.finalize checked the rest) counted again with the
    tokenizer (`counter`: its batch count of texts; None: no tokenizer), in one batch after the run: each gets its
    verified `output_tokens`, `counted_tokens`, `count_source`, `early_stop` and, when the counts disagree, its
    error. `bodies[i]`: the kept body of results[i] (None: not kept)."""
    if counter is None or api == "generate":
        return list(results)
    need = [i for i, (r, body) in enumerate(zip(results, bodies)) if r.ok and body is not None and r.count_source is None]
    if not need:
        return list(results)
    counts = counter([received_text(bodies[i] or b"", api) for i in need])
    out = list(results)
    for i, n in zip(need, counts):
        out[i] = _apply(out[i], Counted(int(n), "tokenizer"), ignore_eos)
    return out


def _apply(r: Any, counted: Counted, ignore_eos: bool) -> Any:
    out, error = check(r.server_output_tokens, counted, r.max_tokens, r.events)
    early = bool(ignore_eos and error is None and r.max_tokens is not None and out < r.max_tokens)
    accept = out / r.spec_verify_ct if r.spec_verify_ct else r.accept_len  # SGLang: verified tokens / verify steps
    return dataclasses.replace(r, output_tokens=out, counted_tokens=counted.tokens, count_source=counted.source,
                               early_stop=early, error=error, accept_len=accept)


def tokenizer_counter(tokenizer: Any) -> Callable[[list[str]], list[int]] | None:
    """The batch token count of texts with a `tokenizers.Tokenizer` (a ChatTokenizer's `.tokenizer`); None without
    one. Special tokens written in the text count as the one token each they are."""
    tok = getattr(tokenizer, "tokenizer", tokenizer)
    if tok is None or not hasattr(tok, "encode_batch"):
        return None

    def count(texts: list[str]) -> list[int]:
        return [len(e.ids) for e in tok.encode_batch(texts, add_special_tokens=False)]

    return count
