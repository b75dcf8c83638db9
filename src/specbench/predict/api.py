"""The predictor's entry points: calibrate from stores, predict stored cells (for the report and the leave-one-out
benchmark), and the roofline's measured optimism."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from specbench.errors import UserError
from specbench.predict.calibration import Calibration, ceilings
from specbench.predict.fit import fit_classes
from specbench.predict.model import ROOFLINE, predict_cell
from specbench.predict.observe import Observation, all_observations
from specbench.predict.roofline import Ceilings


def _ceilings_of(obs: Sequence[Observation]) -> dict[str, Ceilings]:
    out: dict[str, Ceilings] = {}
    for o in obs:
        c = ceilings(o.key.gpu)
        if c is not None:
            out[o.key.gpu] = c
    return out


def optimism(obs: Sequence[Observation]) -> dict[str, float | int]:
    """How much faster the pure roofline says the AR cells run than they did: the median ratio at c = 1 and at the
    largest concurrency recorded."""
    ceil = _ceilings_of(obs)
    ratios: dict[int, list[float]] = {}
    for o in obs:
        if o.accept_len is not None or o.key.gpu not in ceil or o.tok_s <= 0:
            continue
        p = predict_cell(o.shape, ceil[o.key.gpu], ROOFLINE, None)
        ratios.setdefault(o.shape.concurrency, []).append(p.tok_s / o.tok_s)
    if not ratios:
        return {}
    hi = max(ratios)

    def med(v: list[float]) -> float:
        s = sorted(v)
        return round(s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2, 3)
    return {"c1": med(ratios.get(1) or ratios[min(ratios)]), "cmax": med(ratios[hi]), "cmax_concurrency": hi}


def calibrate_observations(obs: Sequence[Observation], stores: Sequence[str] = ()) -> Calibration:
    glob, fits = fit_classes(obs, _ceilings_of(obs))
    return Calibration(tuple(fits), glob, tuple(stores), optimism(obs), source="fit")


def calibrate(paths: Sequence[str]) -> Calibration:
    obs = all_observations(paths)
    if not any(o.key.gpu and ceilings(o.key.gpu) for o in obs):
        raise UserError("no calibratable cells in " + ", ".join(paths) + " (done cells with request rows, on a GPU "
                        "of the catalog with roofline ceilings, whose [plan] names the model)")
    return calibrate_observations(obs, [str(p) for p in paths])


@dataclass(frozen=True)
class StoredPrediction:
    obs: Observation
    tok_s: float
    tpot_ms: float
    speedup: float | None
    rel_rms: float
    source: str

    @property
    def speedup_error(self) -> float | None:
        """(predicted - measured) / measured speedup."""
        m = self.obs.speedup
        if m is None or self.speedup is None or m <= 0:
            return None
        return self.speedup / m - 1.0


def predict_stored(cal: Calibration, obs: Observation, baseline: Observation | None) -> StoredPrediction | None:
    """Predict a stored cell with its own measured accept length (acceptance is an input of the model)."""
    ceil = ceilings(obs.key.gpu)
    if ceil is None:
        return None
    k, rms, src = cal.lookup(obs.key)
    p = predict_cell(obs.shape, ceil, k, obs.accept_len)
    sp = None
    if baseline is not None:
        b = predict_cell(baseline.shape, ceil, k, None)
        sp = p.tok_s / b.tok_s if b.tok_s > 0 else None
    return StoredPrediction(obs, p.tok_s, p.tpot_ms, sp, rms if math.isfinite(rms) else math.nan, src)


def baseline_of(obs: Observation, pool: Sequence[Observation]) -> Observation | None:
    """The AR observation of the same store, TP, concurrency and load."""
    for o in pool:
        if (o.store == obs.store and o.accept_len is None and o.shape.tp == obs.shape.tp
                and o.shape.concurrency == obs.shape.concurrency
                and (o.shape.prompt_tokens, o.shape.output_tokens) == (obs.shape.prompt_tokens,
                                                                       obs.shape.output_tokens)):
            return o
    return None


def leave_one_out(paths: Sequence[str]) -> list[StoredPrediction]:
    """Each speculative configuration (store, label) predicted from a calibration fitted without it."""
    obs = all_observations(paths)
    configs = sorted({(o.store, o.label) for o in obs if o.accept_len is not None})
    out: list[StoredPrediction] = []
    for store, label in configs:
        rest = [o for o in obs if (o.store, o.label) != (store, label)]
        cal = calibrate_observations(rest)
        for o in obs:
            if (o.store, o.label) != (store, label):
                continue
            p = predict_stored(cal, o, baseline_of(o, obs))
            if p is not None:
                out.append(p)
    return out
