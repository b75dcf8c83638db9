"""The plausible-but-wrong fuzz (tests/fuzz/plausible.py, #23) through the real CLI, a few examples per category:
every one must end as a one-line error or a correct answer (no traceback, no hang, no silent wrong result).
`tools/fuzz_report.py --strategy plausible` runs the same strategies at 600+ inputs."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from fuzz.harness import Case, run_case
from fuzz.plausible import PLAUSIBLE


@pytest.mark.parametrize("name", sorted(PLAUSIBLE))
def test_every_plausible_slip_ends_as_an_error_or_a_correct_answer(name: str) -> None:
    @settings(max_examples=8, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck), phases=[Phase.generate])  # no shrinking: one fork each
    @given(PLAUSIBLE[name]())
    def one(case: Case) -> None:
        cls, why, _ = run_case(case)
        assert cls in ("error", "correct"), f"{cls}: {why} <- {case.what}"

    one()
