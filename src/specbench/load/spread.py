"""Spread over the repeats of a cell and the intervals built on it (pure functions).

Two families live here:

- the per-metric spread over the repeats, stored as `metrics_json.spread.metrics.<name>`: `{"values": [...],
  "mean", "std", "cv", "ci95": [lo, hi], "n"}` (std the sample standard deviation (n - 1), CV = std / |mean|, the
  interval of the mean of the per-repeat values, mean -/+ t(0.975, n - 1) x std / sqrt(n)). Kept as it was.
- the estimates the report, the CLI and the export show (`Estimate`): a pooled point value with an interval on the
  log scale. Throughput of repeated cells is the pooled ratio sum(tokens) / sum(measured seconds) (`pooled_rate`,
  the ratio estimator; its standard error by the linearisation of Cochran, Sampling Techniques, 3rd ed., 1977,
  eq. 6.9: se(R) = sqrt(sum((y_i - R x_i)^2) / (n - 1) / n) / mean(x)); a latency (TPOT mean, E2E p50) is the value
  over every pooled request with the relative standard error of its per-repeat values (`relative`). On the log
  scale the standard error is the relative one (delta method: se(log R) = se(R) / R) and the interval
  R x exp(-/+ t se(log R)) is never below 0.
- a speedup is a ratio of two independent estimates (`ratio`): log S = log A - log B, se(log S)^2 = rel_A^2 + rel_B^2,
  with the Welch-Satterthwaite degrees of freedom built from those relative variances
  (df = (v_A + v_B)^2 / (v_A^2 / df_A + v_B^2 / df_B), v = rel^2; Satterthwaite, Biometrics Bulletin 2(6), 1946).
  The decision (`decision`): "faster" when the whole interval is above 1, "slower" when below, else "undecided"
  (also without an interval: a cell measured once has no spread to build one from).

t quantiles are exact (`t_ppf`): the Student-t CDF through the regularized incomplete beta function
(F(t) = 1 - I_{df/(df+t^2)}(df/2, 1/2) / 2 for t >= 0; Abramowitz & Stegun 26.7.1, 26.5.8 continued fraction as in
Numerical Recipes 3rd ed. section 6.4 `betacf`) inverted by Newton steps on the density; tested against
published quantiles (tests/unit/load/test_stats_estimators.py: R's qt and the NIST/SEMATECH e-Handbook 1.3.6.7.2 table).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist
from typing import Any, TypedDict

# metrics whose spread over the repeats is stored (the per-repeat `aggregate` keys of load/metrics.py)
SPREAD_METRICS = ("output_throughput", "request_throughput", "total_token_throughput", "goodput",
                  "ttft_ms_mean", "ttft_ms_p50", "ttft_ms_p99", "tpot_ms_mean", "tpot_ms_p50", "tpot_ms_p99",
                  "itl_ms_p50", "e2e_ms_mean", "e2e_ms_p50", "accept_length_mean")
# `spread.noisy` (kept for older readers): the metrics of these whose CV exceeds `noisy_cv`. The report and the CLI
# no longer flag it: they show the CV and the decision of the speedup interval instead.
NOISY_METRICS = ("output_throughput", "tpot_ms_mean")
NOISY_CV_DEFAULT = 0.05

# ---------------------------------------------------------------- exact Student-t


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz; Numerical Recipes 6.4 `betacf`)."""
    tiny, eps = 1e-300, 1e-15
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b) for a, b > 0 and 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    front = math.exp(ln_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with `df` > 0 degrees of freedom."""
    if df <= 0:
        raise ValueError(f"degrees of freedom must be > 0, got {df}")
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def _t_pdf(t: float, df: float) -> float:
    ln = (math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
          - (df + 1) / 2 * math.log1p(t * t / df))
    return math.exp(ln)


@lru_cache(maxsize=4096)
def t_ppf(p: float, df: float) -> float:
    """The p quantile of Student's t with `df` > 0 degrees of freedom (exact to about 1e-12): Newton steps on the
    exact CDF (guarded by bisection), started from the Cornish-Fisher expansion of A&S 26.7.5, which puts the start
    within a few digits for df >= 2, so a quantile costs 3-5 CDF evaluations instead of dozens (the report compares
    every cell with its AR cell and with the best of its question: a quantile per comparison)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be in (0, 1), got {p}")
    if df <= 0 or not math.isfinite(df):
        if df == math.inf:
            return _norm_ppf(p)
        raise ValueError(f"degrees of freedom must be > 0, got {df}")
    if p < 0.5:
        return -t_ppf(1.0 - p, df)
    if p == 0.5:
        return 0.0
    if df == 1.0:
        return math.tan(math.pi * (p - 0.5))  # the Cauchy quantile, closed form
    if df == 2.0:
        return (2 * p - 1) * math.sqrt(2.0 / (4 * p * (1 - p)))  # closed form for df = 2
    x = max(cornish_fisher(p, df), 1e-12)
    lo, hi = 0.0, math.inf  # the bracket, narrowed by every evaluation; bisection where Newton leaves it
    for _ in range(60):  # 3-5 steps from the expansion's start; the CDF's own rounding (~1e-13 at df 1e6) ends the rest
        f = t_cdf(x, df) - p
        if f > 0:
            hi = x
        else:
            lo = x
        step = f / _t_pdf(x, df)
        tol = 1e-13 * max(1.0, abs(x))
        if abs(step) <= tol or hi - lo <= tol:
            return x - step  # a Newton step this small: the root is that close (quadratic convergence)
        nxt = x - step
        if not lo < nxt < hi:
            nxt = 0.5 * (lo + hi) if math.isfinite(hi) else 2.0 * x
        x = nxt
    return x


def cornish_fisher(p: float, df: float) -> float:
    """The start of t_ppf: z + g1/v + g2/v^2 + g3/v^3 + g4/v^4 (Abramowitz & Stegun 26.7.5), z the normal quantile."""
    z = _norm_ppf(p)
    z2 = z * z
    g1 = (z2 + 1) * z / 4
    g2 = ((5 * z2 + 16) * z2 + 3) * z / 96
    g3 = (((3 * z2 + 19) * z2 + 17) * z2 - 15) * z / 384
    g4 = ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) * z / 92160
    return z + g1 / df + g2 / df ** 2 + g3 / df ** 3 + g4 / df ** 4


