"""Any valid JSON is read (load/counting.py, load/sse.py, load/stream.py): the same stream spelled compactly (as both
engines write it), with Python's `json.dumps` default whitespace (FastChat-style servers) and every other way JSON
allows (keys reversed, spaces and tabs around separators, every string character a `\\uXXXX` escape: the instant
server's `--json-style loose`) counts the same token ids, the same text, the same events; and the fast scan alone
(`parse=False`, as a request ends) never answers for a spelling it cannot read."""

from __future__ import annotations

import json
from typing import Any

import pytest

from specbench.load import counting, sse
from specbench.load.counting import essentials, ids_count, received_text
from specbench.load.stream import _BAD_EV
from specbench.testing.instant_bodies import (
    DONE,
    END,
    JSON_STYLES,
    dumps,
    field,
    stream_events,
    stream_tail,
    text,
    truth_event,
)
from specbench.testing.instant_bodies import sse as sse_event


def _body(api: str, n: int, accept: int, ids: bool, style: str) -> bytes:
    return b"".join(stream_events(api, n, accept, "m", ids, style)) + stream_tail(api, n, 7, True, "m", style)


def _sse(objs: list[Any], style: str) -> bytes:
    """The events, each its own chunk (as uvicorn frames them), then [DONE] and the last chunk."""
    return b"".join(sse_event(o, style) for o in objs) + DONE + END


@pytest.mark.parametrize("style", ["spaces", "loose"])
@pytest.mark.parametrize("api", ["completions", "chat"])
def test_openai_streams_count_the_same_in_every_spelling(api: str, style: str) -> None:
    for n, accept in ((1, 1), (40, 1), (40, 3), (7, 4)):
        for ids in (True, False):
            compact, other = _body(api, n, accept, ids, "compact"), _body(api, n, accept, ids, style)
            assert other != compact
            want = n if ids else None
            assert ids_count(compact, api) == ids_count(other, api) == want
            assert ids_count(compact, api, parse=False) == want  # the fast scan reads the compact spelling ...
            assert ids_count(other, api, parse=False) is None  # ... and never guesses at another: kept for later
            assert received_text(compact, api) == received_text(other, api) == text(0, n)
            # a body cut to its essentials past the memory budget (its id lists, else its text) counts the same,
            # whatever it was spelled as
            assert essentials(other) == essentials(compact)
            assert ids_count(essentials(other), api) == want
            if not ids:
                assert received_text(essentials(other), api) == text(0, n)


@pytest.mark.parametrize("style", JSON_STYLES)
def test_generate_output_ids_in_every_spelling(style: str) -> None:
    cumulative = _body("generate", 16, 3, False, style)  # SGLang's default: the whole list in every event
    assert ids_count(cumulative, "generate") == 16
    assert ids_count(cumulative, "generate", events=40) == 16  # only the last events kept: cumulative still counts
    assert ids_count(cumulative, "generate", parse=False) == (16 if style == "compact" else None)
    deltas = _sse([{"text": "x", "output_ids": list(range(k)), "meta_info": {}} for k in (3, 3, 1, 2)], style)
    assert ids_count(deltas, "generate") == 9  # --incremental-streaming-output: deltas summed
    assert ids_count(deltas, "generate", events=12) is None
    # the truth server's events (instant_truth.py) and the usage / meta_info tail parsed alike
    ev = truth_event("generate", 0, 5, True, "m", True, {"completion_tokens": 5, "spec_verify_ct": 2,
                                                          "prompt_tokens": 3}, style=style)
    assert ids_count(ev, "generate") == 5


@pytest.mark.parametrize("style", JSON_STYLES)
def test_escapes_key_order_nulls_and_reasoning(style: str) -> None:
    """Text that needs escapes (a quote, a backslash, a newline, non-ASCII, a character outside the BMP), keys in any
    order, `null` where a field is empty (vLLM writes `"token_ids":null` when ids were not asked; SGLang
    `"reasoning_content":null`), and a reasoning model's thinking after its answer."""
    words = ['say "hi"', "\n\\ \u00e9", "\U0001f600 ok"]
    objs: list[Any] = [{"choices": [{"delta": {"role": "assistant", "content": ""}, "token_ids": None}]}]
    objs += [{"choices": [{"finish_reason": None, "delta": {"reasoning_content": None, "content": w},
                           "token_ids": None, "index": 0}], "id": "x"} for w in words]
    objs += [{"choices": [{"delta": {"reasoning_content": "think", "content": None}}]}]
    body = _sse(objs, style)
    assert received_text(body, "chat") == "".join(words) + "think"  # the answer, then the reasoning
    assert ids_count(body, "chat") is None  # every token_ids null: the stream carries none
    assert ids_count(body, "chat", parse=False) is None
    assert received_text(essentials(body), "chat") == "".join(words) + "think"
    completions = _sse([{"choices": [{"text": w, "token_ids": [i, i + 1] if i else []}]} for i, w in enumerate(words)],
                       style)
    assert received_text(completions, "completions") == "".join(words)
    assert ids_count(completions, "completions") == 4  # an empty list counts 0 ids
    assert ids_count(essentials(completions), "completions") == 4


