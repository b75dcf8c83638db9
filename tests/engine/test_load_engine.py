"""The load generator against the real local engine (vLLM CPU build, tiny-target as its own draft).

On the shared self-draft boot (conftest.py::self_draft_server, up already after test_engine_vllm_cpu.py). What
only a real engine can check: the prompts' exact lengths as the engine's
own tokenizer and chat template count them (`usage.prompt_tokens`), the context clamp against the
engine's real limit, and the spec-decode counters' accept length.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from engine_boot import SELF_DRAFT_TOKENS, Server
from specbench.engines.prometheus import spec_delta
from specbench.load.client import run_load
from specbench.load.metrics import aggregate
from specbench.load.prompts import CONTEXT_MARGIN, ChatTokenizer, build_prompts, clamp_lengths
from specbench.load.results import LoadSpec

pytestmark = pytest.mark.engine
MAX_LEN = 2048
NUM_SPEC = SELF_DRAFT_TOKENS


@pytest.fixture
def engine(self_draft_server: Server) -> tuple[str, str, Path]:
    cfg = self_draft_server.cfg
    assert cfg.max_model_len == MAX_LEN
    return cfg.base_url, cfg.served_name, Path(cfg.model)


def test_exact_chat_and_text_prompt_lengths_as_the_engine_counts(engine: tuple[str, str, Path]) -> None:
    url, name, model = engine
    tok = ChatTokenizer.from_dir(model)
    for api, mode, n_tokens in (("chat", "chat", 97), ("completions", "text", 130)):
        prompts = build_prompts(tok, n=6, prompt_tokens=n_tokens, mode=mode, seed=11)
        run = run_load(LoadSpec(url, api=api, model=name, output_tokens=24, concurrency=3, num_requests=6,  # type: ignore[arg-type]
                                warmup_requests=0), prompts)
        for r in run.results:
            assert r.ok, r.error
            assert r.prompt_tokens == n_tokens  # the engine's own usage.prompt_tokens
            assert r.output_tokens == 24
            # <=, not <: a CPU-starved frontend can deliver the whole stream in one socket read (TTFT = E2E, seen
            # on a loaded CI-like machine); the client reports that as coalesced delivery, not as a wrong measurement
            assert r.ttft_s is not None and r.e2e_s is not None and r.ttft_s <= r.e2e_s
            assert r.events >= 1 and len(r.itl_s) == r.events - 1


def test_spec_counters_give_the_self_draft_accept_length(engine: tuple[str, str, Path]) -> None:
    url, name, model = engine
    tok = ChatTokenizer.from_dir(model)
    before = httpx.get(url + "/metrics", timeout=10).text
    run = run_load(LoadSpec(url, api="chat", model=name, output_tokens=64, concurrency=2, num_requests=4),
                   build_prompts(tok, n=4, prompt_tokens=64, mode="chat", seed=3))
    after = httpx.get(url + "/metrics", timeout=10).text
    d = spec_delta(before, after)
    assert d.drafts > 0 and d.draft_tokens == pytest.approx(d.drafts * NUM_SPEC)
    # the target drafting for itself agrees with itself: (nearly) every draft token is accepted
    assert d.accept_length is not None and d.accept_length > 1 + 0.8 * NUM_SPEC
    m = aggregate(run.results, run.duration_s, concurrency=2, spec=d)
    assert m["completed"] == 4 and m["accept_length_source"] == "vllm_metrics"
    assert m["accept_length_mean"] == pytest.approx(d.accept_length)


def test_clamp_matches_the_engines_context_limit(engine: tuple[str, str, Path]) -> None:
    url, name, model = engine
    tok = ChatTokenizer.from_dir(model)
    c = clamp_lengths(5000, 100, MAX_LEN, margin=CONTEXT_MARGIN["vllm"])
    assert (c.prompt_tokens, c.output_tokens, c.clamped) == (MAX_LEN - 100, 100, True)
    fits = build_prompts(tok, n=1, prompt_tokens=c.prompt_tokens, mode="text", seed=1)
    run = run_load(LoadSpec(url, model=name, output_tokens=c.output_tokens, num_requests=1), fits)
    assert run.results[0].ok, run.results[0].error  # prompt + output == max_model_len is accepted
    over = build_prompts(tok, n=1, prompt_tokens=c.prompt_tokens + 1, mode="text", seed=1)
    run = run_load(LoadSpec(url, model=name, output_tokens=c.output_tokens, num_requests=1), over)
    # one token more: vLLM 0.32 does not refuse, it silently cuts max_tokens to max_model_len - prompt
    # (vllm/entrypoints/serve/utils/api_utils.py::get_max_tokens), which is why the clamp is recorded
    assert run.results[0].ok and run.results[0].output_tokens == c.output_tokens - 1


def test_the_engines_own_streams_take_the_fast_scan_and_any_spelling_counts_alike(
        engine: tuple[str, str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM's real streams (completions and chat, token ids asked and not, usage asked) are read by the fast byte scan
    alone: the JSON fallback is made to fail and is never reached; each count is the engine's own `usage`. The same
    events written again with Python's json.dumps default whitespace count the same through the fallback."""
    import json

    from specbench.load import counting

    base, name, _ = engine
    fallback = counting.compact_events

    def no_fallback(body: bytes) -> bytes:
        raise AssertionError(f"the JSON fallback ran on a vLLM stream: {body[:200]!r}")

    for path, api, req in (("/v1/completions", "completions", {"prompt": "Hello there, how"}),
                           ("/v1/chat/completions", "chat", {"messages": [{"role": "user", "content": "Hi"}]})):
        for ids in (True, False):
            body = {**req, "model": name, "max_tokens": 24, "ignore_eos": True, "stream": True,
                    "stream_options": {"include_usage": True}, **({"return_token_ids": True} if ids else {})}
            with httpx.stream("POST", base + path, json=body, timeout=120) as r:
                raw = b"".join(r.iter_raw())
            events = [json.loads(line[5:]) for line in raw.splitlines() if line.startswith(b"data:") and
                      line[5:].strip() != b"[DONE]"]
            assert events[-1]["usage"]["completion_tokens"] == 24
            monkeypatch.setattr(counting, "compact_events", no_fallback)
            fast = (counting.ids_count(raw, api, parse=False), counting.received_text(raw, api),
                    counting.essentials(raw))
            monkeypatch.setattr(counting, "compact_events", fallback)
            assert fast[0] == (24 if ids else None)
            assert fast[1] and (counting.ids_count(fast[2], api) == 24 if ids else
                                counting.received_text(fast[2], api) == fast[1])
            spaced = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"
            assert spaced != raw
            assert counting.ids_count(spaced, api, parse=False) is None  # the fast scan never guesses
            assert (counting.ids_count(spaced, api), counting.received_text(spaced, api)) == fast[:2]
