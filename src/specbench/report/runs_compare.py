"""Did B help? Each matched pair of cells (report/runs_match.py) compared, B against A, on throughput, TPOT mean and
E2E p50, with a verdict on the cell's lead metric (pure functions).

Estimates are load/speedup.py::estimate (the stored pooled value with the standard error of its repeats), compared
by decide/verdict.py::compare(B, A): the speed ratio (above 1: B is better; a latency's is A / B), its interval at
the level of the looks either store took (decide/question.py::looks_of), and the verdict: faster -> improvement,
slower -> regression, tie (the whole interval within the margin) or undecided. A closed-loop cell leads with
throughput, a request-rate cell with TPOT mean (load/speedup.py::lead_of). Beside it, each store's own speedup over
its AR cell of the same model and workload (load/speedup.py::speedups, the lead kind).

A pair whose cells did not both finish is not compared: `failed` when the cell ran in A and failed in B (status
failed or partial), `unmeasured` otherwise (skipped, pending, or not done on either side).

Exit status (`exit_status`): 1 when any pair is a decided regression or failed in B, else 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypedDict

from specbench.decide import METRICS, TIE_MARGIN, Comparison, Metric, compare, looks_of, more_text
from specbench.load import speedup as speedups
from specbench.load import spread as sp
from specbench.report.runs_match import Change, Matching, Pair, SideName, UnmatchedWhy, match
from specbench.report.runs_side import KnobKind, Side
from specbench.stored.records import CellRecord, LoadedStore

Outcome = Literal["improvement", "regression", "tie", "undecided", "failed", "unmeasured"]
OUTCOMES: tuple[Outcome, ...] = ("improvement", "regression", "tie", "undecided", "failed", "unmeasured")
OF_VERDICT: dict[str, Outcome] = {"faster": "improvement", "slower": "regression", "tie": "tie",
                                  "undecided": "undecided"}
FAILED_STATUSES = ("failed", "partial")
DIGITS = 4


@dataclass(frozen=True)
class Delta:
    """B against A on one metric."""

    metric: Metric
    a: sp.Estimate | None
    b: sp.Estimate | None
    comparison: Comparison | None  # None where either side lacks the metric

    @property
    def outcome(self) -> Outcome | None:
        return OF_VERDICT[self.comparison.verdict] if self.comparison is not None else None


@dataclass(frozen=True)
class Speedup:
    """A speculative cell's speedup over the AR cell of its store (the lead kind)."""

    value: float | None
    ci95: tuple[float, float] | None


@dataclass(frozen=True)
class PairResult:
    pair: Pair
    lead: Metric
    deltas: Mapping[Metric, Delta]
    outcome: Outcome
    note: str  # why a pair is not compared, or what would decide an undecided one
    speedup_a: Speedup | None = None
    speedup_b: Speedup | None = None


@dataclass(frozen=True)
class StoreInfo:
    path: Path
    label: str
    engine: str | None
    engine_version: str | None
    cells: int


@dataclass(frozen=True)
class RunsComparison:
    a: StoreInfo
    b: StoreInfo
    margin: float
    matching: Matching
    results: tuple[PairResult, ...]

    def count(self, outcome: Outcome) -> int:
        return sum(1 for r in self.results if r.outcome == outcome)

    @property
    def summary(self) -> str:
        """'B vs A: 3 improvements, 1 regression, 2 ties, 4 undecided' (and the pairs not compared), or why no pair
        matched."""
        if not self.results:
            return "B vs A: no pair of cells matches" + (f" ({_apart_text(self.matching.apart)})"
                                                         if self.matching.apart else "")
        n = {o: self.count(o) for o in OUTCOMES}
        parts = [_plural(n["improvement"], "improvement"), _plural(n["regression"], "regression"),
                 _plural(n["tie"], "tie"), f"{n['undecided']} undecided"]
        if n["failed"]:
            parts.append(f"{n['failed']} failed in B (ran in A)")
        if n["unmeasured"]:
            parts.append(f"{n['unmeasured']} not measured on both sides")
        return "B vs A: " + ", ".join(parts)

    @property
    def coverage(self) -> str:
        """'12 pairs matched; unmatched: 4 cells of A, 0 of B'."""
        ua = sum(1 for u in self.matching.unmatched if u.store == "A")
        ub = sum(1 for u in self.matching.unmatched if u.store == "B")
        return f"{len(self.results)} pairs matched; unmatched: {ua} cells of A, {ub} of B"

    @property
    def exit_status(self) -> int:
        return 1 if self.count("regression") or self.count("failed") else 0


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _apart_text(changes: Sequence[Change]) -> str:
    return "; ".join(f"A ran {c.knob.text} {c.a}, B {c.b}" for c in changes)


def _looks(pair: Pair) -> int:
    return max(looks_of(pair.a.cell.client), looks_of(pair.b.cell.client))


