"""The bytes each API mode sends: the JSON body (`/v1/completions`, `/v1/chat/completions`, SGLang's
`/generate`) and the HTTP/1.1 request around it. Built before the run, off the hot path."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from specbench.errors import UserError
from specbench.load.prompts import Prompt
from specbench.load.results import PATHS, LoadSpec


def request_body(spec: LoadSpec, prompt: Prompt) -> dict[str, Any]:
    """The JSON body one request sends (`extra_body` merged last)."""
    if spec.api == "generate":
        sp: dict[str, Any] = {"max_new_tokens": spec.output_tokens, "temperature": spec.temperature}
        if spec.ignore_eos:
            sp["ignore_eos"] = True
        body: dict[str, Any] = {"sampling_params": sp, "stream": True}
        if prompt.token_ids is not None:
            body["input_ids"] = list(prompt.token_ids)
        elif prompt.text is not None:
            body["text"] = prompt.text
        else:
            raise UserError("the /generate api takes text or token-id prompts, not chat messages")
    else:
        body = {"model": spec.model, "max_tokens": spec.output_tokens, "temperature": spec.temperature,
                "stream": True}
        if spec.include_usage:
            body["stream_options"] = {"include_usage": True}
        if spec.ignore_eos:
            body["ignore_eos"] = True
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
