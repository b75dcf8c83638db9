"""Predictions that know what they do not know (issue 35), on the real stores in tests/data: out-of-sample error,
intervals on the log scale that widen with the distance from the calibration, the state of every prediction, and
constants that move to a GPU never calibrated with its roofline (never the bare roofline)."""

from __future__ import annotations

import json
import math
import statistics

import pytest

from paths import DATA, ROOT
from specbench.predict.api import baseline_of, calibrate, calibrate_observations, leave_one_store_out, predict_stored
from specbench.predict.calibration import Calibration, from_json, shipped
from specbench.predict.cells import ClassKey
from specbench.predict.judged import judge
from specbench.predict.model import Params
from specbench.predict.observe import all_observations, observations
from specbench.predict.trust import CALIBRATED, EXTRAPOLATED, Coverage, assess

H200 = sorted(str(p) for p in DATA.glob("h200-*/*.db"))
H100 = sorted(str(p) for p in DATA.glob("gpu-decide-sglang/*.db"))
CONTEXT = DATA / "h100-context-sglang-0.5.15.post1"
QUICK_STORE = str(CONTEXT / "h100-quick-8of12.db")


@pytest.fixture(scope="module")
def h200_cal() -> Calibration:
    return calibrate(H200)


def test_leave_one_store_out_is_out_of_sample_and_its_intervals_hold():
    """Every store predicted from the others only: the figures benchmarks/predict_accuracy.py reports."""
    rows = leave_one_store_out(H200 + H100 + [QUICK_STORE])
    sel = [r for r in rows if r.speedup_error is not None and r.obs.shape.concurrency <= 32]
    assert len(sel) >= 40
    assert statistics.median(abs(r.speedup_error or 0) for r in sel) <= 0.07
    assert sum(1 for r in sel if r.inside) >= 0.9 * len(sel)
    for r in sel:
        assert r.state in (CALIBRATED, EXTRAPOLATED)
        assert r.speedup_lo is not None and r.speedup_hi is not None and r.speedup is not None
        # on the log scale: never below 0, as wide in ratio above as below
        assert 0 < r.speedup_lo < r.speedup < r.speedup_hi
        assert r.speedup_lo * r.speedup_hi == pytest.approx(r.speedup ** 2)
        # a cell outside its fit's calibration says what lies outside, a calibrated one nothing
        assert bool(r.outside) == (r.state == EXTRAPOLATED)
    # the only MoE store, left out, is predicted as a model kind never calibrated, and its interval is wider
    moe = [r for r in sel if "h200-moe" in r.obs.store]
    dense = [r for r in sel if "h200-dense8b" in r.obs.store]
    assert all(any("a moe model" in w for w in r.outside) for r in moe)
    assert min(r.speedup_hi / r.speedup_lo for r in moe) > max(r.speedup_hi / r.speedup_lo for r in dense)


def test_an_h100_never_calibrated_is_predicted_from_the_h200_with_a_range_that_holds(h200_cal):
    """The real H100 stores (SGLang 0.5.12 / 0.5.15, 1,024-token prompts) from an H200-only calibration (512 or
    fewer): every speedup inside its interval, each narrower than a factor 2, AR within 7 % (measured 1.7-6.1 % since
    the MoE stores' dummy-routing cells left the fit, 2-5 % with them); before issue 35 this was
    the bare roofline (AR 214.8 tok/s predicted where 137.9 ran; EAGLE3 1.41x / 1.75x at c = 16 where 0.79x / 1.07x
    ran) with no interval."""
    for store in H100:
        obs = observations(store)
        for o in obs:
            p = predict_stored(h200_cal, o, baseline_of(o, obs))
            assert p is not None and p.state == EXTRAPOLATED
            assert any("GPU H100 never calibrated" in w for w in p.outside)
            assert any("prompt 1024 tokens" in w for w in p.outside)
            if o.accept_len is None:
                assert abs(p.tok_s / o.tok_s - 1) < 0.07
            else:
                assert p.inside and p.speedup_hi / p.speedup_lo < 2.0


def test_ar_on_a_slower_memory_gpu_is_never_predicted_faster_than_measured_on_a_faster_one(h200_cal):
    """Qwen3-8B AR as measured on the H200 (4.8 TB/s), predicted on the H100 (3.35 TB/s), A100 (2.0 TB/s) and on
    the H200 itself: slower in the order of bandwidth, the H100 below what the H200 measured."""
    obs = [o for o in observations(str(DATA / "h200-dense8b-sglang-0.5.15.post1" / "h200-dense8b.db"))
           if o.accept_len is None]
    for o in obs:
        speeds = []
        for gpu in ("H200", "H100 80GB", "A100 80GB"):
            key = ClassKey(o.key.engine, o.key.engine_version, gpu, o.key.attention_backend, o.key.cuda_graphs,
                           o.key.model)
            j = judge(h200_cal, key, o.shape, None)
            assert j is not None
            speeds.append(j.pred.tok_s)
        assert speeds[0] > speeds[1] > speeds[2]
        assert speeds[1] < o.tok_s


def test_interval_widens_with_the_distance_from_the_calibration():
    shape = observations(QUICK_STORE)[0].shape
    cov = Coverage(gpus=("H100",), methods=("ar", "eagle"), kinds=("dense",), tps=(1,), kv_scales=(1.0,),
                   prompt=(512, 1024), batch=(1, 32), accept=(2.0, 3.0), spec_prompt=(512, 1024), spec_batch=(1, 32))
    from dataclasses import replace

    sigmas = []
    for prompt in (1024, 2048, 8192, 32768):
        t = assess(replace(shape, prompt_tokens=prompt), None, "H100", cov, 0.06, {})
        sigmas.append(t.sigma)
        assert (t.state == CALIBRATED) == (prompt <= 1024)
    assert sigmas == sorted(sigmas) and sigmas[0] == pytest.approx(0.06) and sigmas[-1] > 2 * sigmas[0]
    far = assess(shape, None, "B200", cov, 0.06, {"gpu": "GPU B200 never calibrated"}, bandwidth_ratio=8 / 3.35)
    near = assess(shape, None, "H200", cov, 0.06, {"gpu": "GPU H200 never calibrated"}, bandwidth_ratio=4.8 / 3.35)
    assert far.sigma > near.sigma > 0.06 and far.state == near.state == EXTRAPOLATED


