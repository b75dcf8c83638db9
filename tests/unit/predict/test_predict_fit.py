"""The step model's fit recovers the constants that made real SQLite stores (written by matrix/store.py) whose
cells follow the model exactly; leave-one-out on such stores predicts the left-out configuration."""

from __future__ import annotations

import pytest

from predict_stores import LLAMA8, LLAMA70, QWEN_MOE, write_store
from specbench.predict.api import calibrate, leave_one_out
from specbench.predict.calibration import Calibration, ceilings
from specbench.predict.cells import ClassKey, cell_shape
from specbench.predict.fit import STEP_SCALES
from specbench.predict.model import Params, step_s
from specbench.predict.roofline import INDEPENDENT

TRUE = Params(a=4e-4, al=3e-5, am=4e-5, p=8e-6, e=1.25, d=3e-4, q=2.5e-4, f=0.02, g=1.4)


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    # two prompt lengths: at one, the per-sequence cost p x b and the context term k x K (K = b x ctx x KV bytes)
    # are one column and only the pull splits them (predict/fit.py::STEP_SCALES); at two the data do
    d = tmp_path_factory.mktemp("predict-fit")
    return [str(write_store(d / f"{t.model.split('/')[1]}.db", t, TRUE)) for t in (LLAMA8, LLAMA70, QWEN_MOE)] + [
        str(write_store(d / f"{t.model.split('/')[1]}-2048.db", t, TRUE, prompt=2048)) for t in (LLAMA8, QWEN_MOE)]


def _pooled(cal):
    key = ClassKey("sglang", "0.5.15.post1", "H200", "triton", True)
    return next(c for c in cal.classes if c.key == key)


def test_fit_recovers_known_constants(stores):
    fit = _pooled(calibrate(stores))
    got = fit.params
    assert fit.n_step == 5 * 3 * 4
    assert fit.step_rel_rms < 0.005
    # the prior pulls each constant by at most its scale x 0.05 / sqrt(n): recovered within a few percent
    for name in ("e", "d", "q", "g"):
        want = getattr(TRUE, name)
        assert getattr(got, name) == pytest.approx(want, rel=0.05), name
    # p x b is ~2 % of a step here (8 us x 32 against ~13 ms): recovered to a tenth of its typical size
    assert abs(got.p - TRUE.p) < 0.1 * STEP_SCALES[3]
    assert got.k < 0.05  # the context term the stores were made without: two prompt lengths keep it out
    # a and the per-layer floor trade off against each other a little (three layer counts); their sum at 32 layers
    # (what a Llama-8B step pays) is tight
    assert got.a + 32 * got.al == pytest.approx(TRUE.a + 32 * TRUE.al, rel=0.03)
    assert got.am == pytest.approx(TRUE.am, rel=0.15)
    assert got.f == pytest.approx(TRUE.f, rel=0.1)


def test_per_model_classes_and_find(stores):
    cal = calibrate(stores)
    models = {c.key.model for c in cal.classes}
    assert models == {"", LLAMA8.model, LLAMA70.model, QWEN_MOE.model}
    f = cal.find(ClassKey("sglang", "0.5.15.post1", "H200", "triton", True, LLAMA8.model))
    assert f.source.startswith("calibrated:") and LLAMA8.model in f.source and not f.moved
    # a model never recorded gets the pooled class
    f2 = cal.find(ClassKey("sglang", "0.5.15.post1", "H200", "triton", True, "Qwen/Qwen3-8B"))
    assert "any model" in f2.source and f2.params == _pooled(cal).params and not f2.moved
    # another backend on the same GPU: moved, named
    f3 = cal.find(ClassKey("sglang", "0.5.15.post1", "H200", "flashinfer", True))
    assert f3.source.startswith("moved:") and set(f3.moved) == {"backend"}
    # another GPU: the H200's constants moved by the H100's roofline, never the bare roofline
    f4 = cal.find(ClassKey("sglang", "0.5.15.post1", "H100 80GB", "triton", True))
    assert f4.params == _pooled(cal).params and set(f4.moved) == {"gpu"} and f4.from_gpu == "H200"
    # another engine: uncalibrated, the global constants
    f5 = cal.find(ClassKey("vllm", "0.11.0", "H200", "default", True))
    assert f5.source.startswith("uncalibrated:") and "engine" in f5.moved and f5.params == cal.glob
    # no calibration at all: the bare roofline, said so
    empty = Calibration((), Params())
    f6 = empty.find(ClassKey("sglang", "0.5.15.post1", "H200", "triton", True))
    assert f6.params == Params() and "bare roofline" in f6.source


