"""Per-request identity and counts (load/honesty.py) through the streaming client against the instant server, a real
subprocess on 127.0.0.1, lying or honest in one way at a time: the answer's model, the prompt tokens, one answer to
different prompts, and events without text between tokens."""

from __future__ import annotations

import pytest

from specbench.load.client import run_load
from specbench.load.prompts import Prompt
from specbench.load.results import LoadSpec
from test_load_client import CHAT, IDS, TEXT, _server

IDS_BODY = {"return_token_ids": True}  # vLLM's field: each streamed choice carries its token ids


@pytest.mark.parametrize("api,prompts,extra", [("completions", TEXT, {}), ("chat", CHAT, {}),
                                               ("completions", TEXT, IDS_BODY), ("chat", CHAT, IDS_BODY)])
def test_events_without_text_are_no_tokens_and_have_no_times(api: str, prompts: list[Prompt],
                                                              extra: dict[str, bool]) -> None:
    """An honest server that sends an empty event between every two tokens (31 events for 16 tokens) is measured:
    16 content events, 15 gaps between them, the 16 tokens it said and sent."""
    with _server("--empty-events", "--burst", "1") as url:
        run = run_load(LoadSpec(url, api=api, output_tokens=16, concurrency=3, num_requests=9, extra_body=extra),  # type: ignore[arg-type]
                       prompts)
    for r in run.results:
        assert r.ok, r.error
        assert (r.events, len(r.itl_s), r.output_tokens, r.server_output_tokens) == (16, 15, 16, 16)
        assert r.count_source == ("token_ids" if extra else None)


def test_the_answer_must_name_the_model_the_request_asked_for() -> None:
    with _server() as url:  # honest: echoes the request's model, whatever it is
        ok = run_load(LoadSpec(url, model="served-x", output_tokens=8, concurrency=2, num_requests=4), TEXT)
    assert all(r.ok for r in ok.results), [r.error for r in ok.results]
    with _server("--answer-model", "other") as url:
        bad = run_load(LoadSpec(url, api="chat", model="served-x", output_tokens=8, concurrency=2, num_requests=4),
                       CHAT)
    for r in bad.results:
        assert r.error is not None and "'other'" in r.error and "'served-x'" in r.error


def test_an_answer_naming_another_name_the_server_serves_is_honest() -> None:
    """vLLM with --served-model-name first alias answers every request with its first name, whatever alias the
    request asked (entrypoints/openai/models/serving.py::OpenAIServingModels.model_name@0.32.0): an answer naming a
    name /v1/models listed at boot is the same server; a name it never listed is not."""
    with _server("--answer-model", "first") as url:
        same = run_load(LoadSpec(url, model="second", served_models=("first", "second"), output_tokens=8,
                                 concurrency=2, num_requests=4), TEXT)
        other = run_load(LoadSpec(url, model="second", served_models=("second", "third"), output_tokens=8,
                                  concurrency=2, num_requests=4), TEXT)
    assert all(r.ok for r in same.results), [r.error for r in same.results]
    assert all(r.error is not None and "'first'" in r.error for r in other.results)


def test_prompt_tokens_are_the_clients_and_the_servers_are_checked() -> None:
    with _server() as url:  # token ids are counted by the server; text is not (null): the client's count either way
        ids = run_load(LoadSpec(url, output_tokens=8, concurrency=2, num_requests=4), IDS)
        text = run_load(LoadSpec(url, output_tokens=8, concurrency=2, num_requests=4), TEXT)
    assert {(r.ok, r.prompt_tokens) for r in ids.results + text.results} == {(True, 40)}
    with _server("--prompt-tokens-lie", "3") as url:
        for api, prompts in (("completions", IDS), ("generate", IDS), ("chat", CHAT)):
            run = run_load(LoadSpec(url, api=api, output_tokens=8, concurrency=2, num_requests=4), prompts)  # type: ignore[arg-type]
            for r in run.results:
                assert r.error is not None and "prompt_tokens=3" in r.error and "sent 40" in r.error, (api, r.error)


# prompts unlike each other (a cache's or a stub's one answer to these is no model's); TEXT / IDS differ in one word
# or shift by one token, and a model may honestly answer near-identical prompts alike (below)
_WORDS = ("apple", "river", "engine", "violet", "granite", "harbor", "lantern", "meadow", "quartz", "saddle", "tundra",
          "walnut", "zephyr", "bishop", "cobalt", "dynamo")
UNLIKE_TEXT = [Prompt(40, text=" ".join(_WORDS[(i * 5 + k * (i + 3)) % len(_WORDS)] + str(k * i)
                                         for k in range(30))) for i in range(64)]
UNLIKE_IDS = [Prompt(40, token_ids=tuple((i * 7919 + k * (104729 + 13 * i)) % 30000 for k in range(40)))
              for i in range(64)]


@pytest.mark.parametrize("api,prompts,extra", [("completions", UNLIKE_TEXT, {}),
                                               ("completions", UNLIKE_TEXT, IDS_BODY), ("generate", UNLIKE_IDS, {})])
def test_one_answer_to_different_prompts_is_a_cache_not_a_model(api: str, prompts: list[Prompt],
                                                                 extra: dict[str, bool]) -> None:
    with _server("--same-answer") as url:
        stub = run_load(LoadSpec(url, api=api, output_tokens=16, concurrency=2, num_requests=6, extra_body=extra),  # type: ignore[arg-type]
                        prompts)
        # the same prompt sent again, short answers, or too few different prompts say nothing
        again = run_load(LoadSpec(url, api=api, output_tokens=16, concurrency=2, num_requests=6, extra_body=extra),  # type: ignore[arg-type]
                         prompts[:1])
        short = run_load(LoadSpec(url, api=api, output_tokens=4, concurrency=2, num_requests=6, extra_body=extra),  # type: ignore[arg-type]
                         prompts)
        two = run_load(LoadSpec(url, api=api, output_tokens=16, concurrency=2, num_requests=6, extra_body=extra),  # type: ignore[arg-type]
                       prompts[:2])
    for r in stub.results:
        assert r.error is not None and "same answer" in r.error and "6 of 6 different prompts" in r.error
    for run in (again, short, two):
        assert all(r.ok for r in run.results), [r.error for r in run.results]
    with _server() as url:  # honest: each prompt its own answer
        honest = run_load(LoadSpec(url, api=api, output_tokens=16, concurrency=2, num_requests=6, extra_body=extra),  # type: ignore[arg-type]
                          prompts)
    assert all(r.ok for r in honest.results) and len({r.answer_digest for r in honest.results}) == 6


@pytest.mark.parametrize("api,prompts", [("completions", TEXT), ("generate", IDS)])
def test_one_answer_to_near_identical_prompts_may_be_a_model(api: str, prompts: list[Prompt]) -> None:
    """Prompts that differ in one word (TEXT) or shift by one token (IDS): a real model may continue them alike (the
    engine test's tiny model answered code prompts that differ in one identifier per line identically, issue 37), so
    one answer to them is not taken for a cache."""
    with _server("--same-answer") as url:
        run = run_load(LoadSpec(url, api=api, output_tokens=16, concurrency=2, num_requests=6), prompts)  # type: ignore[arg-type]
    assert all(r.ok for r in run.results), [r.error for r in run.results]