def test_a_hybrid_kind_and_an_mtp_chain_are_priced_by_what_their_stores_showed():
    """The H100 hybrid store (Qwen3.6-27B; MTP and DFlash) held out: every speedup inside an interval narrower than a
    factor 2, where the kind term of the MoE stores (0.20) and the method term of DFlash-from-EAGLE (0.14) made it
    2.2-2.8x; a hybrid or MTP cell's interval is still wider than a calibrated one's, an MoE cell's wider still."""
    from dataclasses import replace

    from specbench.predict.trust import WIDEN

    hybrid = str(DATA / "h100-hybrid-sglang-0.5.15.post1" / "h100-hybrid.db")
    mtp = next(o.shape for o in observations(hybrid) if o.shape.method == "mtp")
    cov = Coverage(gpus=("H100",), methods=("ar", "block", "eagle"), kinds=("dense", "moe"), tps=(1,),
                   kv_scales=(1.0,), prompt=(512, 8192), batch=(1, 32), accept=(1.0, 3.5), spec_prompt=(512, 8192),
                   spec_batch=(1, 32))
    t = assess(mtp, 2.5, "H100", cov, 0.06, {})
    assert t.state == EXTRAPOLATED
    assert any("a hybrid model" in w for w in t.outside) and any("priced like eagle" in w for w in t.outside)
    assert t.sigma == pytest.approx(math.sqrt(0.06 ** 2 + WIDEN["kind_hybrid"] ** 2 + WIDEN["method_near"] ** 2))
    lo, hi = t.interval(1.8)
    assert 1.0 < hi / lo < 2.0
    calibrated = assess(mtp, 2.5, "H100", replace(cov, methods=("ar", "eagle", "mtp"), kinds=("dense", "hybrid")),
                        0.06, {})
    moe = replace(mtp, target=next(o.shape.target for o in observations(
        str(DATA / "h200-moe-sglang-0.5.15.post1" / "h200-moe.db")) if o.shape.method != "ar"))
    assert calibrated.sigma < t.sigma < assess(moe, 2.5, "H100", replace(cov, kinds=("dense", "hybrid")), 0.06,
                                               {}).sigma
    rows = [r for r in leave_one_store_out([hybrid, *H200, QUICK_STORE, str(CONTEXT / "h100-dflash16.db")])
            if "h100-hybrid" in r.obs.store and r.speedup is not None]
    # every cell inside but, at most, one whose AR baseline (c = 2, 2,048 tokens) measured a 1.3 s TTFT in its steady
    # wave against 0.3 s in the first (a first-seen prefill shape; its speedups read 0.90-0.95x where c = 1 and
    # c = 4 read 0.69-0.77x): the verify's context terms counted per query head (model.py::query_group) price the
    # hybrid's DFlash there 1.5x dearer, and that cell fell outside
    outside = [r for r in rows if not r.inside]
    assert len(rows) == 18 and len(outside) <= 1
    assert all((r.obs.shape.concurrency, r.obs.shape.prompt_tokens) == (2, 2048) for r in outside)
    assert all(r.speedup_hi / r.speedup_lo < 2.0 for r in rows)


def test_the_shipped_calibration_carries_its_coverage_and_out_of_sample_error():
    cal = shipped()
    assert cal.source.endswith("calibrations/sglang.json")
    assert {"H100", "H200"} <= set(cal.coverage.gpus) and cal.coverage.prompt[1] == 8192
    oos = cal.out_of_sample
    assert 0.03 < oos["speedup_log_rms"] < 0.15 and oos["n_all"] >= oos["n"] > 10
    # refitting its stores gives back the file (the shipped numbers come from the committed stores)
    doc = json.loads((ROOT / "src/specbench/data/calibrations/sglang.json").read_text(encoding="utf-8"))
    again = calibrate_observations(all_observations([str(ROOT / s) for s in doc["stores"]]), doc["stores"])
    for mine, theirs in zip(again.to_json()["classes"], doc["classes"]):
        assert mine["key"] == theirs["key"]
        for k, v in theirs["params"].items():
            assert mine["params"][k] == pytest.approx(v, rel=1e-6, abs=1e-12)
    assert again.out_of_sample["speedup_log_rms"] == pytest.approx(oos["speedup_log_rms"], abs=1e-3)


def test_a_version_1_calibration_is_read_and_takes_the_default_error():
    doc = {"format": "specbench-calibration", "version": 1, "stores": [], "global": {},
           "classes": [{"key": {"engine": "sglang", "engine_version": "0.5.15.post1", "gpu": "H200",
                                "attention_backend": "triton", "cuda_graphs": True, "model": ""},
                        "params": {"a": 1e-3, "e": 1.2}, "n_step": 4, "step_rel_rms": 0.02}]}
    cal = from_json(doc, "v1.json")
    assert cal.coverage.empty and math.isnan(cal.base_sigma())
    f = cal.find(ClassKey("sglang", "0.5.15.post1", "H200", "triton", True, "x"))
    assert f.params == Params(a=1e-3, e=1.2) and f.source.startswith("calibrated:")
