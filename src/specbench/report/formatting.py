"""Display strings shared by markdown.py and html.py: numbers, speedups, and the columns of a phase table."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from specbench.decide import METRICS, Comparison, Metric, more_text
from specbench.decide.question import warning_text
from specbench.decide.verdict import level
from specbench.load import metric_table
from specbench.load.metric_table import MetricDef
from specbench.matrix.cellrun import no_reset_route
from specbench.report.rows import Best, CellRow, Question


def fmt(value: float | int | None, digits: int = 1) -> str:
    if value is None:
        return "–"
    if isinstance(value, int):
        return str(value)
    return f"{value:,.{digits}f}"


def fmt_ratio(value: float | None, ci: tuple[float, float] | None) -> str:
    """'1.23× [1.10, 1.35]' (the log-ratio 95% interval in brackets when there is one), '–' for None."""
    if value is None:
        return "–"
    return f"{value:.2f}× [{ci[0]:.2f}, {ci[1]:.2f}]" if ci is not None else f"{value:.2f}×"


def fmt_speedup(row: CellRow) -> str:
    """The throughput speedup with its interval; 'base' for AR, 'n/a' without a baseline."""
    if row.speedup_source == "baseline":
        return "base"
    if row.speedup is None:
        return "n/a" if row.speedup_source == "no-baseline" else "–"
    return fmt_ratio(row.speedup, row.speedup_ci)


def fmt_latency_speedup(row: CellRow) -> str:
    """AR TPOT mean / TPOT mean with its interval ('base' for AR)."""
    if row.speedup_source == "baseline":
        return "base"
    return fmt_ratio(row.tpot_speedup, row.tpot_speedup_ci)


def fmt_latency_speedup_e2e(row: CellRow) -> str:
    """AR E2E p50 / E2E p50 with its interval ('base' for AR)."""
    if row.speedup_source == "baseline":
        return "base"
    return fmt_ratio(row.e2e_speedup, row.e2e_speedup_ci)


SHORT = {"throughput": "throughput", "tpot": "TPOT", "e2e": "E2E"}


def fmt_decision(row: CellRow) -> str:
    """The cell against AR (decide/: with the tie margin): the lead metric's verdict, then each latency verdict that
    says something else ('undecided; TPOT slower'), the lead named when it is the latency one ('faster (TPOT)')."""
    if row.speedup_source == "baseline":
        return "–"
    if not row.vs_ar:
        return "–" if row.decision is None else (f"{row.decision} (TPOT)" if row.speedup_lead == "tpot"
                                                 else row.decision)
    lead = "tpot" if row.speedup_lead == "tpot" else "throughput"
    head = row.vs_ar.get(lead)
    text = (f"{head} (TPOT)" if lead == "tpot" else head) if head else "–"
    others = [f"{SHORT[m]} {v}" for m, v in row.vs_ar.items() if m != lead and v != head]
    return "; ".join([text, *others])


def fmt_vs_best(row: CellRow) -> str:
    """The cell against the best of its question on the lead metric: best / tie / slower / undecided."""
    lead = "tpot" if row.speedup_lead == "tpot" else "throughput"
    return row.vs_best.get(lead, "–")


def fmt_throughput(row: CellRow) -> str:
    """'1,234.5' (pooled over the repeats: total tokens / total measured time) and, with repeats, its 95% interval on
    the log scale '1,234.5 [1,200.1, 1,270.0]'."""
    text = fmt(row.output_throughput)
    if row.throughput_ci is not None:
        lo, hi = row.throughput_ci
        return f"{text} [{fmt(lo)}, {fmt(hi)}]"
    return text


def fmt_accept(row: CellRow) -> str:
    """The measured accept length; a simulated cell's carries the marker 'sim' (SIMULATED_NOTE)."""
    text = fmt(row.accept_length, 2)
    return f"{text} (sim {row.simulated:g})" if row.simulated is not None else text


SIMULATED_NOTE = ("(sim X): the engine was told to accept X tokens per step (server `simulated_accept_len`); the "
                  "accept length and speedup of such a cell show what that acceptance would give, not what its "
                  "drafter achieves.")


def _percent(value: float | None, digits: int) -> str:
    return f"{100 * value:.{digits}f}%" if value is not None else "–"


