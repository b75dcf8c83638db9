"""Pass 4 of the input fuzz (tests/fuzz/pass4_inputs.py, issue 37 item 8) through the real CLI: every file a user can
name, in every kind and encoding it arrives in, ends as a one-line error or a correct answer (no traceback, no hang,
no silent wrong result)."""

from __future__ import annotations

from pathlib import Path

from fuzz.harness import run_all
from fuzz.pass4_inputs import cases


def _warm() -> None:
    """Import what the commands import lazily, once here: each case is a fork of this process (harness.py)."""
    import specbench.commands.calibrate_quick  # noqa: F401
    import specbench.matrix.preflight  # noqa: F401
    import specbench.matrix.runner  # noqa: F401
    import specbench.predict.plan_matrix  # noqa: F401
    import specbench.report.build  # noqa: F401
    import specbench.report.export  # noqa: F401


def test_every_input_of_pass4_ends_as_an_error_or_a_correct_answer(tmp_path: Path) -> None:
    _warm()
    all_cases = cases(tmp_path)
    assert len(all_cases) >= 200
    tally, bad = run_all(all_cases)
    assert not bad, f"{dict(tally)}\n" + "\n".join(bad)
