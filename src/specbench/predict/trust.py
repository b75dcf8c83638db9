"""How far a prediction can be trusted: the calibration's coverage, the out-of-sample error, and the widening of the
interval for every way a cell lies outside what was calibrated.

- `Coverage`: what the calibration's cells spanned (GPUs, methods, model kinds, TP, tree width, KV dtype, and the
  ranges of prompt length, batch and accept length). Written into the calibration file.
- The base error: the RMS of log(predicted / measured) speedup when each calibration store is predicted by a fit on
  the other stores only (api.py::leave_one_store_out): out of sample, never the fit's own residuals. A calibration
  of one store (`calibrate --quick`) cannot leave a store out and takes the shipped calibration's (or BASE_FLOOR).
- Widening: one log-scale term per dimension outside the coverage, added in quadrature (`WIDEN`, each with where its
  size comes from). The interval is speedup x exp(+/- Z x sigma): on the log scale, so it never goes below 0 and is
  as wide in ratio above as below.
- State: calibrated (the cell's own engine, release, GPU, backend and graph mode, inside the coverage), extrapolated
  (anything outside it, or constants moved from another release / GPU / backend: `outside` says what),
  uncalibrated (no calibration of this engine at all: the constants of another engine, the widest interval).
Pure functions and frozen data.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from specbench.predict.model import CellShape
from specbench.specs.model_types import ModelSpec

CALIBRATED, EXTRAPOLATED, UNCALIBRATED = "calibrated", "extrapolated", "uncalibrated"
Z = 1.96  # a normal 95 % interval on the log scale: a convention, not fitted to the leave-one-out it is judged by
BASE_FLOOR = 0.05  # no calibration is trusted to better than 5 % (log) out of sample

# Widening terms (log-scale SD). Sizes: the leave-one-store-out and leave-one-GPU-out errors of the stores in
# tests/data (benchmarks/predict_accuracy.py prints them; benchmarks/RESULTS.md, "Step-cost model, issue 35"), rounded
# up; where no store varies the dimension, a stated guess (marked) that the next store of that shape checks.
WIDEN: dict[str, float] = {
    "gpu": 0.08,           # per H200/H100 bandwidth ratio (x1.43), at least one (H200 -> H100: measured 4-16 %)
    "release": 0.05,       # another release of the same engine (gpu-decide 0.5.12 <-> 0.5.15: 0-5 %)
    "backend": 0.10,       # another attention backend (guess: no store varies it)
    "graphs": 0.15,        # CUDA graphs on vs off (h200-run, eager, left out of an all-graphs fit: speedup 12-17 %)
    "engine": 0.30,        # another engine's constants (guess: no vLLM GPU store)
    "prompt": 0.07,        # per e-fold of prompt beyond the calibrated range: H100 EAGLE3 at 8,192 tokens predicted from
                           # <= 1,024 was +28 % at c = 1, +7 % at c = 32 over 2.1 e-folds (h100-quick-8of12.db), i.e.
                           # 0.12 per e-fold at worst: 0.07 puts that worst case at 1.7 sigma, inside the 95 % interval
    "batch": 0.06,         # per e-fold of batch beyond the calibrated range (h200-eagle3 c = 32 -> 64: 6-8 %)
    "accept": 0.04,        # per e-fold of accept length beyond the calibrated range
    "method": 0.14,        # a speculative method no calibration store ran: the H100 DFlash stores predicted from the
                           # H200 stores (EAGLE only; GPU moved too) were off by log RMS 0.185 over 12 cells, of which
                           # the GPU move's own sigma 0.126 leaves sqrt(0.185^2 - 0.126^2) = 0.135 (was a guess, 0.20)
    "kind": 0.14,          # a model kind (dense / MoE / hybrid) no store of the GPU had: the two MoE stores, each left
                           # out with no other MoE store on its GPU (16 cells, their accept-1.5 cells kept out as a
                           # stand-in's artifact: engines/sglang/simulate.py::collapsed_routing), were off by log RMS
                           # 0.135 (max 0.23, h200-moe sim 3.5 at c = 32; benchmarks/RESULTS.md, fifth session); was
                           # 0.20 while those artifact cells counted (RMS 0.21, max 0.44), 0.15 from h200-moe alone
    "kind_hybrid": 0.10,   # a hybrid (Mamba / Gated DeltaNet) model where no store of the GPU had one: the two
                           # hybrid stores held out that way (h200-sim.db, Qwen3.5-27B, 6 cells; h100-hybrid.db,
                           # Qwen3.6-27B, 18 cells; benchmarks/RESULTS.md 2026-12-07 fourth session) were off by
                           # log RMS ~0.08 with the base error and the MTP term inside it: 0.10 rounds it up
    "method_near": 0.05,   # a method whose drafts have the shape of a calibrated one (MTP's one-layer chain, priced
                           # from EAGLE's): the MTP cells of the same two stores, with EAGLE calibrated and MTP not,
                           # were off by log RMS ~0.06, about the base error itself
    "topk": 0.05,          # per doubling of tree width beyond the calibrated: the H100 trees (topk 4 and 8) predicted
                           # from chains only (H200, GPU moved too) were off by log RMS 0.13 over 10 cells, about the
                           # GPU move's own 0.126: 0.05 per doubling is rounded up (was a guess, 0.10)
    "tp": 0.10,            # per doubling of TP beyond the calibrated: the all-reduce term is a datasheet roofline
    "kv_dtype": 0.05,      # a KV-cache dtype no store used (H100 FP8 KV from the H200's BF16 stores, 512 and 2,048
                           # tokens: log RMS 0.03 with the GPU move; 0.05 kept)
    "routing": 0.08,       # a MoE routing regime (model.py::CellShape.routing) this class (or, for constants moved
                           # from another GPU, the class they came from) never ran in a verify: the two
                           # dummy-weight MoE stores (routing by token id) predicted from the uniform-routing one and
                           # the rest were off by log RMS 0.084, max 0.16 (h100-moe c = 4), the uniform stores from the
                           # dummy ones by 0.069, max 0.098 (benchmarks/RESULTS.md, sixth session): with the base
                           # error (at least BASE_FLOOR) the worst lies inside 1.96 sigma (at ~1.7)
}
# tok/s (an absolute speed, not a ratio of two cells of the same boot) moves more than the speedup where the constants
# were moved: CUDA graphs off vs on changes every step's launch floor (h200-run, eager, left out: tok/s log error
# 1.3-1.6, its speedup 0.12-0.16); the terms below replace WIDEN's for tok/s.
WIDEN_TOK: dict[str, float] = {"graphs": 1.2, "backend": 0.15, "engine": 0.5, "gpu": 0.10, "release": 0.08}


def model_kind(m: ModelSpec) -> str:
    return "hybrid" if m.linear_layers else "moe" if m.moe is not None else "dense"


@dataclass(frozen=True)
class Coverage:
    """What the calibration's cells spanned."""

    gpus: tuple[str, ...] = ()
    methods: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    tps: tuple[int, ...] = ()
    topk_max: int = 1
    kv_scales: tuple[float, ...] = ()
    prompt: tuple[int, int] = (0, 0)
    batch: tuple[int, int] = (0, 0)
    accept: tuple[float, float] = (0.0, 0.0)
    spec_prompt: tuple[int, int] = (0, 0)   # the speculative cells' own ranges: an AR store at 8,192 tokens says
    spec_batch: tuple[int, int] = (0, 0)    # nothing of the verify's attention there
    routings: tuple[str, ...] = ()          # the speculative MoE cells' routing regimes (model.py::CellShape.routing:
                                            # it moves only a verify's expert reads); () unknown

    @property
    def empty(self) -> bool:
        return not self.gpus

    def as_dict(self) -> dict[str, Any]:
        return {"gpus": list(self.gpus), "methods": list(self.methods), "kinds": list(self.kinds),
                "tps": list(self.tps), "topk_max": self.topk_max, "kv_scales": list(self.kv_scales),
                "prompt": list(self.prompt), "batch": list(self.batch), "accept": [round(a, 3) for a in self.accept],
                "spec_prompt": list(self.spec_prompt), "spec_batch": list(self.spec_batch),
                "routings": list(self.routings)}

    @staticmethod
    def from_dict(d: Mapping[str, Any] | None) -> Coverage:
        if not isinstance(d, Mapping) or not d:
            return Coverage()

        def pair(v: Any, cast: Any) -> Any:
            return (cast(v[0]), cast(v[1])) if isinstance(v, list) and len(v) == 2 else (cast(0), cast(0))
        return Coverage(tuple(str(g) for g in d.get("gpus") or ()), tuple(str(m) for m in d.get("methods") or ()),
                        tuple(str(k) for k in d.get("kinds") or ()), tuple(int(t) for t in d.get("tps") or ()),
                        int(d.get("topk_max") or 1), tuple(float(x) for x in d.get("kv_scales") or ()),
                        pair(d.get("prompt"), int), pair(d.get("batch"), int), pair(d.get("accept"), float),
                        pair(d.get("spec_prompt"), int), pair(d.get("spec_batch"), int),
                        tuple(str(r) for r in d.get("routings") or ()))

    def merged(self, other: Coverage) -> Coverage:
        if self.empty:
            return other
        if other.empty:
            return self

        def span(a: tuple[Any, Any], b: tuple[Any, Any]) -> tuple[Any, Any]:
            if not a[1]:
                return b
            if not b[1]:
                return a
            return (min(a[0], b[0]), max(a[1], b[1]))
        return Coverage(_union(self.gpus, other.gpus), _union(self.methods, other.methods),
                        _union(self.kinds, other.kinds), _union(self.tps, other.tps),
                        max(self.topk_max, other.topk_max), _union(self.kv_scales, other.kv_scales),
                        span(self.prompt, other.prompt), span(self.batch, other.batch),
                        span(self.accept, other.accept), span(self.spec_prompt, other.spec_prompt),
                        span(self.spec_batch, other.spec_batch), _union(self.routings, other.routings))