@lru_cache(maxsize=64)
def _norm_ppf(p: float) -> float:
    """The standard normal quantile (stdlib statistics.NormalDist: Wichura's AS241, about 1e-16)."""
    return NormalDist().inv_cdf(p)


def t975(df: float) -> float:
    """The 0.975 quantile of Student's t with `df` degrees of freedom (exact; fractional df allowed)."""
    if not df >= 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    return t_ppf(0.975, float(df))


# ---------------------------------------------------------------- the per-metric spread (metrics_json.spread)


class SpreadJson(TypedDict):
    """One metric's `metrics_json.spread.metrics.<name>` (Spread.as_json)."""
    values: list[float]
    n: int
    mean: float
    std: float | None
    cv: float | None
    ci95: list[float] | None


class RateParts(TypedDict):
    """`metrics_json.spread.rate_parts`: each repeat's output tokens and measured seconds, as stored."""
    output_tokens: list[float]
    duration_s: list[float]


class _SpreadDocKeys(TypedDict):
    repeats: int
    noisy_cv: float
    noisy: list[str]
    metrics: dict[str, SpreadJson]


class SpreadDoc(_SpreadDocKeys, total=False):
    """`metrics_json.spread` (spread_json): `rate_parts` only when every repeat has its tokens and seconds."""
    rate_parts: RateParts


