"""One memo for what is derived from a ModelSpec: a plan's fix search and a predicted matrix ask for the same model's
weights, shapes and variants hundreds of times, always through the same spec object.

Keyed on (kind, the spec object's id, the rest of the key); the spec is kept in the value, so its id() cannot be reused
by another spec while the entry lives. Bounded: cleared past MAX_ENTRIES."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from specbench.specs.model_types import ModelSpec

T = TypeVar("T")
MAX_ENTRIES = 4096
_CACHE: dict[tuple[Hashable, ...], tuple[ModelSpec, Any]] = {}


def per_spec(kind: str, m: ModelSpec, *key: Hashable, compute: Callable[[], T]) -> T:
    """compute(), once per (kind, spec object, key)."""
    k = (kind, id(m), *key)
    hit = _CACHE.get(k)
    if hit is not None and hit[0] is m:
        return hit[1]  # type: ignore[no-any-return]
    v = compute()
    if len(_CACHE) > MAX_ENTRIES:
        _CACHE.clear()
    _CACHE[k] = (m, v)
    return v