def _union(a: Iterable[Any], b: Iterable[Any]) -> tuple[Any, ...]:
    return tuple(sorted(set(a) | set(b)))


def coverage_of(cells: Iterable[tuple[str, CellShape, float | None]]) -> Coverage:
    """(gpu, shape, accept length or None for AR) of every calibration cell -> what they span."""
    rows = list(cells)
    if not rows:
        return Coverage()
    acc = [a for _, _, a in rows if a is not None]
    spec = [s for _, s, a in rows if a is not None]
    return Coverage(
        gpus=_union((g for g, _, _ in rows), ()), methods=_union((s.method for _, s, _ in rows), ()),
        kinds=_union((model_kind(s.target) for _, s, _ in rows), ()), tps=_union((s.tp for _, s, _ in rows), ()),
        topk_max=max([s.topk for s in spec] or [1]), kv_scales=_union((s.kv_scale for _, s, _ in rows), ()),
        prompt=(min(s.prompt_tokens for _, s, _ in rows), max(s.prompt_tokens for _, s, _ in rows)),
        batch=(min(s.batch for _, s, _ in rows), max(s.batch for _, s, _ in rows)),
        accept=(min(acc), max(acc)) if acc else (0.0, 0.0),
        spec_prompt=(min(s.prompt_tokens for s in spec), max(s.prompt_tokens for s in spec)) if spec else (0, 0),
        spec_batch=(min(s.batch for s in spec), max(s.batch for s in spec)) if spec else (0, 0),
        routings=_union((s.routing for _, s, a in rows if s.target.moe is not None and a is not None), ()))


