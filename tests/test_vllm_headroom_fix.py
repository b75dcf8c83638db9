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