def _delta(pair: Pair, metric: Metric, margin: float) -> Delta:
    key, lower, _ = METRICS[metric]
    a, b = speedups.estimate(pair.a.cell.metrics, key), speedups.estimate(pair.b.cell.metrics, key)
    c = (compare(b, a, lower_is_better=lower, margin=margin, looks=_looks(pair))
         if a is not None and b is not None else None)
    return Delta(metric, a, b, c)


def _lead(cell: CellRecord) -> Metric:
    return "tpot" if speedups.lead_of(cell.client) == "tpot" else "throughput"


def _ar_index(store: LoadedStore, sides: Sequence[Side]) -> dict[tuple[Any, ...], CellRecord]:
    """(model, workload) -> the store's done AR cell there (the first one)."""
    out: dict[tuple[Any, ...], CellRecord] = {}
    for s in sides:
        if s.cell.is_ar and s.cell.status == "done":
            out.setdefault((s.model, s.workload), s.cell)
    return out


def _speedup(side: Side, ars: Mapping[tuple[Any, ...], CellRecord],
             memo: dict[tuple[str, str], sp.Estimate | None]) -> Speedup | None:
    """The lead speedup of a done speculative cell over its store's AR cell (load/speedup.py: throughput for a
    closed loop, AR TPOT / TPOT for a rate cell); None for AR or without one."""
    ar = ars.get((side.model, side.workload))
    if side.cell.is_ar or ar is None or side.cell.status != "done":
        return None
    name, key, lower = next(k for k in speedups.KINDS if k[0] == speedups.LEADS[speedups.lead_of(side.cell.client)])
    if (ar.cell_id, key) not in memo:  # one AR cell is the baseline of every speculative cell at its workload
        memo[(ar.cell_id, key)] = speedups.estimate(ar.metrics, key)
    mine, base = speedups.estimate(side.cell.metrics, key), memo[(ar.cell_id, key)]
    if mine is None or base is None:
        return Speedup(None, None)
    r = sp.ratio(base, mine) if lower else sp.ratio(mine, base)
    return Speedup(r.value, r.ci95)


def _result(pair: Pair, margin: float, ars_a: Mapping[tuple[Any, ...], CellRecord],
            ars_b: Mapping[tuple[Any, ...], CellRecord], memo_a: dict[tuple[str, str], sp.Estimate | None],
            memo_b: dict[tuple[str, str], sp.Estimate | None]) -> PairResult:
    lead = _lead(pair.a.cell)
    sa, sb = pair.a.cell.status, pair.b.cell.status
    speeds = (_speedup(pair.a, ars_a, memo_a), _speedup(pair.b, ars_b, memo_b))
    if sa != "done" or sb != "done":
        outcome: Outcome = "failed" if sa == "done" and sb in FAILED_STATUSES else "unmeasured"
        why = "; ".join(f"{name}: {c.status}" + (f" ({_first_line(c.reason)})" if c.reason else "")
                        for name, c in (("A", pair.a.cell), ("B", pair.b.cell)) if c.status != "done")
        return PairResult(pair, lead, {}, outcome, why, *speeds)
    deltas = {m: _delta(pair, m, margin) for m in METRICS}
    top = deltas[lead]
    if top.comparison is None:
        return PairResult(pair, lead, deltas, "undecided", f"no {METRICS[lead][2]} on both sides", *speeds)
    return PairResult(pair, lead, deltas, OF_VERDICT[top.comparison.verdict], more_text(top.comparison), *speeds)


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= 160 else line[:157] + "..."


def _info(store: LoadedStore) -> StoreInfo:
    return StoreInfo(store.path, store.label, store.engine, store.engine_version, len(store.cells))


def compare_runs(a: LoadedStore, b: LoadedStore, margin: float = TIE_MARGIN) -> RunsComparison:
    """B against A: the matching (report/runs_match.py) and every matched pair's deltas and verdict."""
    m = match(a, b)
    ars_a = _ar_index(a, [p.a for p in m.pairs] + [u.side for u in m.unmatched if u.store == "A"])
    ars_b = _ar_index(b, [p.b for p in m.pairs] + [u.side for u in m.unmatched if u.store == "B"])
    memo_a: dict[tuple[str, str], sp.Estimate | None] = {}
    memo_b: dict[tuple[str, str], sp.Estimate | None] = {}
    results = tuple(_result(p, margin, ars_a, ars_b, memo_a, memo_b) for p in m.pairs)
    return RunsComparison(_info(a), _info(b), margin, m, results)


# ---------------------------------------------------------------- JSON (docs/contracts.md "specbench compare")


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, DIGITS)


def _ci(ci: tuple[float, float] | None) -> list[float] | None:
    return None if ci is None else [round(ci[0], DIGITS), round(ci[1], DIGITS)]


class ChangeJson(TypedDict):
    knob: str
    kind: KnobKind
    a: str | None
    b: str | None
    text: str


class DeltaJson(TypedDict):
    """B against A on one metric: each side's value and interval, the ratio, its interval and the verdict."""

    a: float | None
    b: float | None
    a_ci95: list[float] | None
    b_ci95: list[float] | None
    ratio: float | None
    ci95: list[float] | None
    df: float | None
    level: float | None
    verdict: Outcome | None
    more_repeats: int | None