@dataclass(frozen=True)
class Trust:
    """A prediction's state, what lies outside the calibration, and the log-scale SD of its speedup."""

    state: str
    outside: tuple[str, ...]
    sigma: float          # the speedup's
    sigma_tok: float = 0.0  # tok/s's

    def interval(self, value: float, tok_s: bool = False) -> tuple[float, float]:
        w = math.exp(Z * (self.sigma_tok if tok_s else self.sigma))
        return value / w, value * w


def _beyond(v: float, lo: float, hi: float) -> float:
    """How many e-folds v lies outside [lo, hi] (0 inside)."""
    if v <= 0 or lo <= 0:
        return 0.0
    if v > hi:
        return math.log(v / hi)
    if v < lo:
        return math.log(lo / v)
    return 0.0


def assess(shape: CellShape, accept: float | None, gpu: str, cov: Coverage, base_sigma: float,
           moved: Mapping[str, str], bandwidth_ratio: float = 1.0, base_tok: float | None = None,
           fit_rms: float = 0.0, elsewhere: Coverage | None = None) -> Trust:
    """The trust of one cell's prediction. `moved`: the constants came from another class, kind -> why
    ("gpu" / "release" / "backend" / "graphs" / "engine"); `bandwidth_ratio`: this GPU's bandwidth over the source GPU's;
    `base_tok`: the calibration's out-of-sample tok/s error (default: the speedup's); `fit_rms`: the class's own fit
    residual, a floor under the base error (a class the model fits worse than the calibration predicts out of sample
    is less sure; a one-store quick calibration has no out-of-sample error of its own); `elsewhere`: what the whole
    calibration spanned (other GPUs included): a prompt length this class never ran but another GPU's did is priced
    as the context terms moved from that GPU (WIDEN["gpu"] once) rather than as e-folds nobody measured."""
    terms: list[float] = []
    tok_terms: list[float] = []
    outside: list[str] = []
    for kind, why in moved.items():
        scale = max(1.0, abs(math.log(bandwidth_ratio)) / math.log(4.8 / 3.35)) if kind == "gpu" and \
            bandwidth_ratio > 0 else 1.0  # one step = the H200 / H100 bandwidth ratio
        terms.append(WIDEN[kind] * scale)
        tok_terms.append(WIDEN_TOK.get(kind, WIDEN[kind]) * scale)
        outside.append(why)
    if not cov.empty:
        n = len(terms)
        _range_terms(shape, accept, cov, terms, outside, elsewhere or Coverage())
        tok_terms.extend(terms[n:])
    fit = fit_rms if math.isfinite(fit_rms) and fit_rms > 0 else 0.0
    base = max(BASE_FLOOR, base_sigma, fit)
    sigma = math.sqrt(base ** 2 + sum(t * t for t in terms))
    tok = max(BASE_FLOOR, base_tok if base_tok is not None and math.isfinite(base_tok) else base, fit)
    sigma_tok = math.sqrt(tok ** 2 + sum(t * t for t in tok_terms))
    state = UNCALIBRATED if "engine" in moved else EXTRAPOLATED if outside else CALIBRATED
    return Trust(state, tuple(outside), sigma, sigma_tok)


