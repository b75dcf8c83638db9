"""The predictor's entry points: calibrate from stores, predict stored cells (for the report and the leave-one-out
benchmark), and the roofline's measured optimism."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from specbench.errors import UserError
from specbench.predict.calibration import Calibration, ceilings
from specbench.predict.fit import fit_classes
from specbench.predict.judged import judge
from specbench.predict.model import ROOFLINE, predict_cell
from specbench.predict.observe import Observation, all_observations, fitted
from specbench.predict.roofline import Ceilings
from specbench.predict.trust import CALIBRATED, coverage_of


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


def calibrate_observations(obs: Sequence[Observation], stores: Sequence[str] = (),
                           out_of_sample: bool = True) -> Calibration:
    """The constants per class, what the cells covered, and (two stores or more, `out_of_sample`) the error of
    predicting each store from the others (trust.py's base error). A stand-in's artifact (observe.py::fitted) is
    neither fitted nor judged."""
    obs = fitted(obs)
    glob, fits = fit_classes(obs, _ceilings_of(obs))
    cov = coverage_of((o.key.gpu, o.shape, o.accept_len) for o in obs if ceilings(o.key.gpu) is not None)
    per = {f.key: coverage_of((o.key.gpu, o.shape, o.accept_len) for o in obs
                              if (o.key if f.key.model else o.key.pooled()) == f.key) for f in fits}
    cal = Calibration(tuple(fits), glob, tuple(stores), optimism(obs), source="fit", coverage=cov, coverages=per)
    if out_of_sample and len({o.store for o in obs}) >= 2:
        cal = replace(cal, out_of_sample=out_of_sample_error(obs))
    return cal


def _log_rms(v: Sequence[float]) -> float | None:
    return round(math.sqrt(sum(x * x for x in v) / len(v)), 4) if v else None


def out_of_sample_error(obs: Sequence[Observation]) -> dict[str, object]:
    """Leave one store out: each store's cells predicted from a fit on the others, with that fit's own coverage (no
    out-of-sample error of its own: it gets the floor); the log RMS of the speedup over the cells whose prediction
    was `calibrated` (inside the rest's coverage: the widening terms of trust.py price the rest), and of tok/s."""
    sp_in: list[float] = []
    sp_all: list[float] = []
    tok: list[float] = []
    tok_all: list[float] = []
    for store in dict.fromkeys(o.store for o in obs):
        rest = [o for o in obs if o.store != store]
        mine = [o for o in obs if o.store == store]
        if not rest:
            continue
        cal = calibrate_observations(rest, out_of_sample=False)
        for o in mine:
            p = predict_stored(cal, o, baseline_of(o, mine))
            if p is None:
                continue
            if o.tok_s > 0 and p.tok_s > 0:
                tok_all.append(math.log(p.tok_s / o.tok_s))
                if p.state == CALIBRATED:
                    tok.append(tok_all[-1])
            if p.speedup and o.speedup:
                e = math.log(p.speedup / o.speedup)
                sp_all.append(e)
                if p.state == CALIBRATED:
                    sp_in.append(e)
    return {"speedup_log_rms": _log_rms(sp_in) or _log_rms(sp_all), "speedup_log_rms_all": _log_rms(sp_all),
            "tok_s_log_rms": _log_rms(tok) or _log_rms(tok_all), "tok_s_log_rms_all": _log_rms(tok_all),
            "n": len(sp_in), "n_all": len(sp_all),
            "how": "leave one store out: each store predicted by a fit on the others (predict/api.py)"}


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
    sigma: float                 # log-scale SD of the speedup (trust.py)
    source: str
    state: str = ""              # calibrated | extrapolated | uncalibrated
    outside: tuple[str, ...] = ()
    speedup_lo: float | None = None
    speedup_hi: float | None = None

    @property
    def inside(self) -> bool | None:
        """The measured speedup lies inside the stated interval."""
        m = self.obs.speedup
        if m is None or self.speedup_lo is None or self.speedup_hi is None:
            return None
        return self.speedup_lo <= m <= self.speedup_hi

    @property
    def speedup_error(self) -> float | None:
        """(predicted - measured) / measured speedup."""
        m = self.obs.speedup
        if m is None or self.speedup is None or m <= 0:
            return None
        return self.speedup / m - 1.0


def predict_stored(cal: Calibration, obs: Observation, baseline: Observation | None) -> StoredPrediction | None:
    """Predict a stored cell with its own measured accept length (acceptance is an input of the model)."""
    j = judge(cal, obs.key, obs.shape, obs.accept_len)
    if j is None:
        return None
    sp = lo = hi = None
    if baseline is not None:
        b = judge(cal, baseline.key, baseline.shape, None)
        sp = j.pred.tok_s / b.pred.tok_s if b is not None and b.pred.tok_s > 0 else None
        if sp is not None:
            lo, hi = j.trust.interval(sp)
    return StoredPrediction(obs, j.pred.tok_s, j.pred.tpot_ms, sp, j.trust.sigma, j.source, j.trust.state,
                            j.trust.outside, lo, hi)


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


def leave_one_store_out(paths: Sequence[str]) -> list[StoredPrediction]:
    """Each store's speculative cells predicted from a calibration fitted on the other stores only: no label, drafter
    or boot of the store is in the fit (what a user's new run is to the shipped calibration)."""
    obs = all_observations(paths)
    out: list[StoredPrediction] = []
    for store in dict.fromkeys(o.store for o in obs):
        rest = [o for o in obs if o.store != store]
        if not rest:
            continue
        cal = calibrate_observations(rest, sorted({o.store for o in rest}))
        out.extend(predict_speculative(cal, [o for o in obs if o.store == store]))
    return out


def predict_speculative(cal: Calibration, mine: Sequence[Observation]) -> list[StoredPrediction]:
    """The speculative cells of one store's observations predicted by `cal`, each against its own AR cell."""
    out: list[StoredPrediction] = []
    for o in fitted(mine):
        if o.accept_len is None:
            continue
        p = predict_stored(cal, o, baseline_of(o, mine))
        if p is not None:
            out.append(p)
    return out
