"""The step model on the shapes issue 35 added, against the real H100 stores that measured them
(tests/data/h100-context-sglang-0.5.15.post1/: FP8 KV, EAGLE3 trees of topk 4 / 8, DFlash blocks of 8 / 16, c = 64),
and the trust of a prompt length measured on another GPU only."""

from __future__ import annotations

import statistics
from dataclasses import replace

import pytest

from paths import DATA
from specbench.predict.api import baseline_of, calibrate, predict_stored
from specbench.predict.calibration import ceilings, shipped
from specbench.predict.cells import ClassKey
from specbench.predict.judged import judge
from specbench.predict.model import Params, step_features
from specbench.predict.observe import observations
from specbench.predict.roofline import drafter_shape, forward_s
from specbench.predict.trust import EXTRAPOLATED, assess

CONTEXT = DATA / "h100-context-sglang-0.5.15.post1"
ALL = sorted(str(p) for pat in ("h200-*/*.db", "gpu-decide-sglang/*.db", "h100-context-*/*.db")
             for p in DATA.glob(pat))
NAMES = ("a", "al", "am", "p", "R", "d", "q", "k", "ks", "k1", "k1s", "kf", "t", "db", "mt")


def _features(store: str) -> list[tuple[object, dict[str, float]]]:
    ceil = ceilings("H100")
    assert ceil is not None
    return [(o, dict(zip(NAMES, step_features(o.shape, ceil)))) for o in observations(str(CONTEXT / store))]


def test_the_feature_vector_matches_the_constants():
    assert len(Params().step_vector()) == len(NAMES)


def test_fp8_kv_charges_the_attention_per_element_and_the_roofline_per_byte():
    """FP8 KV halves the bytes the roofline reads, not the context terms: the H100 measured AR at 8,192 tokens only
    3-8 % faster with FP8 KV than with BF16 (h100-fp8kv.db beside h100-context-27of27.db)."""
    fp8 = {(o.shape.method, o.shape.batch, o.shape.prompt_tokens): (o, x) for o, x in _features("h100-fp8kv.db")}
    bf16 = {(o.shape.method, o.shape.batch, o.shape.prompt_tokens): (o, x)
            for o, x in _features("h100-context-27of27.db") if o.shape.topk == 1}
    both = sorted(set(fp8) & set(bf16))
    assert len(both) >= 10
    for k in both:
        (o8, x8), (o16, x16) = fp8[k], bf16[k]
        assert o8.shape.kv_scale == 0.5 and o16.shape.kv_scale == 1.0
        assert x8["k"] == pytest.approx(x16["k"]) and x8["k1"] == pytest.approx(x16["k1"])
        assert x8["R"] < x16["R"]
    # measured: AR at 8,192 tokens, c = 16: FP8 KV within 10 % of BF16 (half the KV bytes would be ~1.5x faster)
    ar = [(fp8[k][0].tok_s / bf16[k][0].tok_s) for k in both if k[0] == "ar" and k[2] == 8192]
    assert ar and all(0.95 < r < 1.10 for r in ar)


def test_the_fp8_kv_store_is_predicted_from_the_bf16_stores_inside_its_intervals():
    """h100-fp8kv.db left out: the rest (no FP8-KV cell) predicts every speedup within 12 % and inside the
    interval (with half the KV bytes charged to the context terms it was +15-25 %, 4 of 6 outside)."""
    fp8 = str(CONTEXT / "h100-fp8kv.db")
    cal = calibrate([s for s in ALL if s != fp8])
    obs = observations(fp8)
    preds = [predict_stored(cal, o, baseline_of(o, obs)) for o in obs if o.accept_len is not None]
    assert len(preds) == 6
    for p in preds:
        assert p is not None and p.speedup_error is not None
        assert abs(p.speedup_error) < 0.12 and p.inside
        assert p.state == EXTRAPOLATED and any("KV cache at 0.5x" in w for w in p.outside)