def test_a_key_spelled_with_escapes_is_read_through_json() -> None:
    """No serializer writes `"\\u0074ext"`, but it is the key `text`: the fast scan finds no text at all, so the
    events are read through `json`."""
    body = b'data: {"choices":[{"\\u0074ext":" a"}]}\n\ndata: {"choices":[{"\\u0074ext":" b"}]}\n\ndata: [DONE]\n\n'
    assert received_text(body, "completions") == " a b"
    assert received_text(essentials(body), "completions") == " a b"


def test_a_string_that_looks_like_a_key_is_not_read_as_one() -> None:
    """Text whose value is `token_ids` or `text` (a raw `"token_ids"` in the bytes, not followed by a colon): the
    fast scan cannot place it, the JSON reading can, and the count stays right."""
    for style in ("compact", "spaces"):
        body = _sse([{"choices": [{"text": "token_ids", "token_ids": [1]}]},
                     {"choices": [{"text": "text", "token_ids": [2, 3]}]}], style)
        assert ids_count(body, "completions") == 3
        assert received_text(body, "completions") == "token_idstext"


def test_compact_events_is_the_compact_spelling_of_each_event() -> None:
    objs: list[Any] = [{"b": 1, "a": ["\u00e9", None, {"x": 1.5}]}, {"choices": []}]
    compact = counting.compact_events(_sse(objs, "compact"))
    assert compact == json.dumps(objs, separators=(",", ":")).encode()  # [DONE] left out
    assert counting.compact_events(_sse(objs, "spaces")) == compact  # the parsed key order kept
    assert json.loads(counting.compact_events(_sse(objs, "loose"))) == objs  # its keys came in reverse order
    # an event that is not JSON (the hot path counts it malformed) does not hide the others
    bad = _sse(objs[:1], "spaces") + b"5\r\ndata: <html>\n\n\r\n" + _sse(objs[1:], "spaces")
    assert counting.compact_events(bad) == compact


@pytest.mark.parametrize("style", JSON_STYLES)
def test_error_events_in_any_spelling(style: str) -> None:
    err = {"error": {"object": "error", "message": "boom", "type": "InternalServerError", "code": 500}}
    assert sse._error_text(_sse([{"choices": [{"text": "a"}]}, err], style)) == "error event: boom"
    reordered = {"id": "x", "error": {"message": "late key"}}
    assert sse._error_text(_sse([reordered], style)) == "error event: late key"
    assert sse._error_text(_sse([{"choices": [{"text": "error"}]}], style)) is None  # the word, not the key


def test_event_framing_whitespace_is_not_malformed() -> None:
    """SSE strips one space after `data:`; JSON allows any whitespace before the object: neither is a malformed
    event. A payload that is not JSON still is."""
    for ok in (b"\ndata:{", b"\ndata: {", b"\ndata:  {", b"\ndata:\t{", b"\ndata: \t [DONE]", b"\ndata:[DONE]"):
        assert not _BAD_EV.search(ok + b'"a":1}\n'), ok
    for bad in (b"\ndata: <html>", b"\ndata:x", b"\ndata:  not json", b"\ndata:\t\t<"):
        assert _BAD_EV.search(bad), bad


def test_field_is_how_the_instant_server_patches_its_cached_events() -> None:
    for style in JSON_STYLES:
        ev = dumps({"meta_info": {"prompt_tokens": -1, "completion_tokens": 4}}, style)
        assert field("prompt_tokens", -1, style) in ev
        patched = ev.replace(field("prompt_tokens", -1, style), field("prompt_tokens", 12, style))
        assert json.loads(patched)["meta_info"]["prompt_tokens"] == 12


def test_a_stream_without_chunk_framing_reads_its_first_event() -> None:
    """A body framed by Content-Length (or the connection's close) starts with its first event, not a chunk size:
    the chat role chunk is still known for what it is (not a content event), so the answer's events and TTFT are
    the content's."""
    from specbench.load.stream import Raw

    for style in JSON_STYLES:
        events = [{"choices": [{"delta": {"role": "assistant", "content": ""}}]},
                  {"choices": [{"delta": {"content": " a"}}]}, {"choices": [{"delta": {"content": " b"}}]}]
        body = b"".join(b"data: " + dumps(e, style) + b"\n\n" for e in events) + b"data: [DONE]\n\n"
        rec = Raw(0, 4, max_tokens=2)
        rec.t0, rec.t_end, rec.status = 1.0, 1.3, 200
        rec.marks = [(1.1, 1), (1.2, 2), (1.3, 1)]  # the role chunk alone, then both content events, then [DONE]
        rec.n_ev, rec.head, rec.tail = 4, body, body
        r = sse.finalize(rec, "chat", 0.0)
        assert r.error is None and r.events == 2 and r.ttft_s == pytest.approx(0.2), (style, r)
