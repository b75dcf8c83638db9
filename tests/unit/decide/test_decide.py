"""Decisions (issue 34 item 1): a verdict per comparison with a tie margin, a level that counts the looks, how many
more repeats would decide, and the four headline statements; on hand-computed numbers and on a real H200 store."""

from __future__ import annotations

import math

import pytest

from paths import DATA
from specbench.decide import Arm, arm_of, compare, decide, looks_of, verdict_of
from specbench.decide.verdict import MORE_REPEATS_CAP, level, quantile
from specbench.load import spread as sp

DENSE8B = DATA / "h200-dense8b-sglang-0.5.15.post1" / "h200-dense8b.db"


def est(value: float, cv: float, n: int) -> sp.Estimate:
    """An estimate over n repeats whose per-repeat CV is `cv` (rel_se = cv / sqrt(n), df = n - 1)."""
    return sp.Estimate(value, cv / math.sqrt(n), float(n - 1), n)


def test_verdicts_of_intervals_with_the_margin() -> None:
    assert verdict_of((1.01, 1.02)) == "tie"  # above 1, but within 3 %: not worth a decision
    assert verdict_of((0.975, 1.029)) == "tie"
    assert verdict_of((1.01, 1.05)) == "faster"
    assert verdict_of((0.90, 0.99)) == "slower"
    assert verdict_of((0.95, 1.02)) == "undecided"  # holds 1, reaches past the margin
    assert verdict_of(None) == "undecided"
    assert verdict_of((1.01, 1.05), margin=0.10) == "tie"


def test_compare_is_the_log_ratio_interval_at_the_looks_level() -> None:
    """A 1000 tok/s CV 2 % x 4 repeats against B 900 tok/s CV 3 % x 4: se(log) = sqrt(0.01^2 + 0.015^2), Welch df from
    the relative variances, t at 97.5 %; the interval by hand."""
    a, b = est(1000.0, 0.02, 4), est(900.0, 0.03, 4)
    c = compare(a, b)
    se = math.hypot(0.01, 0.015)
    df = (0.01 ** 2 + 0.015 ** 2) ** 2 / (0.01 ** 4 / 3 + 0.015 ** 4 / 3)
    t = sp.t_ppf(0.975, df)
    assert c.ratio == pytest.approx(1000 / 900)
    assert c.df == pytest.approx(df)
    assert c.ci == pytest.approx((1000 / 900 * math.exp(-t * se), 1000 / 900 * math.exp(t * se)))
    assert c.verdict == "faster" and c.more_repeats is None
    # a latency: lower is better, so the speed ratio is B / A
    lat = compare(est(9.0, 0.02, 4), est(10.0, 0.02, 4), lower_is_better=True)
    assert lat.ratio == pytest.approx(10 / 9) and lat.verdict == "faster"
    # seven looks (repeats {min 2, max 8}): each at 1 - 0.05 / 7, so a wider interval
    c7 = compare(a, b, looks=7)
    assert level(7) == pytest.approx(1 - 0.05 / 7)
    assert quantile(df, 7) == pytest.approx(sp.t_ppf(1 - 0.025 / 7, df))
    assert c7.ci is not None and c.ci is not None and c7.ci[0] < c.ci[0] and c7.ci[1] > c.ci[1]


def test_a_cell_measured_once_is_undecided_without_a_plan() -> None:
    c = compare(sp.Estimate(1000.0, None, None, 1), est(500.0, 0.02, 3))
    assert c.verdict == "undecided" and c.ci is None and c.more_repeats is None


def test_more_repeats_is_the_fewest_that_decide_at_the_observed_spread() -> None:
    """Two repeats of CV 5 % (df 2: t = 4.3) leave a 10 % difference open; `more_repeats` k is the fewest more repeats each after
    which the same ratio and CVs give a decided interval, and k - 1 would not."""
    a, b = est(900.0, 0.05, 2), est(1000.0, 0.05, 2)
    c = compare(a, b)
    assert c.verdict == "undecided" and c.more_repeats is not None and not c.more_repeats_capped
    k = c.more_repeats
    assert compare(est(900.0, 0.05, 2 + k), est(1000.0, 0.05, 2 + k)).verdict == "slower"
    assert k > 1 and compare(est(900.0, 0.05, 1 + k), est(1000.0, 0.05, 1 + k)).verdict == "undecided"
    # a 1 % difference under 20 % per-repeat noise: neither a tie nor a decision within the cap
    edge = compare(est(1010.0, 0.20, 2), est(1000.0, 0.20, 2))
    assert edge.verdict == "undecided" and edge.more_repeats == MORE_REPEATS_CAP and edge.more_repeats_capped


