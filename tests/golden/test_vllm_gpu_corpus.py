"""The public vLLM GPU startup logs of tests/data/vllm-gpu-corpus/ (README there) and the rules fitted to them
(engines/vllm/gpu_fit.py, engines/vllm/gpu.py): every check a log can be put to is within 5% (the pool from the log's
own KV memory within 2%), the per-card totals are the logs' own (gpu_fit.py::fit_vllm_totals), and the CUDA-graph
price is the least squares line the logs give. The checks are benchmarks/vllm_gpu_corpus.py's, run here on the stored logs; its table is in
benchmarks/RESULTS.md."""

from __future__ import annotations

import importlib.util
import json
import statistics

import pytest

from paths import ROOT
from specbench.engines.vllm.gpu_fit import (
    GRAPH_GIB_PER_GRAPH,
    GRAPH_SHARED_GIB,
    VLLM_TOTALS,
    fit_graph_price,
    fit_vllm_totals,
    total_reading,
)

LOGS = json.loads((ROOT / "tests" / "data" / "vllm-gpu-corpus" / "logs.json").read_text())
TOL = 0.05


def _bench():
    spec = importlib.util.spec_from_file_location("vllm_gpu_corpus", ROOT / "benchmarks" / "vllm_gpu_corpus.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def rows():
    return _bench().log_checks(LOGS)


def test_the_corpus_is_public_logs_with_their_sources():
    assert len(LOGS) >= 20 and len({e["id"] for e in LOGS}) == len(LOGS)
    for e in LOGS:
        assert e["url"].startswith("https://github.com/") and e["excerpt"] and e["logged"], e["id"]
    cards = {e["gpu"] for e in LOGS if e.get("gpu")}
    assert {"RTX 5090", "RTX 3090", "H100 80GB", "A100 80GB", "B200", "DGX Spark GB10", "MI300X"} <= cards


def test_every_check_a_log_supports_is_within_five_percent(rows):
    scored = [r for r in rows if r["ok"] is not None]
    kinds = {r["check"] for r in scored}
    assert {"pool", "budget", "requested", "activation"} <= kinds
    assert len({r["id"] for r in scored if r["check"] in ("pool", "budget")}) >= 8
    misses = [r for r in scored if abs(r["got"] - r["want"]) > TOL * abs(r["want"])]
    assert misses == []


def test_the_pool_from_the_logs_own_kv_memory_is_near_exact(rows):
    pool = [r for r in rows if r["check"] == "pool"]
    assert len(pool) >= 4
    for r in pool:
        assert abs(r["got"] - r["want"]) <= 0.02 * r["want"], r["id"]
    assert any(r["got"] == r["want"] for r in pool)  # the 0.24 NVFP4 boots to the token


def test_the_per_card_totals_are_the_logs_own():
    """Each card's total is the fitting rule's (gpu_fit.py::fit_vllm_totals) and lies within what its logs print."""
    assert {c: t.gib for c, t in VLLM_TOTALS.items()} == fit_vllm_totals(LOGS)
    for name, total in VLLM_TOTALS.items():
        seen = [r for e in LOGS if e.get("gpu") == name and (r := total_reading(e)) is not None]
        assert seen, f"{name}: no log in the corpus gives its total"
        assert min(seen) - 0.01 <= total.gib <= max(seen) + 0.01, name


def test_the_cuda_graph_price_is_the_least_squares_line_of_the_logs():
    """shared + per graph x (N - 1), the profiler's own shape, fitted to the logs that print N and the estimate."""
    pts = [(e["capture"].get("piecewise", 0) + e["capture"].get("full", 0) - 1, e["logged"]["cuda_graph_estimate_gib"])
           for e in LOGS if "cuda_graph_estimate_gib" in e["logged"] and e["logged"]["cuda_graph_estimate_gib"] < 20
           and (e["capture"].get("piecewise") or e["capture"].get("full"))]
    assert len(pts) >= 5
    fit = statistics.linear_regression([x for x, _ in pts], [y for _, y in pts])
    assert fit_graph_price(LOGS) == (GRAPH_SHARED_GIB, GRAPH_GIB_PER_GRAPH)
    assert GRAPH_GIB_PER_GRAPH == pytest.approx(fit.slope, abs=0.00005)
    assert GRAPH_SHARED_GIB == pytest.approx(fit.intercept, abs=0.0005)
