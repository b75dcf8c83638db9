"""The bytes each API mode sends: the JSON body (`/v1/completions`, `/v1/chat/completions`, SGLang's
`/generate`) and the HTTP/1.1 request around it. Built before the run, off the hot path."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from specbench.errors import UserError
from specbench.load.prompts import Prompt
from specbench.load.results import PATHS, LoadSpec


def _sampling(spec: LoadSpec, *, seed_key: str) -> dict[str, Any]:
    """The sampling fields that are set; `top_k` and `ignore_eos` are vLLM / SGLang extras of the OpenAI body."""
    out: dict[str, Any] = {"temperature": spec.temperature}
    for key, value in (("top_p", spec.top_p), ("top_k", spec.top_k), (seed_key, spec.sampling_seed)):
        if value is not None:
            out[key] = value
    if spec.stop is not None:
        out["stop"] = list(spec.stop)
    if spec.ignore_eos:
        out["ignore_eos"] = True
    return out


def request_body(spec: LoadSpec, prompt: Prompt) -> dict[str, Any]:
    """The JSON body one request sends (`extra_body` merged last). The prompt's own output length wins over the
    spec's. SGLang /generate takes sampling in `sampling_params` (seed as `sampling_seed`,
    sglang/srt/sampling/sampling_params.py::SamplingParams@0.5.15); the OpenAI APIs at the top level."""
    out_tokens = prompt.output_tokens or spec.output_tokens
    if spec.api == "generate":
        sp: dict[str, Any] = {"max_new_tokens": out_tokens, **_sampling(spec, seed_key="sampling_seed")}
        body: dict[str, Any] = {"sampling_params": sp, "stream": True}
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


def http_request(spec: LoadSpec, body: dict[str, Any]) -> bytes:
    u = urlsplit(spec.base_url)
    path = (u.path.rstrip("/") + PATHS[spec.api]).encode()
    payload = json.dumps(body, separators=(",", ":")).encode()
    auth = b"Authorization: Bearer %s\r\n" % spec.api_key.encode() if spec.api_key else b""
    return (b"POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\n"
            b"%sContent-Length: %d\r\n\r\n" % (path, u.netloc.encode(), auth, len(payload))) + payload