def arm(name: str, value: float, cv: float = 0.01, n: int = 4, **kw: object) -> Arm:
    e = est(value, cv, n)
    return Arm(name=name, estimates={"throughput": e, "tpot": est(1000.0 / value, cv, n), "e2e": None},
               ident=f"cell-{name}", **kw)  # type: ignore[arg-type]


def test_the_four_headlines() -> None:
    decided = decide([arm("ar", 100.0), arm("eagle3", 150.0), arm("mtp", 120.0)])
    assert decided.headline.kind == "decided" and decided.headline.text == "eagle3 (decided against every other)"
    assert [s.arm.name for s in decided.standings] == ["eagle3", "mtp", "ar"]
    assert decided.standings[1].verdict("throughput") == "slower" and decided.standings[0].verdict("throughput") \
        == "best"
    assert decided.open_idents() == ()

    tie = decide([arm("ar", 100.0, cv=0.002), arm("ngram", 100.5, cv=0.002)])
    assert tie.headline.kind == "tie" and tie.headline.text == "ngram or ar (tie within 3%)"

    open_ = decide([arm("ar", 100.0, cv=0.05, n=2), arm("dflash", 110.0, cv=0.05, n=2), arm("x", 50.0)])
    h = open_.headline
    assert h.kind == "undecided" and h.names == ("dflash", "ar") and h.more_repeats is not None
    assert h.text.startswith("undecided between dflash and ar: about ")
    assert open_.open_idents() == ("cell-dflash", "cell-ar")  # the open one and the best: what gets more repeats

    single = decide([arm("ar", 100.0)])
    assert single.headline.kind == "single" and single.headline.text == "ar (the only configuration measured)"


def test_a_winner_with_an_integrity_warning_is_named_with_it() -> None:
    d = decide([arm("ar", 100.0), arm("eagle3", 150.0, warnings=("2 waves at c = 16 (under 3)",))])
    assert d.headline.text == "eagle3 (decided against every other); eagle3: 2 waves at c = 16 (under 3)"


def test_rate_cells_lead_with_tpot() -> None:
    a = Arm("ar", {"throughput": est(100.0, 0.01, 3), "tpot": est(20.0, 0.01, 3), "e2e": None})
    b = Arm("eagle3", {"throughput": est(100.0, 0.01, 3), "tpot": est(10.0, 0.01, 3), "e2e": None})
    d = decide([a, b], lead="tpot")
    assert d.headline.metric == "tpot" and d.headline.best == "eagle3" and d.headline.kind == "decided"
    assert d.headlines["throughput"].kind == "tie"


def test_looks_of_reads_the_adaptive_repeats() -> None:
    assert looks_of({"repeats": 2, "repeats_max": 8}) == 7
    assert looks_of({"repeats": 3}) == 1 and looks_of({}) == 1


def test_a_real_h200_store_is_decided_per_concurrency() -> None:
    """The dense Qwen3-8B store (2 repeats per cell): at c = 1 sim 3.5 is decided against every other; at c = 32 the
    1.11x of sim 3.5 over AR is open (df near 1) and more repeats are named."""
    from specbench.stored.read import load_store

    store = load_store(DENSE8B)
    by_c: dict[int | None, list[Arm]] = {}
    for c in store.cells:
        by_c.setdefault(c.concurrency, []).append(arm_of(c.label, c.metrics, is_ar=c.is_ar, ident=c.cell_id))
    assert decide(by_c[1]).headline.text == "eagle3-sim3.5 (decided against every other)"
    h32 = decide(by_c[32]).headline
    assert h32.kind == "undecided" and h32.names == ("eagle3-sim3.5", "ar") and (h32.more_repeats or 0) >= 1
