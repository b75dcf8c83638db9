"""One configuration against another on one metric: the ratio, its interval, and the verdict a user acts on.

The ratio is a *speed* ratio: above 1 the first configuration is better (throughput A / B; for a latency, B / A),
so "faster" always means better, whatever the metric. It is the log-ratio of two independent estimates
(load/spread.py::ratio: se(log S)^2 = rel_A^2 + rel_B^2, Welch-Satterthwaite df, exact Student-t quantile).

The verdict (`compare`), with a tie margin m (default 3 %, `TIE_MARGIN`):
- "tie": the whole interval lies within [1 / (1 + m), 1 + m]: whatever the truth inside it, the two are within m of
  each other (an equivalence statement, the two one-sided tests of Schuirmann, J. Pharmacokinet. Biopharm. 15(6),
  1987, read off one interval);
- "faster" / "slower": the whole interval lies above / below 1 (and it is not a tie);
- "undecided": the interval holds 1 and reaches past the margin, or there is no interval (measured once).

The confidence level takes the number of looks into account. A matrix that repeats until decided
(`repeats = {min, max}`) looks at the interval after each added repeat; each look at 95 % would decide a true tie
wrongly far more often than 5 % of the time. The level is 1 - 0.05 / looks (Bonferroni over the looks, looks =
max - min + 1): conservative, and valid whatever the looks' correlation. A cell measured a fixed number of times is
one look: 95 %.

`more_repeats` answers "how many more repeats each would decide this": the smallest k such that with k more repeats
of each side, at the per-repeat spread observed so far (CV_i = rel_se_i x sqrt(n_i)) and the observed ratio taken as
the truth, the interval would end decided (faster, slower or tie). It is a planning figure, not a promise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from specbench.load import spread as sp

Verdict = Literal["faster", "slower", "tie", "undecided"]
VERDICTS: tuple[Verdict, ...] = ("faster", "slower", "tie", "undecided")
TIE_MARGIN = 0.03  # the default margin of a tie: 3 %
ALPHA = 0.05  # the error rate of one decision, over all its looks
MORE_REPEATS_CAP = 64  # beyond this many more repeats each, "more" says only that it is more than this


def level(looks: int = 1) -> float:
    """The two-sided confidence level of one look: 1 - ALPHA / looks (module docstring)."""
    return 1.0 - ALPHA / max(1, int(looks))


def quantile(df: float, looks: int = 1, exact: bool = True) -> float:
    """The Student-t quantile of the interval of one look at `df` degrees of freedom; `exact=False` (a planning
    figure: `more_repeats`) takes the Cornish-Fisher expansion where it is within 0.3 % of the exact one (df >= 4,
    up to 8 looks) instead of inverting the CDF."""
    p = 1.0 - (1.0 - level(looks)) / 2.0
    return sp.t_ppf(p, df) if exact or df < 4 else sp.cornish_fisher(p, df)


@dataclass(frozen=True)
class Comparison:
    """A against B on one metric: the speed ratio (above 1: A is better), its interval, and the verdict."""

    ratio: float
    ci: tuple[float, float] | None
    df: float | None
    verdict: Verdict
    margin: float
    looks: int = 1
    more_repeats: int | None = None  # about this many more repeats each would decide (None: decided, or unknown)
    more_repeats_capped: bool = False  # more than MORE_REPEATS_CAP would be needed

    @property
    def level(self) -> float:
        return level(self.looks)

    @property
    def decided(self) -> bool:
        return self.verdict != "undecided"


def verdict_of(ci: tuple[float, float] | None, margin: float = TIE_MARGIN) -> Verdict:
    """The verdict of a speed-ratio interval (module docstring)."""
    if ci is None:
        return "undecided"
    lo, hi = ci
    if lo >= 1.0 / (1.0 + margin) and hi <= 1.0 + margin:
        return "tie"
    if lo > 1.0:
        return "faster"
    if hi < 1.0:
        return "slower"
    return "undecided"


def _speed(a: sp.Estimate, b: sp.Estimate, lower_is_better: bool) -> tuple[sp.Estimate, sp.Estimate]:
    """The numerator and denominator of the speed ratio: (A, B), or (B, A) for a latency."""
    return (b, a) if lower_is_better else (a, b)


def interval(ratio: float, se: float, df: float, looks: int = 1, exact: bool = True) -> tuple[float, float]:
    h = quantile(df, looks, exact) * se
    return ratio * math.exp(-h), ratio * math.exp(h)


def compare(a: sp.Estimate, b: sp.Estimate, *, lower_is_better: bool = False, margin: float = TIE_MARGIN,
            looks: int = 1) -> Comparison:
    """A against B (independent estimates of one metric; `lower_is_better` for a latency) with its verdict and, when
    undecided, about how many more repeats each would decide it."""
    num, den = _speed(a, b, lower_is_better)
    r = num.value / den.value
    df = sp.welch_df_rel(num, den)
    if df is None or num.rel_se is None or den.rel_se is None:
        return Comparison(r, None, None, "undecided", margin, looks, *_more(a, b, r, margin, looks))
    se = math.hypot(num.rel_se, den.rel_se)
    ci = interval(r, se, df, looks) if se > 0 else (r, r)
    v = verdict_of(ci, margin)
    more: tuple[int | None, bool] = (None, False) if v != "undecided" else _more(a, b, r, margin, looks)
    return Comparison(r, ci, df, v, margin, looks, *more)


def _cv(e: sp.Estimate) -> float | None:
    return e.cv


def _more(a: sp.Estimate, b: sp.Estimate, r: float, margin: float, looks: int) -> tuple[int | None, bool]:
    """(k, capped): the fewest more repeats of each side after which the interval at ratio r would be decided, at
    the per-repeat CVs seen so far; (None, False) when a side has no spread yet (measured once: no CV to plan with)."""
    ca, cb = _cv(a), _cv(b)
    if ca is None or cb is None:
        return None, False

    def decided(k: int) -> bool:
        na, nb = a.n + k, b.n + k
        va, vb = ca * ca / na, cb * cb / nb
        den = va * va / (na - 1) + vb * vb / (nb - 1)
        df = (va + vb) ** 2 / den if den > 0 else float(na + nb - 2)
        se = math.sqrt(va + vb)
        return se == 0 or verdict_of(interval(r, se, df, looks, exact=False), margin) != "undecided"

    # the intervals at k = 1, 2, ... are nested around the same ratio (the se falls and the df grows with k), so
    # "decided" is monotone in k: the fewest k is a binary search
    if not decided(MORE_REPEATS_CAP):
        return MORE_REPEATS_CAP, True
    lo, hi = 1, MORE_REPEATS_CAP
    while lo < hi:
        mid = (lo + hi) // 2
        if decided(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo, False


def more_text(c: Comparison) -> str:
    """'about 2 more repeats each would decide' (or why none can be said)."""
    if c.decided:
        return ""
    if c.more_repeats is None:
        return "measured once: repeat it (`repeats`) to decide"
    if c.more_repeats_capped:
        return f"more than {MORE_REPEATS_CAP} more repeats each: the difference is small against the noise"
    n = c.more_repeats
    return f"about {n} more repeat{'s' if n != 1 else ''} each would decide"
