"""Pass 4 of the planner fuzz (tests/fuzz/pass4_planner.py, issues 36 and 37) through the real CLI: every planner
input a user plausibly gets wrong ends as a one-line error or a correct answer (no traceback, no hang, no silent
wrong result)."""

from __future__ import annotations

from pathlib import Path

from fuzz.harness import run_all
from fuzz.pass4_planner import cases, run


def test_every_planner_input_of_pass4_ends_as_an_error_or_a_correct_answer(tmp_path: Path) -> None:
    import specbench.commands.plan  # noqa: F401  (each case is a fork of this process: import once here)
    import specbench.doctor.whatif  # noqa: F401

    all_cases = cases(tmp_path)
    assert len(all_cases) >= 120
    tally, bad = run_all(all_cases, run)
    assert not bad, f"{dict(tally)}\n" + "\n".join(bad)