# a method whose step is priced by the same terms as a calibrated one: MTP (NEXTN) is EAGLE with the target's own
# one-layer head (engines/sglang/formulas.py::resolve_spec rewrites NEXTN to EAGLE; model.py prices both as a chain)
NEAR_METHOD: dict[str, str] = {"mtp": "eagle"}

# the load dimensions whose constants are global and in roofline units (model.py): measurable in one class, moved to
# another like a GPU's constants
MOVABLE = frozenset({"prompt", "batch", "topk", "kv_dtype", "accept"})


def _distances(shape: CellShape, accept: float | None, cov: Coverage) -> dict[str, tuple[float, str]]:
    """Every dimension in which the cell lies outside `cov`: name -> (log-scale term, what is outside)."""
    out: dict[str, tuple[float, str]] = {}
    spec = shape.method != "ar" and cov.spec_prompt[1] > 0
    prompts, batches = (cov.spec_prompt, cov.spec_batch) if spec else (cov.prompt, cov.batch)
    what = "speculative cells calibrated" if spec else "calibrated"
    p = _beyond(shape.prompt_tokens, *prompts)
    if p:
        out["prompt"] = (WIDEN["prompt"] * p, f"prompt {shape.prompt_tokens} tokens, {what} {prompts[0]}-{prompts[1]}")
    b = _beyond(shape.batch, *batches)
    if b:
        out["batch"] = (WIDEN["batch"] * b, f"batch {shape.batch}, {what} {batches[0]}-{batches[1]}")
    if accept is not None and cov.accept[1] > 0:
        a = _beyond(accept, *cov.accept)
        if a:
            out["accept"] = (WIDEN["accept"] * a,
                             f"accept length {accept:.2f}, calibrated {cov.accept[0]:.2f}-{cov.accept[1]:.2f}")
    if shape.method not in cov.methods:
        near = NEAR_METHOD.get(shape.method)
        out["method"] = (WIDEN["method_near"], f"method {shape.method} never calibrated, priced like {near} (its "
                         f"drafts' shape)") if near in cov.methods else (
            WIDEN["method"], f"method {shape.method} never calibrated (calibrated: {', '.join(cov.methods)})")
    kind = model_kind(shape.target)
    if kind not in cov.kinds:
        out["kind"] = (WIDEN["kind_hybrid" if kind == "hybrid" else "kind"],
                       f"a {kind} model (calibrated: {', '.join(cov.kinds)})")
    if shape.topk > cov.topk_max:
        out["topk"] = (WIDEN["topk"] * math.log2(shape.topk / cov.topk_max),
                       f"tree width topk {shape.topk}, calibrated up to {cov.topk_max}")
    if shape.tp not in cov.tps:
        top = max(cov.tps or (1,))
        out["tp"] = (WIDEN["tp"] * max(1.0, abs(math.log2(shape.tp / top))),
                     f"TP {shape.tp} never calibrated (its all-reduce is the link's roofline)")
    if shape.method != "ar" and shape.target.moe is not None and cov.routings and shape.routing not in cov.routings:
        out["routing"] = (WIDEN["routing"], f"MoE routing {shape.routing} never calibrated (calibrated: "
                          f"{', '.join(cov.routings)}; roofline.py::ROUTING_SHARE)")
    if cov.kv_scales and all(abs(shape.kv_scale - k) > 1e-6 for k in cov.kv_scales):
        out["kv_dtype"] = (WIDEN["kv_dtype"], f"KV cache at {shape.kv_scale:g}x the model dtype never calibrated")
    return out


