"""A context variable set for the duration of a block, and reset after it whatever happens: how specbench scopes a
per-run setting (the API key sent to the server being run, the revisions and `--quantization` a plan resolves with)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

T = TypeVar("T")


@contextmanager
def scoped(var: ContextVar[T], value: T) -> Iterator[None]:
    token = var.set(value)
    try:
        yield
    finally:
        var.reset(token)
