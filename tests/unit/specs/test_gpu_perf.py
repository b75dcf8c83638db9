"""Every data-centre GPU of the memory catalog has roofline ceilings (specs/gpu.py::PERF), so `predict` moves a
calibration onto it with a stated range instead of leaving it unpredicted; and the ceilings stay in the order the
datasheets give (a board with faster memory is never given slower memory than a slower board)."""

from __future__ import annotations

import pytest

from specbench.specs.gpu import CATALOG, gpu_for, gpu_perf

DATA_CENTRE = ("h100", "h100-pcie", "h200", "h20", "h800", "b200", "b300", "gb200", "gb300", "a100", "a100-40gb",
               "a800", "l40s", "mi300x")


@pytest.mark.parametrize("name", DATA_CENTRE)
def test_a_data_centre_gpu_has_ceilings(name: str) -> None:
    perf = gpu_perf(gpu_for(name, None))
    assert perf is not None, name
    assert perf.mem_bw_gbs > 0 and perf.bf16_dense_tflops > 0 and perf.source


def _bandwidth(name: str) -> float:
    perf = gpu_perf(gpu_for(name, None))
    assert perf is not None, name
    return perf.mem_bw_gbs


def test_the_ceilings_keep_the_datasheets_order() -> None:
    assert _bandwidth("a800") < _bandwidth("h100") < _bandwidth("h200") < _bandwidth("b200") <= _bandwidth("gb200")
    for g in CATALOG:
        perf = gpu_perf(g)
        assert perf is None or perf.gpu == g.name
