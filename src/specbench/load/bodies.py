"""The bytes each API mode sends: the JSON body (`/v1/completions`, `/v1/chat/completions`, SGLang's
`/generate`) and the HTTP/1.1 request around it. Built before the run, off the hot path."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Literal, TypedDict
from urllib.parse import urlsplit

from specbench.errors import UserError
from specbench.load.prompts import Prompt
from specbench.load.results import PATHS, LoadSpec


class Sampling(TypedDict, total=False):
    """The sampling fields of a request body, in the order they are sent: the seed is `seed` on the OpenAI APIs,
    `sampling_seed` in SGLang's `sampling_params`."""
    temperature: float
    top_p: float
    top_k: int
    seed: int
    sampling_seed: int
    stop: list[str]
    ignore_eos: bool


def _sampling(spec: LoadSpec, *, seed_key: Literal["seed", "sampling_seed"]) -> Sampling:
    """The sampling fields that are set; `top_k` and `ignore_eos` are vLLM / SGLang extras of the OpenAI body."""
    out: Sampling = {"temperature": spec.temperature}
    if spec.top_p is not None:
        out["top_p"] = spec.top_p
    if spec.top_k is not None:
        out["top_k"] = spec.top_k
    if spec.sampling_seed is not None:
        out[seed_key] = spec.sampling_seed
    if spec.stop is not None:
        out["stop"] = list(spec.stop)
    if spec.ignore_eos:
        out["ignore_eos"] = True
    return out


def request_body(spec: LoadSpec, prompt: Prompt) -> dict[str, object]:
    """The JSON body one request sends (`extra_body` merged last, so its keys are open: the body is only serialized,
    never read back). The prompt's own output length wins over the spec's. SGLang /generate takes sampling in `sampling_params` (seed as `sampling_seed`,
    sglang/srt/sampling/sampling_params.py::SamplingParams@0.5.15); the OpenAI APIs at the top level."""
    out_tokens = prompt.output_tokens or spec.output_tokens
    if spec.api == "generate":
        sp: dict[str, object] = {"max_new_tokens": out_tokens, **_sampling(spec, seed_key="sampling_seed")}
        body: dict[str, object] = {"sampling_params": sp, "stream": True}
        if prompt.token_ids is not None:
            body["input_ids"] = list(prompt.token_ids)
        elif prompt.text is not None:
            body["text"] = prompt.text
        else:
            raise UserError("the /generate api takes text or token-id prompts, not chat messages")
    else:
        body = {"model": spec.model, "max_tokens": out_tokens, "stream": True, **_sampling(spec, seed_key="seed")}
        if spec.include_usage:
            body["stream_options"] = {"include_usage": True}
        if spec.api == "chat":
            if prompt.messages is None:
                raise UserError("the chat api needs chat prompts (prompt mode 'chat')")
            body["messages"] = list(prompt.messages)
        elif prompt.messages is not None:
            raise UserError("the completions api takes text or token-id prompts, not chat messages")
        else:
            body["prompt"] = prompt.text if prompt.text is not None else list(prompt.token_ids or ())
    body.update(spec.extra_body)
    return body


def http_request(spec: LoadSpec, body: Mapping[str, object]) -> bytes:
    u = urlsplit(spec.base_url)
    path = (u.path.rstrip("/") + PATHS[spec.api]).encode()
    payload = json.dumps(body, separators=(",", ":")).encode()
    auth = b"Authorization: Bearer %s\r\n" % spec.api_key.encode() if spec.api_key else b""
    return (b"POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\n"
            b"%sContent-Length: %d\r\n\r\n" % (path, u.netloc.encode(), auth, len(payload))) + payload