def test_tree_drafts_pay_per_extra_branch_token_and_block_drafts_their_own_forward():
    ceil = ceilings("H100")
    assert ceil is not None
    for o, x in _features("h100-context-27of27.db") + _features("h100-tree8.db"):
        s = o.shape
        if s.method == "ar":
            assert x["t"] == x["d"] == x["db"] == 0
        else:
            assert x["t"] == s.batch * (s.topk - 1) * s.num_steps and x["d"] == s.num_steps + 1 and x["db"] == 0
    blocks = [(o, x) for o, x in _features("h100-dflash16.db") if o.shape.method == "block"]
    assert len(blocks) == 6
    for o, x in blocks:
        s = o.shape
        assert x["d"] == 0 and x["db"] == 1 and x["t"] == 0
        # the block's forward reads the target's lm_head (the drafter has none): more than its own layers
        assert s.draft is not None
        own = forward_s(drafter_shape(s.draft, 1), ceil, s.batch, s.verify_tokens, s.ctx)
        verify_only = x["R"] - own
        assert verify_only > 0
        ar = next(xa for oa, xa in _features("h100-dflash16.db")
                  if oa.shape.method == "ar" and oa.shape.batch == s.batch and oa.shape.prompt_tokens == s.prompt_tokens)
        lm_head_s = 151936 * 4096 * 2 / ceil.bytes_per_s  # Qwen3-8B's untied lm_head, BF16
        assert verify_only - ar["R"] > 0.9 * lm_head_s


def test_the_trees_and_blocks_are_predicted_within_their_intervals_by_the_shipped_calibration():
    """In sample (the shipped calibration holds these stores): the tree and block cells within 7 % at the median and
    at least 14 of 16 inside their intervals (the c = 16, 512-token tree cell is over-predicted by every fit tried,
    ~+20 %, as the chain's is: a cost of that load the model does not have)."""
    cal = shipped()
    errors = []
    inside = 0
    for name in ("h100-tree8.db", "h100-dflash16.db", "h100-dflash8.db"):
        obs = observations(str(CONTEXT / name))
        for o in obs:
            if o.accept_len is None:
                continue
            p = predict_stored(cal, o, baseline_of(o, obs))
            assert p is not None and p.speedup_error is not None
            errors.append(abs(p.speedup_error))
            inside += bool(p.inside)
    assert len(errors) == 16 and statistics.median(errors) < 0.07 and inside >= 14


def test_a_prompt_length_measured_on_another_gpu_only_is_priced_as_a_move():
    """The H200 class ran 512-token prompts, the H100 ones 512-8,192: an H200 cell at 8,192 tokens takes the context
    terms moved from the H100 (WIDEN["gpu"] once, said so), narrower than e-folds nobody measured, wider than a
    calibrated cell."""
    cal = shipped()
    o = next(o for o in observations(str(CONTEXT / "h100-context-27of27.db"))
             if o.shape.method == "eagle" and o.shape.topk == 1 and o.shape.batch == 1)
    key = ClassKey(o.key.engine, o.key.engine_version, "H200", o.key.attention_backend, o.key.cuda_graphs, o.key.model)
    short = judge(cal, key, replace(o.shape, prompt_tokens=512), 2.5)
    long = judge(cal, key, replace(o.shape, prompt_tokens=8192), 2.5)
    assert short is not None and long is not None
    assert long.trust.state == EXTRAPOLATED
    assert any("in this class; measured by the calibration's other classes (H100, H200), moved here by the roofline"
               in w for w in long.trust.outside)
    found = cal.find(key)
    unmeasured = assess(replace(o.shape, prompt_tokens=8192), 2.5, "H200", found.coverage, cal.base_sigma(), {},
                        fit_rms=found.fit_rms)
    assert short.trust.sigma < long.trust.sigma < unmeasured.sigma
    lo, hi = long.trust.interval(1.0)
    assert hi / lo < 2.0