class CellJson(TypedDict):
    label: str
    tp: int | None
    concurrency: int | None
    workload: str


class PairJson(CellJson):
    """One matched pair: the cells, the outcome, a delta per metric (METRICS' keys) and each store's speedup."""

    a_cell: str
    b_cell: str
    a_status: str
    b_status: str
    lead: Metric
    outcome: Outcome
    note: str | None
    throughput: DeltaJson | None
    tpot: DeltaJson | None
    e2e: DeltaJson | None
    a_speedup: float | None
    a_speedup_ci95: list[float] | None
    b_speedup: float | None
    b_speedup_ci95: list[float] | None


class UnmatchedJson(TypedDict):
    store: SideName
    cell: str
    label: str
    tp: int | None
    concurrency: int | None
    workload: str
    status: str
    why: UnmatchedWhy
    text: str
    changes: list[ChangeJson]


class StoreJson(TypedDict):
    path: str
    label: str
    engine: str | None
    engine_version: str | None
    cells: int


class RelabelledJson(TypedDict):
    label: str
    changes: list[ChangeJson]
    text: str


class ComparisonJson(TypedDict):
    """`specbench compare --json` (docs/contracts.md "specbench compare"), in this key order."""

    a: StoreJson
    b: StoreJson
    margin: float
    subject: list[ChangeJson]
    subject_text: str
    apart: list[ChangeJson]
    relabelled: list[RelabelledJson]
    summary: str
    coverage: str
    counts: dict[Outcome, int]
    pairs: list[PairJson]
    unmatched: list[UnmatchedJson]
    exit_status: int


def _change_json(c: Change) -> ChangeJson:
    return {"knob": c.knob.name, "kind": c.knob.kind, "a": c.a, "b": c.b, "text": c.text}


def _delta_json(d: Delta | None) -> DeltaJson | None:
    if d is None:
        return None
    c = d.comparison
    return {"a": _r(d.a.value) if d.a else None, "b": _r(d.b.value) if d.b else None,
            "a_ci95": _ci(d.a.ci95) if d.a else None, "b_ci95": _ci(d.b.ci95) if d.b else None,
            "ratio": _r(c.ratio) if c else None, "ci95": _ci(c.ci) if c else None, "df": _r(c.df) if c else None,
            "level": _r(c.level) if c else None, "verdict": d.outcome,
            "more_repeats": c.more_repeats if c else None}


def _cell_json(s: Side) -> CellJson:
    c = s.cell
    return {"label": s.label, "tp": c.tp, "concurrency": c.concurrency, "workload": s.workload_text}


assert tuple(METRICS) == ("throughput", "tpot", "e2e"), "PairJson names a delta per METRICS key"


def _pair_json(r: PairResult) -> PairJson:
    p = r.pair
    a, b = r.speedup_a, r.speedup_b
    return {**_cell_json(p.a), "a_cell": p.a.cell.cell_id, "b_cell": p.b.cell.cell_id,
            "a_status": p.a.cell.status, "b_status": p.b.cell.status, "lead": r.lead,
            "outcome": r.outcome, "note": r.note or None,
            # one per METRICS key, in its order
            "throughput": _delta_json(r.deltas.get("throughput")), "tpot": _delta_json(r.deltas.get("tpot")),
            "e2e": _delta_json(r.deltas.get("e2e")),
            "a_speedup": _r(a.value) if a else None, "a_speedup_ci95": _ci(a.ci95) if a else None,
            "b_speedup": _r(b.value) if b else None, "b_speedup_ci95": _ci(b.ci95) if b else None}


def to_json(rc: RunsComparison) -> ComparisonJson:
    """The `--json` object (every key in docs/contracts.md, "specbench compare")."""
    def store(i: StoreInfo) -> StoreJson:
        return {"path": str(i.path), "label": i.label, "engine": i.engine, "engine_version": i.engine_version,
                "cells": i.cells}

    m = rc.matching
    pairs = [_pair_json(r) for r in rc.results]
    return {
        "a": store(rc.a), "b": store(rc.b), "margin": rc.margin,
        "subject": [_change_json(c) for c in m.subject], "subject_text": m.subject_text,
        "apart": [_change_json(c) for c in m.apart],
        "relabelled": [{"label": lc.label, "changes": [_change_json(c) for c in lc.changes], "text": lc.text}
                       for lc in m.relabelled],
        "summary": rc.summary, "coverage": rc.coverage,
        "counts": {o: rc.count(o) for o in OUTCOMES},
        "pairs": pairs,
        "unmatched": [{"store": u.store, "cell": u.side.cell.cell_id, **_cell_json(u.side),
                       "status": u.side.cell.status, "why": u.why, "text": u.text,
                       "changes": [_change_json(c) for c in u.changes]} for u in m.unmatched],
        "exit_status": rc.exit_status,
    }