def _range_terms(shape: CellShape, accept: float | None, cov: Coverage, terms: list[float],
                 outside: list[str], elsewhere: Coverage) -> None:
    """The class's own coverage first; where another class of the calibration (another GPU, graph mode or release)
    ran a load this class did not (a prompt length, a batch, a tree width, a KV dtype, an accept length), the
    global constants that carry it are in units of each GPU's own roofline (model.py), so they move here like a
    GPU's: one WIDEN["gpu"] term for all of them, and only what lies beyond every class's range is priced per
    dimension. A method or a model kind this class never ran is priced in full wherever else it ran (its constants
    are the class's own)."""
    own = _distances(shape, accept, cov)
    far = _distances(shape, accept, elsewhere) if not elsewhere.empty else own
    moved: list[str] = []
    for dim, (term, text) in own.items():
        if dim in MOVABLE and (dim not in far or far[dim][0] < term):
            moved.append(text)
            if dim in far:
                terms.append(far[dim][0])
                outside.append(far[dim][1])
        else:
            terms.append(term)
            outside.append(text)
    if moved:
        terms.append(WIDEN["gpu"])
        outside.append(f"{'; '.join(moved)} in this class; measured by the calibration's other classes "
                       f"({', '.join(elsewhere.gpus)}), moved here by the roofline")
