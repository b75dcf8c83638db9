"""The shared nearest-fix searches (engines/search.py) against a linear scan, on every monotone predicate."""

from hypothesis import given
from hypothesis import strategies as st

from specbench.engines.search import first_true, last_true


@given(st.integers(-50, 50), st.integers(-50, 50), st.integers(-60, 60))
def test_last_true_is_the_largest_passing_value(lo, hi, cut):
    calls = []

    def ok(x: int) -> bool:
        calls.append(x)
        return x <= cut

    linear = [x for x in range(lo, hi + 1) if x <= cut]
    got = last_true(lo, hi, ok)
    assert got == (linear[-1] if linear and linear[0] == lo else None)
    assert len(calls) <= 2 + max(hi - lo + 1, 1).bit_length()  # a binary search, not a scan


@given(st.lists(st.floats(0, 1), max_size=40).map(sorted), st.floats(-0.5, 1.5))
def test_first_true_is_the_smallest_passing_value(vals, cut):
    got = first_true(vals, lambda v: v >= cut)
    assert got == next((v for v in vals if v >= cut), None)
