"""The one estimator (issue 22 item 2) against published values: exact Student-t quantiles, a published Welch
degrees-of-freedom example, a published log-scale interval; the pooled throughput, the log-ratio speedup interval
(never below 0) and the decision; both kinds of speedup (item 3) and the lead of closed-loop and rate cells."""

from __future__ import annotations

import math

import pytest

from specbench.load import speedup as S
from specbench.load import spread as sp

# qt(p, df) as R 4.x prints it (R's qt is exact to double precision; the df = 1 and df = 2 rows are also the
# closed forms tan(pi (p - 1/2)) and (2p - 1) / sqrt(2 p (1 - p))).
R_QT = [(0.975, 1, 12.7062047361747), (0.975, 2, 4.30265272974946), (0.975, 3, 3.18244630528371),
        (0.975, 4, 2.77644510519779), (0.975, 5, 2.57058183563631), (0.975, 10, 2.22813885198627),
        (0.975, 20, 2.08596344726586), (0.975, 30, 2.04227245630124), (0.975, 100, 1.98397151852355),
        (0.995, 1, 63.6567411628715), (0.995, 10, 3.16927267261695), (0.95, 7, 1.89457860509001)]


# t(0.975, df) for df 1..30: NIST/SEMATECH e-Handbook 1.3.6.7.2, to 4 decimals
NIST_T975 = (12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
             2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
             2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423)


@pytest.mark.parametrize("p,df,want", R_QT)
def test_t_quantiles_are_exact(p: float, df: int, want: float) -> None:
    assert sp.t_ppf(p, df) == pytest.approx(want, rel=1e-11)
    assert sp.t_ppf(1 - p, df) == pytest.approx(-want, rel=1e-11)
    assert sp.t_cdf(want, df) == pytest.approx(p, abs=1e-12)


def test_t_quantiles_match_the_nist_table_and_take_fractional_df() -> None:
    """NIST/SEMATECH e-Handbook 1.3.6.7.2 (3 decimals) for every whole df 1..30; a fractional Welch df lies between
    its neighbours (no rounding to the table)."""
    for df, tab in enumerate(NIST_T975, start=1):
        assert sp.t975(df) == pytest.approx(tab, abs=6e-5)
    assert sp.t975(2) > sp.t975(2.5) > sp.t975(3)
    assert sp.t_cdf(sp.t975(2.941), 2.941) == pytest.approx(0.975, abs=1e-12)
    assert sp.t_ppf(0.975, math.inf) == pytest.approx(1.959963984540054, abs=1e-9)


def test_welch_df_published_example() -> None:
    """NIST/SEMATECH e-Handbook 1.3.5.3 (AUTO83B.DAT, US vs Japanese cars): n 249 / 79, s 6.41470 / 6.10771;
    the unequal-variance test there has nu = 136.8750. The relative-variance form (a log ratio) is the same formula
    on se / value."""
    se_a, se_b = 6.41470 / math.sqrt(249), 6.10771 / math.sqrt(79)
    rel = sp.welch_df_rel(sp.Estimate(1.0, se_a, 248.0, 249), sp.Estimate(1.0, se_b, 78.0, 79))
    assert rel == pytest.approx(136.8750, abs=0.01)
    # built from relative variances, the df does not depend on the units of either side
    scaled = sp.welch_df_rel(sp.Estimate(20.14458, se_a / 20.14458 * 1.0, 248.0, 249),
                             sp.Estimate(30.48101, se_b / 30.48101, 78.0, 79))
    assert scaled != pytest.approx(136.8750, abs=0.5)  # the relative variances differ from the absolute ones


