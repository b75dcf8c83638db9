"""matrix/cellrun.py::truth_verdict as a pure function: a cell whose server's numbers cannot be true becomes
`partial` with the reason and its acceptance cleared, in a new outcome; the metrics it was given stay as they were."""

from __future__ import annotations

import copy

from specbench.matrix.cellrun import CellOutcome, truth_verdict
from specbench.matrix.expansion import Cell


def _cell(algorithm: str) -> Cell:
    return Cell("c1", "s1", 0, 1, algorithm, algorithm, {"num_draft_tokens": 3}, {"concurrency": 1})


LIE = {"spec_counters": {"drafts": 10, "draft_tokens": 30, "accepted": 45}, "accept_length_mean": 2.5,
       "accept_length_common": 2, "draft_acceptance_rate": 1.5, "accept_lengths": [2, 3], "acceptance_per_pos": [1],
       "total_output_tokens": 100, "cap_check": "ok"}


def test_counters_that_cannot_be_true_make_a_new_partial_outcome_and_leave_the_input_alone() -> None:
    given = copy.deepcopy(LIE)
    out = truth_verdict(CellOutcome("done", None, given), _cell("draft_model"))
    assert given == LIE  # not mutated
    assert out.status == "partial" and "45 draft tokens accepted of 30 drafted" in (out.reason or "")
    assert out.metrics is not None and out.metrics["accept_length_mean"] is None and out.metrics["accept_lengths"] == []
    assert "acceptance_per_pos" not in out.metrics and out.metrics["acceptance_error"]


def test_a_failed_cell_keeps_its_status_but_never_stores_false_acceptance() -> None:
    out = truth_verdict(CellOutcome("failed", "server exited", dict(LIE)), _cell("draft_model"))
    assert out.status == "failed" and out.reason == "server exited"
    assert out.metrics is not None and out.metrics["draft_acceptance_rate"] is None


def test_an_autoregressive_cell_and_an_exceeded_cap() -> None:
    ok = truth_verdict(CellOutcome("done", None, dict(LIE)), _cell("ar"))
    assert ok.status == "done" and ok.metrics == LIE  # no speculative numbers are judged for AR
    capped = {**LIE, "cap_check": "exceeded", "cap_check_reason": "9 ran at once, the server's cap is 8"}
    out = truth_verdict(CellOutcome("done", None, capped), _cell("ar"))
    assert out.status == "partial" and out.reason == "9 ran at once, the server's cap is 8"
    assert truth_verdict(CellOutcome("failed", "x"), _cell("ar")).metrics is None
