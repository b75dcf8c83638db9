"""The API key a benchmarked server enforces, sent with every request specbench makes to it (engine-neutral).

A server started with `--api-key KEY` (SGLang server_args.py::ServerArgs.api_key@0.5.15.post1; vLLM
`--api-key` or VLLM_API_KEY, entrypoints/serve/middleware/register.py@0.32.0) answers 401 to a request without
`Authorization: Bearer KEY`, so readiness, read-back, /metrics and the load all carry it. The key comes from the
matrix's `api_key` or, failing that, the launch command's `--api-key`; it is held for the tuple being run (a
context variable: the thread that boots a server also measures it) and never written (redact.py masks it).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

_KEY: ContextVar[str | None] = ContextVar("specbench_server_api_key", default=None)


def launch_key(argv: Sequence[str]) -> str | None:
    """The value of `--api-key` in a launch command (`--api-key K` or `--api-key=K`; the last one wins)."""
    key = None
    for i, w in enumerate(argv):
        if w == "--api-key" and i + 1 < len(argv):
            key = argv[i + 1]
        elif w.startswith("--api-key="):
            key = w.partition("=")[2]
    return key or None


def current() -> str | None:
    return _KEY.get()


def headers() -> dict[str, str]:
    """The header for the server being run (empty without a key)."""
    key = _KEY.get()
    return {"Authorization": f"Bearer {key}"} if key else {}


@contextmanager
def using(key: str | None) -> Iterator[None]:
    """Send `key` with every request to the server for the duration of the block."""
    token = _KEY.set(key)
    try:
        yield
    finally:
        _KEY.reset(token)


def take_flag(argv: Sequence[str], flag: str) -> tuple[list[str], list[str]]:
    """argv without every `flag VALUE` / `flag=VALUE`, and the values taken (in order)."""
    out: list[str] = []
    values: list[str] = []
    skip = False
    for i, w in enumerate(argv):
        if skip:
            skip = False
            continue
        if w == flag and i + 1 < len(argv):
            values.append(argv[i + 1])
            skip = True
        elif w.startswith(flag + "="):
            values.append(w.partition("=")[2])
        else:
            out.append(w)
    return out, values