def test_log_interval_published_geometric_mean_example() -> None:
    """Berthouex & Brown, Statistics for Environmental Engineers (2nd ed.), Example 7.3: y = 95, 20, 74, 195, 71;
    x = log10(y) has mean 1.85786 and variance 0.12784; the 95% interval of the geometric mean is
    10^(1.85786 -/+ t(0.975, 4) sqrt(0.12784 / 5)) = [25.9, 200.4]."""
    ys = [95, 20, 74, 195, 71]
    xs = [math.log10(y) for y in ys]
    mean = sum(xs) / 5
    var = sum((x - mean) ** 2 for x in xs) / 4
    assert mean == pytest.approx(1.85786, abs=1e-5) and var == pytest.approx(0.12784, abs=1e-5)
    gm = 10 ** mean
    lo, hi = sp.log_interval(gm, math.sqrt(var / 5) * math.log(10), 4.0)  # type: ignore[misc]
    assert (lo, hi) == pytest.approx((25.9, 200.4), abs=0.15)
    assert lo * hi == pytest.approx(gm ** 2)  # symmetric on the log scale


def test_pooled_rate_is_the_ratio_estimator() -> None:
    """tokens 100, 100, 100 over 1, 2, 3 s: R = 300 / 6 = 50 tok/s (the mean of the per-repeat rates would be 61.1);
    residuals y - R x = 50, 0, -50, s^2 = 2500, se(R) = sqrt(2500 / 3) / 2 = 14.434 (Cochran eq. 6.9)."""
    est = sp.pooled_rate([100, 100, 100], [1, 2, 3])
    assert est is not None and est.value == pytest.approx(50.0) and est.n == 3 and est.df == 2.0
    assert est.rel_se == pytest.approx(math.sqrt(2500 / 3) / 2 / 50)
    lo, hi = est.ci95  # type: ignore[misc]
    h = sp.t975(2) * est.rel_se
    assert (lo, hi) == pytest.approx((50 * math.exp(-h), 50 * math.exp(h)))
    assert sp.pooled_rate([100], [2]).ci95 is None  # type: ignore[union-attr]
    assert sp.pooled_rate([0, 0], [1, 1]) is None


def test_log_ratio_interval_never_goes_below_zero_and_decides() -> None:
    """The case of issue 22 (0.26x [-0.91, 1.42] with the symmetric interval): very noisy repeats on both sides."""
    a = sp.relative(26.0, [5.0, 80.0, 10.0])
    b = sp.relative(100.0, [90.0, 110.0, 100.0])
    assert a is not None and b is not None
    r = sp.ratio(a, b)
    assert r.value == pytest.approx(0.26) and r.ci95 is not None
    assert 0 < r.ci95[0] < r.value < r.ci95[1] and r.decision == "undecided"
    # the inverse ratio's interval is the reciprocal one: the log interval is symmetric in A and B
    inv = sp.ratio(b, a)
    assert inv.ci95 == pytest.approx((1 / r.ci95[1], 1 / r.ci95[0]))
    # the log-ratio interval is the Welch interval of log A - log B computed by hand
    v = a.rel_se ** 2 + b.rel_se ** 2  # type: ignore[operator]
    df = v ** 2 / (a.rel_se ** 4 / 2 + b.rel_se ** 4 / 2)  # type: ignore[operator]
    assert r.df == pytest.approx(df)
    assert r.ci95 == pytest.approx((0.26 * math.exp(-sp.t975(df) * math.sqrt(v)),
                                    0.26 * math.exp(sp.t975(df) * math.sqrt(v))))
    fast, slow = sp.relative(200.0, [198.0, 200.0, 202.0]), sp.relative(100.0, [99.0, 100.0, 101.0])
    assert fast is not None and slow is not None
    assert sp.ratio(fast, slow).decision == "faster" and sp.ratio(slow, fast).decision == "slower"
    assert sp.decision(None) == "undecided" and sp.decision((0.9, 1.1)) == "undecided"