@dataclass(frozen=True)
class Spread:
    values: tuple[float, ...]
    mean: float
    std: float | None  # None with one value
    cv: float | None  # None with one value or a zero mean
    ci95: tuple[float, float] | None

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def se(self) -> float | None:
        return self.std / math.sqrt(self.n) if self.std is not None else None

    def as_json(self) -> SpreadJson:
        return {"values": list(self.values), "n": self.n, "mean": self.mean, "std": self.std, "cv": self.cv,
                "ci95": list(self.ci95) if self.ci95 is not None else None}


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def spread(values: Sequence[float]) -> Spread:
    """Mean, sample std (n - 1), CV and the Student-t 95% interval of the mean."""
    xs = tuple(float(v) for v in values)
    if not xs:
        raise ValueError("no values")
    n = len(xs)
    mean = sum(xs) / n
    if n < 2:
        return Spread(xs, mean, None, None, None)
    std = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    half = t975(n - 1) * std / math.sqrt(n)
    cv = std / abs(mean) if mean != 0 else None
    return Spread(xs, mean, std, cv, (mean - half, mean + half))


def from_json(d: Any) -> Spread | None:
    """A stored `spread.metrics.<name>` object back as a Spread (None when it is not one)."""
    if not isinstance(d, Mapping) or not isinstance(d.get("values"), list) or not d["values"]:
        return None
    vals = [v for v in d["values"] if _finite(v)]
    return spread(vals) if vals else None


def spread_json(per_repeat: Sequence[Mapping[str, Any]], noisy_cv: float = NOISY_CV_DEFAULT) -> SpreadDoc:
    """`metrics_json.spread` from the per-repeat metrics: each SPREAD_METRICS key every repeat has as a number, and
    `rate_parts` (each repeat's output tokens and measured seconds: what the pooled throughput's interval needs)."""
    out: dict[str, SpreadJson] = {}
    for key in SPREAD_METRICS:
        vals = [float(v) for m in per_repeat if isinstance(v := m.get(key), (int, float)) and _finite(v)]
        if vals and len(vals) == len(per_repeat):
            out[key] = spread(vals).as_json()
    noisy = [k for k in NOISY_METRICS if k in out and (cv := out[k]["cv"]) is not None and cv > noisy_cv]
    d: SpreadDoc = {"repeats": len(per_repeat), "noisy_cv": noisy_cv, "noisy": noisy, "metrics": out}
    tokens = [m.get("total_output_tokens") for m in per_repeat]
    secs = [m.get("duration_s") for m in per_repeat]
    if per_repeat and all(_finite(t) for t in tokens) and all(_finite(s) and float(s or 0) > 0 for s in secs):
        # every one is a finite number (checked just above): the lists as stored, narrowed for the type
        d["rate_parts"] = {"output_tokens": [t for t in tokens if isinstance(t, (int, float))],
                           "duration_s": [s for s in secs if isinstance(s, (int, float))]}
    return d


def noisy_note(spread_d: Mapping[str, Any]) -> str:
    """'output_throughput CV 7.2% > 5.0% over 3 repeats' for the noisy metrics of a stored `spread`."""
    ms = spread_d.get("metrics") or {}
    parts = [f"{k} CV {100 * ms[k]['cv']:.1f}%" for k in spread_d.get("noisy") or () if (ms.get(k) or {}).get("cv")]
    return f"{', '.join(parts)} > {100 * float(spread_d.get('noisy_cv') or NOISY_CV_DEFAULT):.1f}% over " \
           f"{spread_d.get('repeats')} repeats"


# ---------------------------------------------------------------- estimates on the log scale


@dataclass(frozen=True)
class Estimate:
    """A positive point value with the standard error of its logarithm (None: measured once, no interval)."""

    value: float
    rel_se: float | None = None  # se(log value) = se(value) / value
    df: float | None = None  # degrees of freedom of rel_se (n - 1 for n repeats)
    n: int = 1

    @property
    def ci95(self) -> tuple[float, float] | None:
        return log_interval(self.value, self.rel_se, self.df)

    @property
    def cv(self) -> float | None:
        """The coefficient of variation of one repeat: rel_se x sqrt(n)."""
        return self.rel_se * math.sqrt(self.n) if self.rel_se is not None else None


