"""The fuzz suite: hostile configs, launch commands, matrices, logs and stores through the real CLI (a forked
child per example, memory-capped, with a timeout; tests/fuzz/harness.py). Every example must end as a one-line
error or a correct answer: no traceback, no hang, no silent wrong result. `tools/fuzz_report.py` runs the same
strategies at a larger count and prints the category table."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from fuzz.harness import Case, run_case
from fuzz.strategies import CATEGORIES

EXAMPLES = {"config": 25, "launch": 25, "matrix": 25, "logs": 20, "stores": 20}


@pytest.mark.parametrize("name", sorted(CATEGORIES))
def test_every_input_ends_as_an_error_or_a_correct_answer(name: str) -> None:
    @settings(max_examples=EXAMPLES[name], deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck), phases=[Phase.generate])  # no shrinking: one fork each
    @given(CATEGORIES[name]())
    def one(case: Case) -> None:
        cls, why, _ = run_case(case)
        assert cls in ("error", "correct"), f"{cls}: {why} <- {case.what}"

    one()