def _cell(algo: str, tokens: list[int], secs: list[float], tpot: list[float], e2e: list[float],
          rate: object = "inf") -> dict[str, object]:
    per = [{"total_output_tokens": t, "duration_s": s, "output_throughput": t / s, "tpot_ms_mean": p,
            "e2e_ms_p50": e} for t, s, p, e in zip(tokens, secs, tpot, e2e)]
    m = {"output_throughput": sum(tokens) / sum(secs), "tpot_ms_mean": sum(tpot) / len(tpot),
         "e2e_ms_p50": sorted(e2e)[len(e2e) // 2], "spread": sp.spread_json(per)}
    return {"tp": 1, "algorithm": algo, "label": algo, "status": "done", "metrics": m,
            "client": {"concurrency": 4, "prompt_tokens": 64, "output_tokens": 32, "request_rate": rate}}


def test_the_stored_speedup_is_pooled_with_both_kinds_and_a_lead() -> None:
    ar = _cell("ar", [1000, 1000, 1000], [10.0, 10.5, 9.5], [20.0, 21.0, 19.0], [700, 720, 690])
    # one slow repeat: the mean of per-repeat throughputs (250 + 250 + 25) / 3 = 175 is not what ran (3000 / 52)
    spec = _cell("eagle", [1000, 1000, 1000], [4.0, 4.0, 44.0], [8.0, 8.2, 7.8], [300, 310, 290])
    out = {c["algorithm"]: c["metrics"] for c in S.fill([ar, spec])}
    m = out["eagle"]
    assert m["speedup"] == pytest.approx(round((3000 / 52) / 100.0, 4))
    assert m["speedup_ci95"][0] > 0 and m["speedup_decision"] == "undecided"  # the slow repeat: wide
    assert m["tpot_speedup"] == pytest.approx(round(20.0 / 8.0, 4)) and m["tpot_speedup_decision"] == "faster"
    assert m["e2e_speedup"] == pytest.approx(round(700 / 300, 4)) and m["e2e_speedup_decision"] == "faster"
    assert m["speedup_lead"] == "throughput" and m["decision"] == m["speedup_decision"]
    assert out["ar"]["speedup"] is None and out["ar"]["speedup_lead"] == "throughput"
    assert out["ar"]["output_throughput_ci95"][0] < 100.0 < out["ar"]["output_throughput_ci95"][1]
    assert out["ar"]["output_throughput_cv"] == pytest.approx(out["ar"]["spread"]["metrics"]["output_throughput"]["cv"],
                                                              abs=1e-4)


def test_a_rate_cell_leads_with_the_latency_speedup() -> None:
    """Below saturation both servers deliver the offered rate: the throughput ratio is about 1 by construction."""
    ar = _cell("ar", [400, 400, 400], [10.0, 10.0, 10.0], [30.0, 31.0, 29.0], [900, 910, 890], rate=4.0)
    spec = _cell("eagle", [400, 400, 400], [10.0, 10.1, 9.9], [10.0, 10.2, 9.8], [300, 305, 295], rate=4.0)
    m = {c["algorithm"]: c["metrics"] for c in S.fill([ar, spec])}["eagle"]
    assert m["speedup"] == pytest.approx(1.0, abs=0.01) and m["speedup_decision"] == "undecided"
    assert m["speedup_lead"] == "tpot" and m["decision"] == "faster" and m["tpot_speedup"] == pytest.approx(3.0)


def test_a_cell_measured_once_has_values_but_no_interval() -> None:
    ar = {"tp": 1, "algorithm": "ar", "metrics": {"output_throughput": 100.0, "tpot_ms_mean": 10.0, "e2e_ms_p50": 50.0},
          "client": {"concurrency": 1}}
    spec = {"tp": 1, "algorithm": "mtp", "metrics": {"output_throughput": 150.0, "tpot_ms_mean": 5.0,
                                                      "e2e_ms_p50": 25.0}, "client": {"concurrency": 1}}
    m = S.fill([ar, spec])[1]["metrics"]
    assert (m["speedup"], m["tpot_speedup"], m["e2e_speedup"]) == (1.5, 2.0, 2.0)
    assert m["speedup_ci95"] is None and m["decision"] == "undecided" and m["output_throughput_ci95"] is None
