"""vLLM V0's graph headroom note (engines/vllm/caps.py): the fix leaves 2 GiB outside the budget where the GPU
has room for it, and on a GPU of about 2 GiB or less offers eager mode alone, never a utilization <= 0."""

from __future__ import annotations

import pytest

from specbench.engines.vllm.caps import _headroom_fixes
from specbench.logs.facts import LogFacts


def _utilization(fixes: list[dict]) -> float | None:
    return next((f["change"]["--gpu-memory-utilization"] for f in fixes
                 if "--gpu-memory-utilization" in f["change"]), None)


def test_a_large_gpu_gets_the_utilization_that_leaves_2_gib():
    fixes = _headroom_fixes(None, "", LogFacts(total_gpu_memory_gib=79.2, gpu_memory_utilization=0.99))  # type: ignore[arg-type]
    assert _utilization(fixes) == 0.97
    assert any("--enforce-eager" in f["change"] for f in fixes)


@pytest.mark.parametrize("total", [1.0, 2.0, 2.05, 0.0])
def test_a_tiny_gpu_gets_eager_mode_only(total: float):
    fixes = _headroom_fixes(None, "", LogFacts(total_gpu_memory_gib=total, gpu_memory_utilization=0.9))  # type: ignore[arg-type]
    assert _utilization(fixes) is None
    assert [list(f["change"]) for f in fixes] == [["--enforce-eager"]]


def test_the_graph_profiling_cap_names_the_asked_value_even_when_the_log_does_not():
    import re

    from specbench.engines.vllm.caps import _GRAPH_PROFILING, _graph_of

    line = ("CUDA graph memory profiling is enabled (default since v0.21.0). The current budget is equivalent to "
            "--gpu-memory-utilization=0.8812 without CUDA graph memory profiling.")
    m = _GRAPH_PROFILING.search(line)
    assert isinstance(m, re.Match)
    cap = _graph_of(m, LogFacts())
    assert cap is not None and cap.asked == 0.92 and cap.to == 0.8812 and "by default" in cap.why
    assert _graph_of(m, LogFacts(gpu_memory_utilization=0.95)).asked == 0.95  # type: ignore[union-attr]
