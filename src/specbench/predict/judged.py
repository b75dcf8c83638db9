"""One cell predicted with its trust: the constants the calibration finds for its class (calibration.py::find), the
step model's numbers (model.py), and the state and log-scale interval of trust.py. What `predict`, `run --dry-run`,
`run --order predicted`, the report and the accuracy benchmark all use."""

from __future__ import annotations

import math
from dataclasses import dataclass

from specbench.predict.calibration import Calibration, ceilings
from specbench.predict.cells import ClassKey
from specbench.predict.model import CellPrediction, CellShape, predict_cell
from specbench.predict.trust import Trust, assess

DEFAULT_SIGMA = 0.10  # no out-of-sample error anywhere (an empty or version-1 calibration): 10 % (log)


@dataclass(frozen=True)
class Judged:
    pred: CellPrediction
    trust: Trust
    source: str


def judge(cal: Calibration, key: ClassKey, shape: CellShape, accept: float | None) -> Judged | None:
    """None when the GPU has no roofline ceilings in the catalog."""
    ceil = ceilings(key.gpu)
    if ceil is None:
        return None
    found = cal.find(key)
    ratio = 1.0
    if found.from_gpu and found.from_gpu != key.gpu:
        src = ceilings(found.from_gpu)
        ratio = ceil.bytes_per_s / src.bytes_per_s if src else 1.0
    base = cal.base_sigma()
    tok = cal.out_of_sample.get("tok_s_log_rms")
    trust = assess(shape, accept, key.gpu, found.coverage, base if math.isfinite(base) else DEFAULT_SIGMA,
                   found.moved, ratio, float(tok) if isinstance(tok, (int, float)) else None, found.fit_rms,
                   cal.coverage)
    return Judged(predict_cell(shape, ceil, found.params, accept), trust, found.source)


def ar_twin(shape: CellShape, cap: int | None = None) -> CellShape:
    """The AR cell a speculative cell is compared with: same target, TP, concurrency, load and routing."""
    return CellShape(shape.target, None, "ar", 0, 1, shape.tp, shape.concurrency, cap or shape.cap,
                     shape.prompt_tokens, shape.output_tokens, 1, shape.kv_scale, shape.routing)
