"""The nearest-fix searches every engine's planner shares: binary searches over a predicate that is monotone in
the searched value (a larger request count or context only takes memory away; a larger memory fraction only gives
memory back), so a per-TP table of fixes costs a few dozen plans instead of one per value. Pure."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def last_true(lo: int, hi: int, ok: Callable[[int], bool]) -> int | None:
    """The largest x in [lo, hi] with ok(x), for ok true then false; None when ok(lo) is false or hi < lo."""
    if hi < lo or not ok(lo):
        return None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def first_true(vals: Sequence[T], ok: Callable[[T], bool]) -> T | None:
    """The first value of the sorted `vals` with ok(v), for ok false then true; None when none (or no values)."""
    if not vals or not ok(vals[-1]):
        return None
    lo, hi = 0, len(vals) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(vals[mid]):
            hi = mid
        else:
            lo = mid + 1
    return vals[lo]
