"""Spread over the repeats of a cell (pure functions): mean, sample std, CV and a Student-t 95% interval.

`metrics_json.spread` (docs/structures.md) holds, for each metric of SPREAD_METRICS that every repeat measured,
`{"values": [...], "mean", "std", "cv", "ci95": [lo, hi], "n"}`: std is the sample standard deviation (n - 1), CV =
std / |mean|, the interval mean -/+ t(0.975, n - 1) x std / sqrt(n).

The t quantile comes from `scipy.stats.t.ppf` when scipy is installed; otherwise from T975 below, the two-sided 95%
(one-sided 0.975) Student-t critical values for df 1..30 as tabulated in NIST/SEMATECH e-Handbook of Statistical
Methods, section 1.3.6.7.2 "Critical Values of the Student's t Distribution" (rounded to 3 decimals there; the
values here are the same quantiles to 4 decimals), and the normal quantile 1.959964 beyond df 30.

A speedup is a ratio of two independent means (the speculative cell's and the AR cell's output throughput over
their repeats): `ratio_ci` gives the delta-method interval (first-order Taylor expansion of A/B:
se(R)^2 = R^2 (se_A^2 / mean_A^2 + se_B^2 / mean_B^2)) with Welch-Satterthwaite degrees of freedom.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# metrics whose spread over the repeats is stored (the per-repeat `aggregate` keys of load/metrics.py)
SPREAD_METRICS = ("output_throughput", "request_throughput", "total_token_throughput", "goodput",
                  "ttft_ms_mean", "ttft_ms_p50", "ttft_ms_p99", "tpot_ms_mean", "tpot_ms_p50", "tpot_ms_p99",
                  "itl_ms_p50", "e2e_ms_mean", "e2e_ms_p50", "accept_length_mean")
# a cell is noisy when the CV of one of these exceeds `noisy_cv` (what its speedup and decode speed rest on)
NOISY_METRICS = ("output_throughput", "tpot_ms_mean")
NOISY_CV_DEFAULT = 0.05

Z975 = 1.959964  # the standard normal 0.975 quantile
T975 = (12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
        2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
        2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423)


def t975(df: float) -> float:
    """The 0.975 quantile of Student's t with `df` degrees of freedom (scipy if installed, else T975 / normal)."""
    if not df >= 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    try:
        from scipy import stats  # type: ignore[import-untyped]
    except ImportError:
        return table_t975(df)
    return float(stats.t.ppf(0.975, df))


def table_t975(df: float) -> float:
    """T975 for whole df 1..30 (a fractional Welch df rounds down: the wider interval), the normal beyond."""
    d = int(math.floor(df))
    return T975[d - 1] if d <= len(T975) else Z975


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

    def as_json(self) -> dict[str, Any]:
        return {"values": list(self.values), "n": self.n, "mean": self.mean, "std": self.std, "cv": self.cv,
                "ci95": list(self.ci95) if self.ci95 is not None else None}


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
    vals = [v for v in d["values"] if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)]
    return spread(vals) if vals else None


def spread_json(per_repeat: Sequence[Mapping[str, Any]], noisy_cv: float = NOISY_CV_DEFAULT) -> dict[str, Any]:
    """`metrics_json.spread` from the per-repeat metrics: each SPREAD_METRICS key every repeat has as a number."""
    out: dict[str, Any] = {}
    for key in SPREAD_METRICS:
        vals = [m.get(key) for m in per_repeat]
        if vals and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in vals):
            out[key] = spread([float(v) for v in vals]).as_json()  # type: ignore[arg-type]
    noisy = [k for k in NOISY_METRICS if (out.get(k) or {}).get("cv") is not None and out[k]["cv"] > noisy_cv]
    return {"repeats": len(per_repeat), "noisy_cv": noisy_cv, "noisy": noisy, "metrics": out}


def noisy_note(spread_d: Mapping[str, Any]) -> str:
    """'output_throughput CV 7.2% > 5.0% over 3 repeats' for the noisy metrics of a stored `spread`."""
    ms = spread_d.get("metrics") or {}
    parts = [f"{k} CV {100 * ms[k]['cv']:.1f}%" for k in spread_d.get("noisy") or () if (ms.get(k) or {}).get("cv")]
    return f"{', '.join(parts)} > {100 * float(spread_d.get('noisy_cv') or NOISY_CV_DEFAULT):.1f}% over " \
           f"{spread_d.get('repeats')} repeats"


def welch_df(a: Spread, b: Spread) -> float | None:
    """Welch-Satterthwaite degrees of freedom of two independent means."""
    if a.se is None or b.se is None:
        return None
    va, vb = a.se ** 2, b.se ** 2
    den = (va ** 2 / (a.n - 1)) + (vb ** 2 / (b.n - 1))
    if den == 0:
        return float(a.n + b.n - 2)
    return (va + vb) ** 2 / den


def ratio_ci(a: Spread, b: Spread) -> tuple[float, tuple[float, float] | None]:
    """mean_A / mean_B and its 95% interval by the delta method (module docstring); None without spread or B <= 0.

    The ratio is of the means (not the mean of per-repeat ratios): the repeats of A and B are independent runs."""
    if b.mean <= 0:
        raise ValueError("the baseline mean must be > 0")
    r = a.mean / b.mean
    if a.se is None or b.se is None or a.mean == 0:
        return r, None
    se = abs(r) * math.sqrt((a.se / a.mean) ** 2 + (b.se / b.mean) ** 2)
    df = welch_df(a, b)
    t = t975(df) if df is not None and df >= 1 else Z975
    return r, (r - t * se, r + t * se)
