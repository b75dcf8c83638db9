"""load/counting.py on real stream bodies (the bytes testing/instant_bodies.py frames, as uvicorn does) and a real
tokenizer: token ids counted (SGLang's cumulative and incremental `output_ids`, vLLM's `token_ids` deltas), text
re-tokenized, and every rule that makes a server's count untrustworthy."""

from __future__ import annotations

import pytest

from run_helpers import make_tokenizer
from specbench.load import counting
from specbench.load.counting import Counted, check, ids_count, received_text
from specbench.testing.instant_bodies import sse, stream_events, text, truth_event

# slow: a whole `specbench run` or a process fault per test, seconds each: `make test-fast` leaves it out
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tok(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from specbench.load.prompts import ChatTokenizer

    return ChatTokenizer.from_dir(make_tokenizer(tmp_path_factory.mktemp("tok")))


def test_generate_output_ids_cumulative_and_incremental() -> None:
    cumulative = b"".join(stream_events("generate", 16, 3, "m"))  # SGLang's default: the whole list each event
    assert ids_count(cumulative, "generate") == 16
    incremental = b"".join(sse({"text": "x", "output_ids": list(range(k)), "meta_info": {}}) for k in (3, 3, 1, 2))
    assert ids_count(incremental, "generate") == 9  # --incremental-streaming-output: deltas summed
    # only the last events kept (the hot path's tail): deltas of a longer answer cannot be summed, cumulative lists can
    assert ids_count(incremental, "generate", events=12) is None
    assert ids_count(cumulative, "generate", events=40) == 16
    assert ids_count(b"".join(stream_events("completions", 4, 1, "m")), "generate") is None


def test_vllm_token_ids_deltas_are_summed_and_prompt_ids_ignored() -> None:
    body = sse({"choices": [{"index": 0, "text": " a", "prompt_token_ids": [5, 6, 7], "token_ids": [1]}]})
    body += b"".join(truth_event("completions", 1, k, False, "m", True, None) for k in (2, 3))
    assert ids_count(body, "completions") == 6
    assert ids_count(b"".join(stream_events("completions", 8, 1, "m")), "completions") is None  # not asked


def test_text_is_decoded_from_json_escapes(tok) -> None:  # type: ignore[no-untyped-def]
    body = sse({"choices": [{"delta": {"content": 'say "hi"\n\\ \u00e9'}}]}) + sse({"choices": [{"delta": {
        "reasoning_content": "think"}}]}) + sse({"choices": [{"delta": {"content": "!"}}]})
    assert received_text(body, "chat") == 'say "hi"\n\\ \u00e9!think'  # the answer, then the reasoning
    assert received_text(sse({"choices": [{"text": 'a\\"b'}]}), "completions") == 'a\\"b'
    chat = b"".join(truth_event("chat", p, k, False, "m", False, None) for p, k in ((0, 0), (0, 5), (5, 3)))
    assert received_text(chat, "chat") == text(0, 8)
    counter = counting.tokenizer_counter(tok)
    assert counter is not None
    assert counter([received_text(chat, "chat")]) == [len(tok.tokenizer.encode(text(0, 8),
                                                                                add_special_tokens=False).ids)]


def test_counts_that_cannot_be_trusted() -> None:
    ids = Counted(16, "token_ids")
    tok = Counted(17, "tokenizer")
    none = Counted(None, None)
    assert check(16, ids, 16, 16) == (16, None)
    assert check(16, tok, 16, 16) == (16, None)  # within the tokenizer's tolerance: the server's count is kept
    assert check(None, tok, 16, 16) == (17, None)  # no usage: the client's count
    for server, asked, want in ((-16, 16, "negative"), (160, 16, "more than the max_tokens=16"),
                                (4, 16, "fewer than the 16 content"), (17, 32, "but the client counted 16")):
        _, why = check(server, ids, asked, 16)
        assert why is not None and want in why and str(server) in why, (server, why)
    # without ids, the content events bound the count from below
    _, why = check(4, none, 16, 16)
    assert why is not None and "fewer than the 16 content" in why
    # with them, an event that carried no new id is no token: SGLang after retracting a request (the H100 MoE store
    # at 8,192 tokens, c = 32: 129 events, 128 ids, completion_tokens 128) is honest
    assert check(128, Counted(128, "token_ids"), 128, 129) == (128, None)
    _, why = check(126, Counted(128, "token_ids"), 128, 129)
    assert why is not None and "but the client counted 128" in why
    # but on /generate the ids are the server's own list: events well beyond it still contradict the count
    for server, events in ((4, 16), (1, 500), (128, 134)):
        _, why = check(server, Counted(server, "token_ids"), 512, events)
        assert why is not None and f"fewer than the {events} content" in why, (server, events, why)
    _, why = check(0, none, 16, 3)
    assert why is not None and "completion_tokens=0" in why
    _, why = check(20, Counted(16, "tokenizer"), 32, 4)
    assert why is not None and "tolerance 2" in why  # max(2, 10% of 16)
    assert check(100, Counted(97, "tokenizer"), 128, 50) == (100, None)  # 10% of 97 -> 10 tokens
    assert counting.server_count(12.5)[1] is not None and counting.server_count("12")[1] is not None
    assert counting.server_count(True)[1] is not None and counting.server_count(12.0) == (12, None)


def test_bodies_cut_past_the_memory_budget_count_the_same(tok, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """A run past KEEP_BODY_BYTES cuts each body as its request ends (counting.essentials): a real instant server,
    token ids and text, every request still counted exactly."""
    import subprocess
    import sys

    from specbench.load import client
    from specbench.load.prompts import Prompt
    from specbench.load.results import LoadSpec

    proc = subprocess.Popen([sys.executable, "-m", "specbench.testing.instant_server", "--port", "0", "--burst", "4",
                             "--accept-length", "3"], stdout=subprocess.PIPE, text=True)
    try:
        port = int((proc.stdout.readline() if proc.stdout else "READY 0").split()[1])
        for budget in (client.KEEP_BODY_BYTES, 0):
            monkeypatch.setattr(client, "KEEP_BODY_BYTES", budget)
            for extra, source in (({"return_token_ids": True}, "token_ids"), ({}, "tokenizer")):
                spec = LoadSpec(f"http://127.0.0.1:{port}", model="instant", output_tokens=40, concurrency=3,
                                       num_requests=6, extra_body=extra, token_counter=counting.tokenizer_counter(tok))
                run = client.run_load(spec, [Prompt(4, text="hello there")])
                assert all(r.ok for r in run.results), [r.error for r in run.results]
                assert {(r.output_tokens, r.count_source) for r in run.results} == {(40, source)}
                assert {r.counted_tokens for r in run.results} <= {40, 41, 42}  # re-tokenized text: within 2
    finally:
        proc.kill()
        proc.wait()


def test_every_json_spelling_is_measured_alike(tok, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """One real instant server per spelling of its stream's JSON (`--json-style`: compact as the engines write it,
    `spaces` as Python's json.dumps by default, `loose` every other spelling at once), the same load against each on
    every API, token ids asked and not, with an error event mid-stream every 5th request, bodies kept whole and cut
    past the memory budget: every request ends the same, counted the same way, to the same numbers."""
    import subprocess
    import sys

    from specbench.load import client
    from specbench.load.prompts import Prompt
    from specbench.load.results import LoadSpec

    def measured(style: str, budget: int) -> list[tuple[object, ...]]:
        proc = subprocess.Popen([sys.executable, "-m", "specbench.testing.instant_server", "--port", "0", "--burst",
                                 "4", "--accept-length", "3", "--error-event-every", "5", "--json-style", style],
                                stdout=subprocess.PIPE, text=True)
        out: list[tuple[object, ...]] = []
        try:
            port = int((proc.stdout.readline() if proc.stdout else "READY 0").split()[1])
            monkeypatch.setattr(client, "KEEP_BODY_BYTES", budget)
            for api in ("completions", "chat", "generate"):
                prompt = Prompt(4, messages=({"role": "user", "content": "hello"},)) if api == "chat" else \
                    Prompt(4, text="hello there")
                for extra in ({"return_token_ids": True}, {}):
                    spec = LoadSpec(f"http://127.0.0.1:{port}", model="instant", output_tokens=40, concurrency=1,
                                    num_requests=6, warmup_requests=0, api=api, extra_body=extra,
                                    token_counter=counting.tokenizer_counter(tok))
                    run = client.run_load(spec, [prompt])
                    out += [(api, bool(extra), r.output_tokens, r.counted_tokens, r.count_source,
                             r.server_output_tokens, r.events, r.spec_verify_ct, r.error) for r in run.results]
        finally:
            proc.kill()
            proc.wait()
        return out

    for budget in (1 << 28, 0):
        compact = measured("compact", budget)
        assert sum(1 for *_, error in compact if error is None) == 29  # 36 requests, every 5th an error event
        assert {e for *_, e in compact if e} == {"error event: injected mid-stream error"}
        assert {(api, ids, n, src) for api, ids, n, _, src, *_ in compact if n} == {
            ("completions", True, 40, "token_ids"), ("completions", False, 40, "tokenizer"),
            ("chat", True, 40, "token_ids"), ("chat", False, 40, "tokenizer"),
            ("generate", True, 40, "token_ids"), ("generate", False, 40, "token_ids")}
        for style in ("spaces", "loose"):
            assert measured(style, budget) == compact, (style, budget)
