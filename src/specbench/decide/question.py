"""One question a user asks of a benchmark: at this workload and concurrency (and TP), which setup should I run?

Every configuration measured there (an `Arm`) is ranked by the question's lead metric, and each is compared with
the best one on every metric (decide/verdict.py::compare): throughput (closed loop: the lead), TPOT mean and E2E p50
(latency; a request-rate workload leads with TPOT mean, since both servers deliver the offered rate). Speculative
configurations are compared with each other as with the autoregressive baseline: the leader is whichever is best.

The headline (`Headline`) is one of four statements, on the lead metric:
- "X (decided against every other)": every other configuration is decided slower than X;
- "X or Y (tie within 3%)": the others tied with X (the rest decided slower);
- "undecided between X and Y: about N more repeats each would decide": some comparison is open (N: the most that any
  open comparison needs, decide/verdict.py::more_repeats);
- "X (the only configuration measured)" when there is nothing to compare.
A named configuration whose cell carries an integrity warning is named with the warning beside it (`Arm.warnings`): in
`Headline.text` after the statement, in the report's answer table in the row's integrity column.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from specbench.decide.verdict import TIE_MARGIN, Comparison, compare, more_text
from specbench.load import speedup as speedups
from specbench.load import spread as sp

Metric = Literal["throughput", "tpot", "e2e"]
# metric -> (metrics_json key, lower is better, short name)
METRICS: dict[Metric, tuple[str, bool, str]] = {
    "throughput": ("output_throughput", False, "throughput"),
    "tpot": ("tpot_ms_mean", True, "TPOT mean"),
    "e2e": ("e2e_ms_p50", True, "E2E p50"),
}
HeadlineKind = Literal["decided", "tie", "undecided", "single", "none"]


@dataclass(frozen=True)
class Arm:
    """One configuration's measurement at one question: its estimate of each metric (load/speedup.py::estimate:
    the pooled value with the standard error of its repeats), its integrity warnings, the cell it came from."""

    name: str
    estimates: Mapping[Metric, sp.Estimate | None]
    is_ar: bool = False
    warnings: tuple[str, ...] = ()
    ident: str = ""  # the cell id (what the runner gives more repeats to)
    predicted: bool = False  # an estimate of the step-cost model, not a measurement

    def value(self, metric: Metric) -> float | None:
        e = self.estimates.get(metric)
        return e.value if e is not None else None

    def speed(self, metric: Metric) -> float | None:
        """The value on a higher-is-better scale (a latency's reciprocal), what ranks the arms."""
        v = self.value(metric)
        if v is None or v <= 0:
            return None
        return 1.0 / v if METRICS[metric][1] else v


def arm_of(name: str, metrics: Mapping[str, Any], *, is_ar: bool = False, warnings: Sequence[str] = (),
           ident: str = "") -> Arm:
    """An arm from a cell's stored metrics (metrics_json): each metric's estimate over its repeats."""
    return Arm(name=name, estimates={m: speedups.estimate(metrics, key) for m, (key, _, _) in METRICS.items()},
               is_ar=is_ar, warnings=tuple(warnings), ident=ident)


@dataclass(frozen=True)
class Standing:
    """One arm's place in a decision: its rank on the lead metric and its comparison with the best arm of each
    metric (None for the best arm itself, or where either lacks the metric)."""

    arm: Arm
    rank: int
    vs_best: Mapping[Metric, Comparison | None]

    def verdict(self, metric: Metric) -> str | None:
        """Against the best on `metric`: 'best', a verdict of decide/verdict.py, or None without the metric."""
        c = self.vs_best.get(metric)
        if c is not None:
            return c.verdict
        return "best" if self.arm.value(metric) is not None else None


@dataclass(frozen=True)
class Headline:
    """The answer on one metric, as one of the four statements (module docstring)."""

    kind: HeadlineKind
    metric: Metric
    names: tuple[str, ...]  # the best first, then the tied or open ones
    text: str
    more_repeats: int | None = None
    warnings: tuple[tuple[str, str], ...] = ()  # (name, warning) of the named arms that carry one
    statement: str = ""  # the statement alone, without the warnings `text` adds after it

    @property
    def best(self) -> str:
        return self.names[0]


@dataclass(frozen=True)
class Decision:
    """Every arm of one question ranked by the lead metric, each compared with the best of every metric, and the
    headline per metric."""

    lead: Metric
    margin: float
    looks: int
    standings: tuple[Standing, ...]
    headlines: Mapping[Metric, Headline] = field(default_factory=dict)

    @property
    def headline(self) -> Headline:
        """The lead metric's answer; "none" when no arm has a measured value of it (every cell at 0 tok/s, say)."""
        got = self.headlines.get(self.lead)
        if got is not None:
            return got
        names = tuple(s.arm.name for s in self.standings[:1])
        return Headline("none", self.lead, names, f"no configuration has a measured {self.lead}")

    def best(self, metric: Metric) -> Standing | None:
        return next((s for s in self.standings if s.arm.value(metric) is not None and s.vs_best.get(metric) is None),
                    None)

    def open_idents(self, metric: Metric | None = None) -> tuple[str, ...]:
        """The cells whose comparison on `metric` (default: the lead) is still open, and the best cell when any is:
        what more repeats would decide (the runner's `repeats = {min, max}` rounds)."""
        m = metric or self.lead
        open_ = [s.arm.ident for s in self.standings if (c := s.vs_best.get(m)) is not None and not c.decided
                 and not s.arm.predicted]
        best = self.best(m)
        if open_ and best is not None and not best.arm.predicted:
            open_.insert(0, best.arm.ident)
        return tuple(i for i in open_ if i)


def decide(arms: Sequence[Arm], lead: Metric = "throughput", *, margin: float = TIE_MARGIN,
           looks: int = 1) -> Decision:
    """Rank the arms by the lead metric and compare each with the best arm of every metric."""
    order = sorted(arms, key=lambda a: -(a.speed(lead) or 0.0))
    best: dict[Metric, Arm] = {}
    for m in METRICS:
        scored = [a for a in order if a.speed(m) is not None]
        if scored:
            best[m] = max(scored, key=lambda a: a.speed(m) or 0.0)
    standings = tuple(Standing(arm=a, rank=i + 1, vs_best={m: _against(a, best.get(m), m, margin, looks)
                                                            for m in METRICS})
                      for i, a in enumerate(order))
    heads = {m: h for m in METRICS if (h := _headline(standings, best.get(m), m, margin)) is not None}
    return Decision(lead=lead, margin=margin, looks=looks, standings=standings, headlines=heads)


def _against(a: Arm, top: Arm | None, m: Metric, margin: float, looks: int) -> Comparison | None:
    if top is None or a is top:
        return None
    mine, theirs = a.estimates.get(m), top.estimates.get(m)
    if mine is None or theirs is None:
        return None
    return compare(mine, theirs, lower_is_better=METRICS[m][1], margin=margin, looks=looks)


def _headline(standings: Sequence[Standing], top: Arm | None, m: Metric, margin: float) -> Headline | None:
    if top is None:
        return None
    others = [(s.arm, c) for s in standings if (c := s.vs_best.get(m)) is not None]
    pct = f"{100 * margin:g}%"
    if not others:
        return _named("single", m, [top], f"{top.name} (the only configuration measured)")
    open_ = [(a, c) for a, c in others if not c.decided]
    if open_:
        more = [c.more_repeats for _, c in open_ if c.more_repeats is not None]
        names = [top, *(a for a, _ in open_)]
        why = more_text(max(open_, key=lambda ac: ac[1].more_repeats or 0)[1]) if len(more) == len(open_) else \
            more_text(next(c for _, c in open_ if c.more_repeats is None))
        return _named("undecided", m, names, f"undecided between {_join(names)}: {why}",
                      max(more) if len(more) == len(open_) and more else None)
    ties = [a for a, c in others if c.verdict == "tie"]
    if ties:
        names = [top, *ties]
        return _named("tie", m, names, f"{' or '.join(a.name for a in names)} (tie within {pct})")
    # decided against every other: each is slower (a "faster" verdict against the best cannot be: it would be best)
    return _named("decided", m, [top], f"{top.name} (decided against every other)")


def _join(arms: Sequence[Arm]) -> str:
    names = [a.name for a in arms]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _named(kind: HeadlineKind, m: Metric, arms: Sequence[Arm], statement: str, more: int | None = None) -> Headline:
    warnings = tuple((a.name, w) for a in arms for w in a.warnings)
    text = statement + (f"; {warning_text(warnings)}" if warnings else "")
    return Headline(kind=kind, metric=m, names=tuple(a.name for a in arms), text=text, more_repeats=more,
                    warnings=warnings, statement=statement)


def warning_text(warnings: Sequence[tuple[str, str]]) -> str:
    """(name, warning) pairs as one phrase, each warning once with the names that carry it."""
    by_text: dict[str, list[str]] = {}
    for name, w in warnings:
        names = by_text.setdefault(w, [])
        if name not in names:
            names.append(name)
    return "; ".join(f"{', '.join(names)}: {w}" for w, names in by_text.items())


def looks_of(client: Mapping[str, Any]) -> int:
    """How many times a cell's decision was looked at (decide/verdict.py): `repeats_max - repeats + 1` for a matrix
    that repeats until decided (`repeats = {min, max}`), else 1."""
    lo, hi = client.get("repeats"), client.get("repeats_max")
    if isinstance(hi, int) and not isinstance(hi, bool) and isinstance(lo, int) and not isinstance(lo, bool):
        return max(1, hi - lo + 1)
    return 1