# how a metric column (load/metric_table.py, MetricDef.style) shows its value
_STYLES: dict[str, Callable[[CellRow, MetricDef], str]] = {
    "number": lambda row, m: fmt(row.values.get(m.key), m.digits),
    "percent": lambda row, m: _percent(row.values.get(m.key), m.digits),
    "throughput": lambda row, m: fmt_throughput(row),
    "accept": lambda row, m: fmt_accept(row),
}


def cell_columns() -> tuple[tuple[str, str], ...]:
    """(header, what it reads) of a phase table: the cell, then every metric of the metric table that has a column
    (load/metric_table.py), then what the report derives (speedups, decisions, repeats)."""
    return (("config", "series"), ("c", "concurrency"), ("status", "status"),
            *((m.column, m.key) for m in metric_table.columns()),
            ("speedup vs AR", "speedup"), ("TPOT speedup", "tpot_speedup"), ("E2E speedup", "e2e_speedup"),
            ("vs AR", "decision"), ("vs best", "vs_best"), ("n", "repeats"), ("CV", "throughput_cv"),
            ("cell", "cell_id"), ("note", "note"))


# the cell_columns() that are not metrics and not shown as plain numbers, each with its display function
_CELL_FORMATS: dict[str, Callable[[CellRow], str]] = {
    "speedup": fmt_speedup,
    "tpot_speedup": fmt_latency_speedup,
    "e2e_speedup": fmt_latency_speedup_e2e,
    "decision": fmt_decision,
    "vs_best": fmt_vs_best,
    "throughput_cv": lambda row: _percent(row.throughput_cv, 1),
}


def cell_values(row: CellRow) -> list[str]:
    """The cell_columns() of one row as display strings."""
    out = []
    for _, attr in cell_columns():
        metric = metric_table.BY_KEY.get(attr)
        shown = _CELL_FORMATS.get(attr)
        if metric is not None:
            out.append(_STYLES[metric.style](row, metric))
        elif shown is not None:
            out.append(shown(row))
        else:
            value = getattr(row, attr)
            out.append(value if isinstance(value, str) else fmt(value))
    return out


@dataclass(frozen=True)
class BestTable:
    """One 'fastest' table: the points of one section and one lead, as display strings."""

    title: str
    note: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    text_cols: frozenset[int]


LEAD_NOTES = {
    "throughput": "closed loop: ranked by output throughput (pooled over the repeats); speedup = output throughput / "
                  "the AR cell's at the same TP, concurrency and workload",
    "tpot": "request rate: ranked by TPOT mean (both servers deliver the offered rate, so throughput does not rank "
            "them); speedup = the AR cell's TPOT mean / this TPOT mean",
}


def best_tables(best: Sequence[Best]) -> list[BestTable]:
    """The fastest-per-point rows grouped by section and lead, each group one table that says what it ranks by."""
    groups: dict[tuple[str, str], list[Best]] = {}
    for b in best:
        groups.setdefault((b.section, b.lead), []).append(b)
    out = []
    for (section, lead), rows in groups.items():
        ar_won = any(b.is_baseline for b in rows)
        value = "out tok/s" if lead == "throughput" else "TPOT mean ms"
        header = ("TP", "workload", "c", "fastest", value, "AR tok/s" if lead == "throughput" else "out tok/s",
                  "speedup vs AR [95% CI]", "decision", "CV") + (("best speculative",) if ar_won else ())
        body = []
        for b in rows:
            v = fmt(b.output_throughput) if lead == "throughput" else fmt(b.tpot_mean, 2)
            other = fmt(b.ar_throughput) if lead == "throughput" else fmt(b.output_throughput)
            dec = "–" if b.is_baseline else (b.decision or "–")
            body.append((fmt(b.tp), b.workload_full or b.workload or "–", fmt(b.concurrency), b.series, v, other,
                         b.speedup_text, dec, f"{100 * b.cv:.1f}%" if b.cv is not None else "–")
                        + ((b.best_spec_text + (f" ({b.best_spec_decision})" if b.best_spec_decision else "")
                            if b.best_spec_text else "–",) if ar_won else ()))
        kind = "closed loop" if lead == "throughput" else "request rate"
        title = f"Fastest configuration per workload ({kind})" + (f": {section}" if section else "")
        out.append(BestTable(title, LEAD_NOTES[lead], header, tuple(body),
                             frozenset(i for i, h in enumerate(header) if h in ("workload", "fastest",
                                                                                  "best speculative"))))
    return out