def log_interval(value: float, rel_se: float | None, df: float | None,
                 p: float = 0.975) -> tuple[float, float] | None:
    """value x exp(-/+ t(p, df) rel_se): the interval of a positive quantity built on its log."""
    if rel_se is None or df is None or not df > 0 or not value > 0 or not math.isfinite(rel_se):
        return None
    h = t_ppf(p, df) * rel_se
    return value * math.exp(-h), value * math.exp(h)


def pooled_rate(tokens: Sequence[float], seconds: Sequence[float]) -> Estimate | None:
    """sum(tokens) / sum(seconds) over the repeats with the ratio estimator's standard error (module docstring);
    None when nothing was measured."""
    ys, xs = [float(v) for v in tokens], [float(v) for v in seconds]
    if not xs or len(xs) != len(ys) or sum(xs) <= 0 or sum(ys) <= 0:
        return None
    n = len(xs)
    r = sum(ys) / sum(xs)
    if n < 2:
        return Estimate(r, None, None, n)
    xbar = sum(xs) / n
    s2 = sum((y - r * x) ** 2 for x, y in zip(xs, ys)) / (n - 1)
    return Estimate(r, math.sqrt(s2 / n) / xbar / r, float(n - 1), n)


def relative(value: float | None, values: Sequence[float]) -> Estimate | None:
    """A positive pooled value with the relative standard error of its per-repeat values (std / sqrt(n) / |mean|);
    no interval with fewer than two values. None when the value is not positive."""
    if value is None or not math.isfinite(value) or value <= 0:
        return None
    vs = [float(v) for v in values if _finite(v)]
    n = len(vs)
    if n < 2 or sum(vs) == 0:
        return Estimate(float(value), None, None, max(n, 1))
    s = spread(vs)
    assert s.std is not None
    return Estimate(float(value), s.std / math.sqrt(n) / abs(s.mean), float(n - 1), n)


def welch_df_rel(a: Estimate, b: Estimate) -> float | None:
    """Welch-Satterthwaite df of log A - log B from the relative variances (v = rel_se^2, each with its df)."""
    if a.rel_se is None or b.rel_se is None or a.df is None or b.df is None:
        return None
    va, vb = a.rel_se ** 2, b.rel_se ** 2
    den = va ** 2 / a.df + vb ** 2 / b.df
    if den == 0:
        return a.df + b.df
    return (va + vb) ** 2 / den


@dataclass(frozen=True)
class Ratio:
    """A / B with its log-ratio 95% interval, the interval's degrees of freedom and the decision."""

    value: float
    ci95: tuple[float, float] | None
    df: float | None

    @property
    def decision(self) -> str:
        return decision(self.ci95)


def ratio(a: Estimate, b: Estimate) -> Ratio:
    """A / B (independent estimates) with the interval exp(log A - log B -/+ t(df) sqrt(rel_A^2 + rel_B^2))."""
    r = a.value / b.value
    df = welch_df_rel(a, b)
    if df is None or a.rel_se is None or b.rel_se is None:
        return Ratio(r, None, None)
    return Ratio(r, log_interval(r, math.sqrt(a.rel_se ** 2 + b.rel_se ** 2), df), df)


DECISIONS = ("faster", "slower", "undecided")


def decision(ci: tuple[float, float] | None) -> str:
    """'faster' when the interval lies above 1, 'slower' below 1, 'undecided' when it holds 1 or there is none."""
    if ci is None:
        return "undecided"
    if ci[0] > 1.0:
        return "faster"
    if ci[1] < 1.0:
        return "slower"
    return "undecided"
