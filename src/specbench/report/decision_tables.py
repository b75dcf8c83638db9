"""The decisions (report/decisions.py) as tables of display strings: one row per question with its answer on the lead
metric and on each latency metric ("Which setup to run"), and every configuration of every question ranked against
the best on every metric and against AR ("Ranking per question"); markdown, HTML and the terminal draw the same
strings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specbench.decide import METRICS, Comparison, Metric, more_text
from specbench.decide.question import warning_text
from specbench.decide.verdict import level
from specbench.report.formatting import fmt, fmt_decision, fmt_ratio, fmt_throughput
from specbench.report.rows import CellRow, Question


@dataclass(frozen=True)
class DecisionTable:
    """One table of the decisions of a section and lead, as display strings (markdown, HTML and the terminal draw
    the same strings)."""

    title: str
    note: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    text_cols: frozenset[int]


ANSWER_NOTE = ("Each question is one TP size, workload and concurrency: every configuration measured there is ranked "
               "by {lead} and compared with the best; the answer says which to run: \"X (decided against every "
               "other)\", \"X or Y (tie within 3%)\" (the whole interval of their ratio lies within 3% either way), or "
               "\"undecided between X and Y\" with about how many more repeats each would decide (at the spread seen "
               "so far). The latency answers are the same question asked on TPOT mean and E2E p50. A named "
               "configuration with an integrity warning carries it beside its name, in the row's integrity column")


def _lead_name(lead: Metric) -> str:
    return "output throughput (closed loop)" if lead == "throughput" else "TPOT mean (request rate: both servers " \
        "deliver the offered rate)"


def _others(lead: Metric) -> tuple[Metric, ...]:
    return tuple(m for m in METRICS if m != lead)


def _head(q: Question, m: Metric) -> str:
    h = q.decision.headlines.get(m)
    return (h.statement or h.text) if h is not None else "–"


def _integrity(q: Question) -> str:
    """The warnings of every configuration a row's answers name, each once."""
    pairs = [p for h in q.decision.headlines.values() for p in h.warnings]
    return warning_text(pairs) or "–"


def _groups(qs: Sequence[Question]) -> dict[tuple[str, Metric], list[Question]]:
    groups: dict[tuple[str, Metric], list[Question]] = {}
    for q in qs:
        groups.setdefault((q.section, q.lead), []).append(q)
    return groups


def answer_tables(qs: Sequence[Question]) -> list[DecisionTable]:
    """One row per question: the answer on the lead metric, then on each latency metric."""
    out = []
    for (section, lead), group in _groups(qs).items():
        others = _others(lead)
        header = ("TP", "workload", "c", f"answer ({METRICS[lead][2]})", *(f"on {METRICS[m][2]}" for m in others),
                  "integrity of the named", "n")
        rows = tuple((fmt(q.tp), q.workload or "–", fmt(q.concurrency), _head(q, lead), *(_head(q, m) for m in others),
                      _integrity(q), _repeats(q)) for q in group)
        kind = "closed loop" if lead == "throughput" else "request rate"
        title = f"Which setup to run ({kind})" + (f": {section}" if section else "")
        out.append(DecisionTable(title, ANSWER_NOTE.format(lead=_lead_name(lead)) + _level_note(group), header, rows,
                                 frozenset(range(1, 3 + len(others) + 2)) - {2}))
    return out


def _repeats(q: Question) -> str:
    ns = sorted({r.repeats or 1 for r in q.rows})
    return str(ns[0]) if len(ns) == 1 else f"{ns[0]}-{ns[-1]}"


def _level_note(group: Sequence[Question]) -> str:
    looks = max(q.decision.looks for q in group)
    if looks <= 1:
        return "."
    return (f". Repeated until decided: each interval is at {100 * level(looks):.1f}% (1 - 5% / {looks} looks, "
            "Bonferroni), so that the looks after each added repeat still decide wrongly at most 5% of the time.")


def _vs(c: Comparison | None, best: bool) -> str:
    if best:
        return "best"
    if c is None:
        return "–"
    ci = f" [{c.ci[0]:.2f}, {c.ci[1]:.2f}]" if c.ci is not None else ""
    more = f" ({more_text(c)})" if not c.decided and c.more_repeats is not None else ""
    return f"{c.ratio:.2f}×{ci} {c.verdict}{more}"


def _value(row: CellRow, m: Metric) -> str:
    if m == "throughput":
        return fmt_throughput(row)
    return fmt(row.tpot_mean, 2) if m == "tpot" else fmt(row.e2e_p50, 1)


RANKING_NOTE = ("Every configuration of each question, ranked by {lead}; vs best: its speed ratio to the best on that "
                "metric (above 1 is better: a latency's ratio is the best's latency over its own) with the interval "
                "and the verdict (tie within 3% either way, slower, undecided); vs AR: the lead speedup over the AR cell with "
                "its verdict")


def ranking_tables(qs: Sequence[Question]) -> list[DecisionTable]:
    """Every configuration of every question, ranked, each against the best on every metric and against AR."""
    out = []
    for (section, lead), group in _groups(qs).items():
        order = (lead, *_others(lead))
        header = ("TP", "workload", "c", "#", "config",
                  *(x for m in order for x in (_metric_head(m), "vs best")), "vs AR", "warnings")
        rows = []
        for q in group:
            for s, row in zip(q.decision.standings, q.rows):
                cells: list[str] = [fmt(q.tp), q.workload or "–", fmt(q.concurrency), str(s.rank), row.series]
                for m in order:
                    cells += [_value(row, m), _vs(s.vs_best.get(m), s.verdict(m) == "best")]
                cells += [_vs_ar(row), "; ".join(row.warnings) or "–"]
                rows.append(tuple(cells))
        kind = "closed loop" if lead == "throughput" else "request rate"
        title = f"Ranking per question ({kind})" + (f": {section}" if section else "")
        text = frozenset({1, 4, len(header) - 1})
        out.append(DecisionTable(title, RANKING_NOTE.format(lead=_lead_name(lead)) + _level_note(group), header,
                                 tuple(rows), text))
    return out


def _metric_head(m: Metric) -> str:
    return {"throughput": "out tok/s", "tpot": "TPOT mean ms", "e2e": "E2E p50 ms"}[m]


def _vs_ar(row: CellRow) -> str:
    if row.speedup_source == "baseline":
        return "AR"
    lead = row.lead_speedup
    return f"{fmt_ratio(lead, row.lead_speedup_ci)} {fmt_decision(row)}" if lead is not None else fmt_decision(row)