DECISION_NOTE = ("vs AR (per metric, decide/verdict.py): tie when the whole 95% interval of the speedup lies within "
                 "3% of 1 either way, faster / slower when it lies above / below 1, undecided when it holds 1 and reaches past "
                 "the margin or there is none (a cell measured once has no interval: repeat it, `repeats`); the lead "
                 "metric's verdict first, then each latency verdict that differs. vs best: against the best "
                 "configuration of the same TP, workload and concurrency (see the decisions). CV: the coefficient of "
                 "variation of the per-repeat output throughputs.")


def fmt_ci(value: float | None, ci: tuple[float, float] | None, digits: int = 2, unit: str = "") -> str:
    """'1.23× [1.10, 1.35]' (the 95% interval in brackets when there is one), '–' for None."""
    if value is None:
        return "–"
    text = f"{value:,.{digits}f}{unit}"
    return f"{text} [{ci[0]:,.{digits}f}, {ci[1]:,.{digits}f}]" if ci is not None else text


# ---------------------------------------------------------------- decisions (report/decisions.py)


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


# ---------------------------------------------------------------- integrity (report/integrity.py)


INTEGRITY_NOTE = ("What each measured cell rests on: the concurrency asked and what ran (the server's running cap), "
                  "the most requests seen generating at once, the waves (measured requests / effective concurrency: "
                  "under 3 at c > 1 the first synchronized prefills weigh as much as decoding), over-saturation "
                  "(requests queued at the server; in a request-rate cell also a TTFT that grows through the run), "
                  "the prefix-cache reset before the cell, the load generator's stalls, early stops and failed "
                  "requests, and simulated acceptance. – : the store predates the key")

INTEGRITY_HEADER = ("config", "TP", "c (ran)", "seen at once", "waves", "over-saturated", "cache reset", "client stall",
                    "early stops", "failed", "acceptance", "warnings")


def integrity_rows(rows: Sequence[CellRow]) -> tuple[tuple[str, ...], ...]:
    """One row per measured cell (done or partial) with its integrity."""
    out = []
    for r in rows:
        i = r.integrity
        if i is None:
            continue
        sat = "–" if i.oversaturated is None else ("yes" if i.oversaturated else "no")
        reset = "–" if i.cache_reset is None else ("yes" if i.cache_reset else
                                                    "no route" if no_reset_route(i.cache_reset_how) else "failed")
        acc = f"simulated {i.simulated:g}" if i.simulated is not None else ("–" if r.speedup_source == "baseline"
                                                                             else "measured")
        out.append((r.series, fmt(r.tp), i.concurrency_text, fmt(i.observed), fmt(i.waves, 1), sat, reset,
                    _percent(i.stalled_share, 0) if i.stalled_share is not None else "–", fmt(i.early_stops),
                    fmt(i.failed), acc, "; ".join(i.warnings) or "–"))
    return tuple(out)


# ---------------------------------------------------------------- the A/A check (matrix `aa_check`)


AA_NOTE = ("The AR server measured twice as two configurations (`aa_check`: identical launches, the twin labelled "
           "-aa): the same configuration against itself must come out a tie or undecided. Decided faster or slower, "
           "the intervals miss what differs between two servers of one configuration (boot-to-boot drift, the "
           "host's load, the order they ran in): repeat across boots (`repeat_across_boots = true`) before trusting "
           "a decision of that size")
AA_HEADER = ("TP", "workload", "c", "twin", "vs AR", "verdict", "check")


def aa_rows(qs: Sequence[Question]) -> tuple[tuple[str, ...], ...]:
    """One row per A/A twin: its lead ratio to the AR cell with the interval, and whether the check passed."""
    out = []
    for q in qs:
        for r in q.rows:
            if not r.aa_twin:
                continue
            lead = "tpot" if r.speedup_lead == "tpot" else "throughput"
            v = r.vs_ar.get(lead)
            check = "–" if v is None else ("pass" if v in ("tie", "undecided") else
                                         f"FAIL: AR decided {v} than itself")
            out.append((fmt(q.tp), q.workload or "–", fmt(q.concurrency), r.series,
                        fmt_ratio(r.lead_speedup, r.lead_speedup_ci), v or "–", check))
    return tuple(out)
