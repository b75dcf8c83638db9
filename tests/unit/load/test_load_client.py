"""The streaming client against the instant server running as a real subprocess."""

from __future__ import annotations

import contextlib
import statistics
import subprocess
import sys
import urllib.request
from collections.abc import Iterator

import pytest

from specbench.engines.prometheus import spec_delta
from specbench.errors import UserError
from specbench.load.client import run_load
from specbench.load.metrics import aggregate
from specbench.load.prompts import Prompt
from specbench.load.results import LoadSpec

TEXT = [Prompt(40, text=f"prompt number {i} " + "word " * 30) for i in range(64)]
CHAT = [Prompt(40, messages=({"role": "user", "content": f"question {i} " + "word " * 30},)) for i in range(64)]
IDS = [Prompt(40, token_ids=tuple(range(i, i + 40))) for i in range(64)]


@contextlib.contextmanager
def _server(*args: str) -> Iterator[str]:
    p = subprocess.Popen([sys.executable, "-m", "specbench.testing.instant_server", "--port", "0", *args],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline() if p.stdout else ""
        assert line.startswith("READY "), (line, p.stderr.read() if p.stderr else "")
        yield f"http://127.0.0.1:{int(line.split()[1])}"
    finally:
        p.terminate()
        p.wait(timeout=10)


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode()


@pytest.fixture(scope="module")
def instant() -> Iterator[str]:
    with _server("--burst", "4") as url:
        yield url


@pytest.mark.parametrize("api,prompts", [("completions", TEXT), ("chat", CHAT), ("completions", IDS)])
def test_counts_ttft_itl(instant: str, api: str, prompts: list[Prompt]) -> None:
    run = run_load(LoadSpec(instant, api=api, output_tokens=32, concurrency=4, num_requests=30), prompts)  # type: ignore[arg-type]
    assert len(run.results) == 30 and sorted(r.idx for r in run.results) == list(range(30))
    assert 0 < run.client_cpu_s < 10 * run.duration_s + 1
    for r in run.results:
        assert r.ok, r.error
        assert r.output_tokens == 32 and r.events == 32  # chat: the role chunk is not a token
        assert len(r.itl_s) == 31 and all(g >= 0 for g in r.itl_s)
        assert r.ttft_s is not None and 0 < r.ttft_s <= r.e2e_s  # type: ignore[operator]
        assert r.prompt_tokens is not None and r.prompt_tokens > 0
    if prompts is IDS:  # token ids are counted by the server exactly
        assert {r.prompt_tokens for r in run.results} == {40}
    m = aggregate(run.results, run.duration_s, concurrency=4)
    assert m["completed"] == 30 and m["failed"] == 0
    assert m["output_throughput"] == pytest.approx(30 * 32 / run.duration_s)


def test_without_usage_tokens_are_counted_from_events(instant: str) -> None:
    run = run_load(LoadSpec(instant, output_tokens=17, concurrency=2, num_requests=6, include_usage=False), TEXT)
    assert [r.output_tokens for r in run.results] == [17] * 6
    assert {r.prompt_tokens for r in run.results} == {40}  # the prompt's own count when the server says nothing


def test_sglang_generate_meta_info_accept_length() -> None:
    with _server("--accept-length", "4", "--num-spec-tokens", "3") as url:
        before = _get(url + "/metrics")
        run = run_load(LoadSpec(url, api="generate", output_tokens=30, concurrency=3, num_requests=9), IDS)
        after = _get(url + "/metrics")
    for r in run.results:
        assert r.ok, r.error
        assert r.output_tokens == 30 and r.spec_verify_ct == 8 and r.events == 8  # 7 steps of 4 + one of 2
        assert r.accept_len == pytest.approx(30 / 8)
        assert r.prompt_tokens == 40
    m = aggregate(run.results, run.duration_s, concurrency=3)
    assert m["accept_length_mean"] == pytest.approx(30 / 8)
    d = spec_delta(before, after)  # the same run seen through vLLM-style counters
    assert (d.drafts, d.accepted) == (72, 9 * 22) and d.accept_length == pytest.approx(30 / 8)


def test_paced_server_ttft_and_itl_are_measured() -> None:
    with _server("--burst", "1", "--ttft-ms", "30", "--itl-ms", "5") as url:
        run = run_load(LoadSpec(url, output_tokens=12, concurrency=2, num_requests=4), TEXT)
    ttfts = [r.ttft_s for r in run.results]
    itls = [g for r in run.results for g in r.itl_s]
    assert all(r.ok for r in run.results)
    assert all(0.030 <= t < 0.5 for t in ttfts)  # type: ignore[operator]
    assert len(itls) == 4 * 11 and 0.004 <= statistics.median(itls) < 0.05
    assert all(r.tpot_s is not None and r.tpot_s >= 0.004 for r in run.results)


def test_http_500_is_recorded_per_request() -> None:
    with _server("--fail-every", "3") as url:
        run = run_load(LoadSpec(url, output_tokens=8, concurrency=1, num_requests=9), TEXT)
    bad = [r.idx for r in run.results if not r.ok]
    assert bad == [2, 5, 8]
    assert all(r.error.startswith("HTTP 500:") and "injected failure" in r.error  # type: ignore[union-attr]
               for r in run.results if not r.ok)
    assert all(r.output_tokens == 8 for r in run.results if r.ok)
    m = aggregate(run.results, run.duration_s, concurrency=1)
    assert (m["completed"], m["failed"]) == (6, 3)


def test_connection_closed_mid_stream_then_reconnects() -> None:
    with _server("--close-every", "2", "--burst", "1") as url:
        run = run_load(LoadSpec(url, output_tokens=10, concurrency=1, num_requests=6), TEXT)
    assert [r.ok for r in run.results] == [True, False] * 3
    for r in run.results[1::2]:
        assert "closed mid-stream" in r.error and r.events == 5  # type: ignore[operator]
    assert all(r.output_tokens == 10 for r in run.results[0::2])


def test_error_event_in_stream() -> None:
    with _server("--error-event-every", "2") as url:
        run = run_load(LoadSpec(url, api="chat", output_tokens=10, concurrency=1, num_requests=4), CHAT)
    assert [r.error for r in run.results] == [None, "error event: injected mid-stream error"] * 2


def test_poisson_schedule() -> None:
    """The arrival schedule itself (pure, seeded): no wall clock involved, so it cannot flake on a busy machine."""
    from specbench.load.schedule import poisson_offsets

    offsets = poisson_offsets(80, 100.0, seed=5)
    gaps = [b - a for a, b in zip(offsets, offsets[1:])]
    assert len(offsets) == 80 and offsets[0] == 0.0 and poisson_offsets(80, 100.0, seed=5) == offsets
    assert 0.005 < statistics.mean(gaps) < 0.02  # 1 / rate = 10 ms
    assert statistics.pstdev(gaps) > 0.004  # exponential gaps, not a fixed tick


def test_poisson_arrivals() -> None:
    with _server("--burst", "1", "--ttft-ms", "40", "--itl-ms", "2") as url:
        run = run_load(LoadSpec(url, output_tokens=4, concurrency=None, request_rate=100.0, num_requests=80,
                                seed=5), TEXT)
    starts = sorted(r.start_s for r in run.results)
    assert all(r.ok for r in run.results)
    assert len(starts) == 80
    # open loop: requests overlap although each takes > 40 ms
    in_flight = max(sum(1 for r in run.results if r.start_s <= s < r.start_s + r.e2e_s) for s in starts)  # type: ignore[operator]
    assert in_flight >= 3
    capped = None
    with _server("--burst", "1", "--ttft-ms", "40") as url:
        capped = run_load(LoadSpec(url, output_tokens=2, concurrency=2, request_rate=200.0, num_requests=12), TEXT)
    cs = sorted(capped.results, key=lambda r: r.start_s)
    assert max(sum(1 for r in cs if r.start_s <= s.start_s < r.start_s + r.e2e_s) for s in cs) <= 2  # type: ignore[operator]


def test_duration_bound_and_warmup_not_counted() -> None:
    with _server("--burst", "1", "--itl-ms", "5") as url:
        m0 = _get(url + "/metrics")
        run = run_load(LoadSpec(url, output_tokens=10, concurrency=2, num_requests=1000, duration_s=0.4,
                                warmup_requests=3), TEXT)
        m1 = _get(url + "/metrics")
    n = len(run.results)
    assert 2 <= n < 30 and all(r.ok for r in run.results)
    assert max(r.start_s for r in run.results) < 0.4
    served = float(m1.split("vllm:request_success_total{")[1].split()[1]) - float(
        m0.split("vllm:request_success_total{")[1].split()[1])
    assert served == n + 3


def test_refused_connection_and_timeout_are_errors() -> None:
    with _server() as url:
        port = url.rsplit(":", 1)[1]
    run = run_load(LoadSpec(f"http://127.0.0.1:{port}", output_tokens=4, num_requests=2), TEXT)
    assert all(r.error and r.error.startswith("cannot connect") for r in run.results)
    with _server("--ttft-ms", "3000") as url:
        run = run_load(LoadSpec(url, output_tokens=4, num_requests=1, request_timeout_s=0.3), TEXT)
    assert run.results[0].error is not None and run.results[0].error.startswith("timed out after 0.3 s")


def test_bad_specs_are_user_errors(instant: str) -> None:
    with pytest.raises(UserError):
        LoadSpec("https://example.com")
    with pytest.raises(UserError):
        LoadSpec(instant, concurrency=None)
    with pytest.raises(UserError):
        run_load(LoadSpec(instant, api="chat", num_requests=1), TEXT)


def _vllm_chat_stream(n_content: int = 7, tokens: int = 24) -> bytes:
    """A response framed the way vLLM 0.32 (uvicorn) sends it: chunked, one chunk per SSE event, the role
    chunk first, a usage-only chunk (`choices: []`) and `[DONE]` last (captured from the local engine)."""
    head = (b"HTTP/1.1 200 OK\r\ndate: Mon, 30 Nov 2026 03:31:36 GMT\r\nserver: uvicorn\r\n"
            b"content-type: text/event-stream; charset=utf-8\r\nvary: Origin\r\ntransfer-encoding: chunked\r\n\r\n")
    base = b'{"id":"chatcmpl-a1","object":"chat.completion.chunk","created":1796009497,"model":"tiny-target",'
    events = [base + b'"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,'
                     b'"finish_reason":null}],"prompt_token_ids":null,"prompt_text":null}']
    for i in range(n_content):
        fin = b'"length","stop_reason":null' if i == n_content - 1 else b"null"
        events.append(base + b'"choices":[{"index":0,"delta":{"content":"OrOrOr"},"logprobs":null,'
                             b'"finish_reason":' + fin + b',"token_ids":null}]}')
    events.append(base + b'"choices":[],"usage":{"prompt_tokens":97,"total_tokens":%d,"completion_tokens":%d},'
                         b'"system_fingerprint":"vllm-0.32.0-9d79f66c"}' % (97 + tokens, tokens))
    events.append(b"[DONE]")
    body = b"".join(b"%x\r\n%s\r\n" % (len(b"data: " + e + b"\n\n"), b"data: " + e + b"\n\n") for e in events)
    return head + body + b"0\r\n\r\n"


def _feed(parts: list[bytes], api: str = "chat"):  # type: ignore[no-untyped-def]
    """Drive the client's protocol with these reads, as asyncio would deliver them."""
    from specbench.load import sse, stream

    class _Transport:
        def write(self, b: bytes) -> None: ...
        def close(self) -> None: ...
        def abort(self) -> None: ...
        def is_closing(self) -> bool:
            return False

    conn = stream.Conn()
    conn.transport = _Transport()  # type: ignore[assignment]
    rec = stream.Raw(0, 97)
    conn.rec, conn.state = rec, stream.HEAD
    for p in parts:
        conn.data_received(p)
    assert conn.rec is None, "response not recognised as finished"
    return sse.finalize(rec, api, rec.t0)


def test_stream_parsing_survives_any_split_into_reads() -> None:
    """Reads can split an event, the usage chunk or the last chunk anywhere (seen on the real engine under
    load: a usage chunk spread over three reads)."""
    raw = _vllm_chat_stream()
    expect = (24, 7, 97, 6)
    one = _feed([raw])
    assert (one.output_tokens, one.events, one.prompt_tokens, len(one.itl_s)) == expect and one.ok
    tiny = _feed([raw[i:i + 1] for i in range(len(raw))])
    assert (tiny.output_tokens, tiny.events, tiny.prompt_tokens, len(tiny.itl_s)) == expect
    for i in range(1, len(raw), 5):
        for j in range(i + 1, len(raw), 17):
            r = _feed([raw[:i], raw[i:j], raw[j:]])
            assert (r.output_tokens, r.events, r.prompt_tokens, len(r.itl_s)) == expect, (i, j)


def test_error_event_split_over_reads_is_still_an_error() -> None:
    raw = _vllm_chat_stream()
    err = b'data: {"error":{"object":"error","message":"engine died","type":"InternalServerError","code":500}}\n\n'
    cut = raw.index(b"0\r\n\r\n", len(raw) - 40)  # before the last chunk
    done = raw.rindex(b"\r\n", 0, raw.rindex(b"data: [DONE]")) + 2  # before the [DONE] chunk
    framed = b"%x\r\n%s\r\n" % (len(err), err)
    stream = raw[:done] + framed + raw[done:cut] + raw[cut:]
    k = stream.index(b'{"error"') + 3  # split inside `{"error"`: no read holds the whole key
    for parts in ([stream], [stream[:k], stream[k:]]):
        r = _feed(parts)
        assert r.error == "error event: engine died"
