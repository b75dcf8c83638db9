"""Held-out validation of the vLLM GPU fits (benchmarks/vllm_gpu_kfold.py): the shipped constants of
engines/vllm/gpu_fit.py are what its fitting rules give on the whole corpus (tests/data/vllm-gpu-corpus/logs.json),
each log scored with the constants refitted without it (its thread and card too) keeps the median error within 5%,
and the stored held-out figures (gpu_fit.py::KFOLD, shown in each plan's `budget.terms`) are a re-run's."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest

from paths import ROOT
from specbench.engines.vllm import gpu_fit

LOGS = json.loads((ROOT / "tests" / "data" / "vllm-gpu-corpus" / "logs.json").read_text())


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # its dataclasses resolve their module through sys.modules
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def kfold():
    return _load("vllm_gpu_kfold")


@pytest.fixture(scope="module")
def result(kfold):
    return kfold.evaluate(LOGS, kfold.corpus_bench())


def test_the_shipped_constants_are_the_fitting_rules_on_the_whole_corpus(kfold):
    totals = gpu_fit.fit_vllm_totals(LOGS)
    assert {c: t.gib for c, t in gpu_fit.VLLM_TOTALS.items()} == totals
    assert gpu_fit.DRIVER_GAP_MIB == gpu_fit.fit_driver_gap(totals)
    assert (gpu_fit.GRAPH_SHARED_GIB, gpu_fit.GRAPH_GIB_PER_GRAPH) == gpu_fit.fit_graph_price(LOGS)
    points = kfold.gdn_points(LOGS, kfold.corpus_bench())
    assert len(points) >= 2  # the two Qwen3.8-27B TP2 summary lines (club-3090)
    assert gpu_fit.GDN_FP32_COPIES == gpu_fit.fit_gdn_copies(list(points.values()))


def test_the_fitting_rules_on_small_inputs():
    line = [{"id": str(n), "url": f"https://github.com/o/r/issues/{n}", "capture": {"piecewise": n},
             "logged": {"cuda_graph_estimate_gib": 0.1 + 0.01 * (n - 1)}} for n in (3, 10, 40)]
    outlier = {"id": "big", "capture": {"piecewise": 50}, "logged": {"cuda_graph_estimate_gib": 57.45}}
    assert gpu_fit.fit_graph_price([*line, outlier]) == (0.1, 0.01)
    assert gpu_fit.fit_gdn_copies([(1.0, 1.1, 1.52), (1.0, 1.2, 2.0)]) == 5
    assert gpu_fit.fit_gdn_copies([]) == 0
    # the GB10's unified memory reads above its catalog total: no gap from it
    assert gpu_fit.fit_driver_gap({"RTX 5090": 31.39, "DGX Spark GB10": 121.66}) == round(32607 - 31.39 * 1024)
    named = {"gpu": "L4", "u": 0.9, "logged": {"total_gib": 22.05, "requested_gib": 19.84}}
    assert gpu_fit.total_reading(named) == pytest.approx(19.84 / 0.9)
    assert gpu_fit.total_reading({**named, "gpu_note": "an unnamed 24 GB card"}) is None
    assert gpu_fit.thread_of({"url": "https://github.com/noonghunna/club-3090/pull/1139"}) == \
        "noonghunna/club-3090#1139"


def test_a_held_out_log_takes_its_thread_and_card_with_it(kfold):
    e = next(x for x in LOGS if x["id"] == "club3090-1087-2x5090-qwen3.8-27b-fp8-tp0")
    out = kfold.held_out(e, LOGS)
    assert {x["id"] for x in LOGS if x.get("gpu") == "RTX 5090"} <= out
    fit = kfold.refit([x for x in LOGS if x["id"] not in out], {})
    assert "RTX 5090" not in fit.totals  # scored as a card without a log: nvidia-smi less the median gap


def test_held_out_errors_median_within_five_percent(kfold, result):
    tab = kfold.table(result)
    out = tab["scored"]["out"]
    assert out["n"] >= 20
    assert out["median_pct"] <= 5.0
    ids = {r["id"] for r in result["out"]}
    assert len(ids) >= 10
    # every scored check of the in-sample benchmark is scored held out too
    assert {r["check"] for r in result["out"]} >= {"requested", "budget", "pool", "activation", "cold"}


def test_the_stored_held_out_figures_are_a_re_runs(kfold, result):
    tab = kfold.table(result)
    assert gpu_fit.KFOLD_LOGS == len(LOGS)
    assert gpu_fit.KFOLD_DATE and "vllm_gpu_kfold.py" in gpu_fit.KFOLD_COMMAND
    for check, stored in gpu_fit.KFOLD.items():
        got = tab[check]["out"]
        assert got["n"] == stored.n, check
        assert got["median_pct"] == pytest.approx(stored.median_pct, abs=0.11), check
        assert got["max_pct"] == pytest.approx(stored.max_pct, abs=0.11), check
        assert got["within_5pct"] == pytest.approx(stored.within_5pct, abs=0.011), check
    assert {"requested", "budget", "pool", "cold", "graph", "activation", "scored"} <= set(gpu_fit.KFOLD)


def test_the_fit_sizes_the_plan_names_are_the_corpus(kfold):
    assert gpu_fit.GRAPH_FIT_LOGS == len(gpu_fit.graph_points(LOGS))
    assert gpu_fit.GDN_FIT_LOGS == len(kfold.gdn_points(LOGS, kfold.corpus_bench()))
    for card, total in gpu_fit.VLLM_TOTALS.items():
        assert total.logs == sum(1 for e in LOGS if e.get("gpu") == card and gpu_fit.total_reading(e) is not None)


def _plan(cmd: str, gpu: str, **kw):
    from specbench.contracts_inputs import PlanOptions
    from specbench.plan.api import plan_command

    cfg = str(ROOT / "src" / "specbench" / "data" / "configs" / "Qwen__Qwen3-8B.json")
    return plan_command(cmd, PlanOptions(gpu=gpu, engine_version="0.32.0", model_config=cfg, fixes=False, **kw))


def test_each_plan_says_which_terms_are_measured_and_which_fitted_with_their_held_out_error():
    p = _plan("vllm serve Qwen/Qwen3-8B --max-model-len 16384", "RTX 5090")
    b = p["budget"]
    terms = {t["term"]: t for t in b["terms"]}
    assert list(terms) == ["total", "weights", "activation", "cuda_graph", "non_torch", "requested", "available_kv"]
    for t in terms.values():
        assert t["budget_field"] is None or t["budget_field"] in b  # the budget number the term describes
    assert terms["total"]["kind"] == "fitted: 1 log"  # the 5090's total: club-3090#1087
    assert terms["total"]["expected_error_pct"] == gpu_fit.KFOLD["requested"].median_pct
    assert terms["cuda_graph"]["kind"] == f"fitted: {gpu_fit.GRAPH_FIT_LOGS} logs"
    assert terms["cuda_graph"]["expected_error_pct"] == gpu_fit.KFOLD["graph_price"].median_pct
    assert terms["available_kv"]["expected_error_pct"] == gpu_fit.KFOLD["cold"].median_pct
    assert terms["weights"]["kind"] == "estimate" and terms["weights"]["expected_error_pct"] is None
    # a card without a vLLM log: the total is the gap estimate; measured inputs say so and move the KV error basis
    q = _plan("vllm serve Qwen/Qwen3-8B --max-model-len 16384 --enforce-eager", "H100", weights_gib=15.3)
    qt = {t["term"]: t for t in q["budget"]["terms"]}
    assert qt["total"]["kind"] == "estimate" and str(gpu_fit.DRIVER_GAP_MIB) in qt["total"]["source"]
    assert qt["weights"]["kind"] == "measured (log/flag)"
    assert qt["cuda_graph"]["kind"] == "engine code" and q["budget"]["cuda_graph_gib"] == 0
    assert qt["available_kv"]["expected_error_pct"] == gpu_fit.KFOLD["budget"].median_pct