def test_roofline_optimism_is_measured(stores):
    o = calibrate(stores).optimism
    # the synthetic cells are slower than the roofline by construction (e > 1 and positive overheads)
    assert o["c1"] > 1.2 and o["cmax"] > 1.0 and o["cmax_concurrency"] == 32


def test_leave_one_out_predicts_the_left_out_configuration(stores):
    rows = leave_one_out(stores)
    assert len(rows) == 5 * 2 * 4
    errs = [abs(r.speedup_error) for r in rows if r.speedup_error is not None]
    assert len(errs) == len(rows) and max(errs) < 0.02


def test_the_cap_sets_the_batch_and_keeps_queued_ttft_out(tmp_path):
    p = write_store(tmp_path / "capped.db", LLAMA8, TRUE, concurrencies=(1, 8, 32), cap=8, accepts=(2.5,))
    cal = calibrate([str(p)])
    fit = next(c for c in cal.classes if c.key.model == LLAMA8.model)
    assert fit.n_step == 6 and fit.n_ttft == 4  # the c = 32 cells run 8 at a time: no TTFT row for them


def test_a_cost_growing_with_batch_at_one_prompt_length_grows_with_the_context(tmp_path):
    """Stores at one prompt length (512) whose step has a context term (k = 2: the attention reads the KV twice more
    than the roofline) and no per-sequence cost: there p x b and k x K are one column, and the pull's typical sizes
    decide the split (predict/fit.py::STEP_SCALES). Predicted at 4,096 tokens and c = 32, the step must grow with
    the context as the truth does: with p's scale at 1e-4 the cost went to p and the AR step came out 32 % short.
    The speculative step's ks against its per-sequence q is still the pull's split (q's scale at its typical size
    made the H100 stores predicted from the H200 ones worse, benchmarks/RESULTS.md seventh session): 11 % short."""
    truth = Params(a=4e-4, al=3e-5, am=4e-5, p=0.0, e=1.25, d=3e-4, q=2.5e-4, f=0.02, g=1.4, k=2.0, ks=10.0)
    stores = [str(write_store(tmp_path / f"{t.model.split('/')[1]}.db", t, truth)) for t in (LLAMA8, QWEN_MOE)]
    fit = _pooled(calibrate(stores))
    ceil = ceilings("H200")
    for method, settings in (("ar", {"tp": 1, "algorithm": "ar"}),
                             ("eagle", {"tp": 1, "algorithm": "EAGLE3", "num_steps": 3, "eagle_topk": 1,
                                        "num_draft_tokens": 4})):
        plan = {"model_config": LLAMA8.model, "draft_config": LLAMA8.draft, "gpu": "H200"}
        long = cell_shape(settings, {"concurrency": 32, "prompt_tokens": 4096, "output_tokens": 128}, plan, 64,
                          routing=INDEPENDENT)
        tol = 0.10 if method == "ar" else 0.15
        assert step_s(long, ceil, fit.params) == pytest.approx(step_s(long, ceil, truth), rel=tol), method


def test_a_real_per_sequence_cost_still_predicts_long_prompts(tmp_path):
    """The trade-off of the context-first pull, pinned: stores at 512 and 2,048 tokens whose step has a 60 us
    per-sequence cost and no context term. The constants split it otherwise (measured: p 2.0e-5, the rest in q and
    the floors; with p's scale at 1e-4, p came back exact), but the steps they predict hold out to 8,192 tokens
    and c = 32: AR within 1.5 %, EAGLE3 within 4.4 %."""
    truth = Params(a=4e-4, al=3e-5, am=4e-5, p=6e-5, e=1.25, d=3e-4, q=2.5e-4, f=0.02, g=1.4)
    stores = [str(write_store(tmp_path / f"{t.model.split('/')[1]}-{n}.db", t, truth, prompt=n))
              for t in (LLAMA8, QWEN_MOE) for n in (512, 2048)]
    got = _pooled(calibrate(stores)).params
    ceil = ceilings("H200")
    plan = {"model_config": LLAMA8.model, "draft_config": LLAMA8.draft, "gpu": "H200"}
    for settings, tol in (({"tp": 1, "algorithm": "ar"}, 0.03),
                          ({"tp": 1, "algorithm": "EAGLE3", "num_steps": 3, "eagle_topk": 1, "num_draft_tokens": 4},
                           0.07)):
        for n, c in ((512, 1), (2048, 32), (8192, 1), (8192, 32)):
            shape = cell_shape(settings, {"concurrency": c, "prompt_tokens": n, "output_tokens": 128}, plan, 64,
                               routing=INDEPENDENT)
            assert step_s(shape, ceil, got) == pytest.approx(step_s(shape, ceil, truth), rel=tol), (settings, n, c)
