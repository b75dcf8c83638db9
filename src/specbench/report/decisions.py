"""The report's answers: one decision per question (section · TP · workload · concurrency), computed once here and
read by every renderer (markdown, HTML, the terminal summary, the figures, the export).

A question holds every done cell of one section (model · GPU, report/sections.py), TP size, workload (every client
axis, load/axes.py) and concurrency, across the stores of the report. Its cells are the arms of `decide.decide`
(decide/question.py): ranked by the lead metric (closed loop: output throughput; a request rate: TPOT mean), each
compared with the best on throughput, TPOT mean and E2E p50, with the tie margin and the looks of a matrix that
repeats until decided (decide/verdict.py). Each row then carries its rank and its verdict against the best.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from specbench.decide import Arm, Metric, decide, looks_of
from specbench.report.cellrows import estimates
from specbench.report.rows import DONE, Best, CellRow, Question
from specbench.stored.records import CellRecord, natural_key


def _ident(r: CellRow) -> str:
    return f"{r.store}\x1f{r.cell_id}"


def _lead(r: CellRow) -> Metric:
    return "tpot" if r.speedup_lead == "tpot" else "throughput"


def decidable(r: CellRow) -> bool:
    """A row that takes part in its question: done, with a throughput."""
    return r.status == DONE and r.output_throughput is not None


def questions(pairs: Sequence[tuple[CellRecord, CellRow]]) -> tuple[Question, ...]:
    """Every question of the report's done cells, in section, lead (closed loop first), TP, workload and concurrency
    order; `pairs`: each cell with its row (report/cellrows.py), sections in the order of their first cell."""
    groups: dict[tuple[str, int, str, int, Metric], list[tuple[CellRecord, CellRow]]] = {}
    order: dict[str, int] = {}
    for cell, r in pairs:
        order.setdefault(r.section, len(order))
        if decidable(r):
            groups.setdefault((r.section, r.tp or 0, r.workload_full, r.concurrency or 0, _lead(r)), []).append(
                (cell, r))
    keys = sorted(groups, key=lambda k: (order[k[0]], k[4] != "throughput", k[1], natural_key(k[2]), k[3]))
    return tuple(_question(groups[k], k[4]) for k in keys)


def _question(members: Sequence[tuple[CellRecord, CellRow]], lead: Metric) -> Question:
    arms = [Arm(name=r.series, estimates=estimates(cell), is_ar=cell.is_ar, warnings=r.warnings, ident=_ident(r))
            for cell, r in members]
    looks = max(looks_of(cell.client) for cell, _ in members)
    d = decide(arms, lead, looks=looks)
    by_ident = {_ident(r): r for _, r in members}
    rows = tuple(replace(by_ident[s.arm.ident], rank=s.rank,
                         vs_best={m: v for m in ("throughput", "tpot", "e2e")
                                  if (v := s.verdict(m)) is not None}) for s in d.standings)
    first = rows[0]
    return Question(section=first.section, tp=first.tp, workload=first.workload_full, concurrency=first.concurrency,
                    lead=lead, decision=d, rows=rows)


def with_standings(rows: Sequence[CellRow], qs: Sequence[Question]) -> list[CellRow]:
    """The rows with the rank and verdicts their question gave them (rows outside any question unchanged)."""
    decided = {_ident(r): r for q in qs for r in q.rows}
    return [decided.get(_ident(r), r) for r in rows]


def best_rows(qs: Sequence[Question]) -> tuple[Best, ...]:
    """The best configuration of each question (its decision's first standing) as the `Best` rows of rows.py, with
    the best speculative configuration beside it where AR is best."""
    out = []
    for q in qs:
        top = q.rows[0]
        spec = [r for r in q.rows if r.speedup_source != "baseline"]
        best_spec = spec[0] if spec else None
        out.append(Best(tp=top.tp, workload=top.workload, concurrency=top.concurrency, series=top.series,
                        output_throughput=top.output_throughput or 0.0, speedup=top.lead_speedup,
                        ar_throughput=top.ar_throughput, is_baseline=top.speedup_source == "baseline",
                        best_spec=best_spec.series if best_spec else None,
                        best_spec_speedup=best_spec.lead_speedup if best_spec else None,
                        lead=q.lead, speedup_ci=top.lead_speedup_ci, decision=top.decision,
                        cv=top.throughput_cv, tpot_mean=top.tpot_mean, section=top.section,
                        workload_full=top.workload_full,
                        best_spec_decision=best_spec.decision if best_spec else None,
                        headline=q.decision.headline.text, headline_kind=q.decision.headline.kind))
    return tuple(out)

