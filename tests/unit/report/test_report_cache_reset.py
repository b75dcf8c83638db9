"""The prefix-cache reset outcome as the report's integrity reads it (report/integrity.py, matrix/cellrun.py
::no_reset_route): a reset that failed is warned beside the cell; a server with no reset route (none offered, or a
404 because vLLM mounts /reset_prefix_cache only with VLLM_SERVER_DEV_MODE=1) is stated as "no route", not warned."""

from __future__ import annotations

from typing import Any

import pytest

from specbench.matrix.cellrun import NO_RESET_ROUTE, no_reset_route
from specbench.report.integrity import integrity
from specbench.stored.records import CellRecord

NOT_MOUNTED = '/reset_prefix_cache: HTTP 404 {"detail":"Not Found"}'  # vllm serve 0.32.0 without dev mode


def _cell(reset: dict[str, Any] | None) -> CellRecord:
    metrics: dict[str, Any] = {"output_throughput": 100.0, "effective_concurrency": 1}
    if reset is not None:
        metrics["prefix_cache_reset"] = reset
    return CellRecord(cell_id="c1", server_id="s1", phase=1, tp=1, algorithm="ngram", label="ngram", status="done",
                      reason=None, attempts=1, started_at=0.0, ended_at=1.0, metrics=metrics,
                      server={"algorithm": "ngram", "label": "ngram"},
                      client={"concurrency": 1, "num_requests": 3, "dataset": "specbench-edit"}, clamp={},
                      log_text=None, diagnosis=None)


@pytest.mark.parametrize(("how", "route_missing"), [
    (NO_RESET_ROUTE, True),
    (NOT_MOUNTED, True),
    ("/flush_cache: HTTP 200 Cache flushed.", False),
    ("/flush_cache: HTTP 400 Cache not flushed: there are running requests", False),
    ("/reset_prefix_cache: ConnectError: [Errno 111] Connection refused", False),
    (None, False),
])
def test_which_outcomes_mean_no_route(how: str | None, route_missing: bool) -> None:
    assert no_reset_route(how) is route_missing


def test_a_route_that_is_not_mounted_is_stated_not_warned() -> None:
    i = integrity(_cell({"reset": False, "how": NOT_MOUNTED}))
    assert i.cache_reset is False
    assert not any("prefix cache" in w for w in i.warnings)


def test_a_reset_that_failed_is_warned_with_the_answer() -> None:
    how = "/flush_cache: HTTP 400 Cache not flushed: there are running requests"
    i = integrity(_cell({"reset": False, "how": how}))
    assert f"prefix cache not emptied before the cell ({how})" in i.warnings


def test_a_reset_that_worked_is_neither() -> None:
    i = integrity(_cell({"reset": True, "how": "/reset_prefix_cache: HTTP 200"}))
    assert i.cache_reset is True and not any("prefix cache" in w for w in i.warnings)
