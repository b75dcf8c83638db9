"""`specbench compare` as text: the rows of its pairs table and of its unmatched cells (the terminal's rich tables
and the markdown read the same strings), and the markdown file `--out` writes (pure functions)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specbench.decide import Metric
from specbench.report.formatting import fmt, fmt_ratio
from specbench.report.runs_compare import Delta, PairResult, RunsComparison, Speedup, StoreInfo

# The first line of every markdown file `compare --out` writes: the write guard (commands/compare.py) overwrites
# only a file that starts with it.
MARKER = "<!-- written by specbench compare: this file may be overwritten by it -->"

PAIR_HEADER = ("config", "TP", "c", "workload", "lead: A -> B", "B vs A [interval]", "verdict", "TPOT mean B vs A",
               "E2E p50 B vs A", "speedup vs AR: A -> B", "note")
UNMATCHED_HEADER = ("store", "config", "cells", "why")
UNITS = {"throughput": "tok/s", "tpot": "ms", "e2e": "ms"}


def _value(d: Delta | None, metric: Metric) -> str:
    """'186.0 -> 190.2 tok/s' (a latency with two decimals, in ms)."""
    if d is None:
        return "–"
    digits = 1 if metric == "throughput" else 2
    a = fmt(d.a.value, digits) if d.a else "–"
    b = fmt(d.b.value, digits) if d.b else "–"
    return f"{a} -> {b} {UNITS[metric]}"


def _ratio(d: Delta | None, interval: bool = True) -> str:
    if d is None or d.comparison is None:
        return "–"
    return fmt_ratio(d.comparison.ratio, d.comparison.ci if interval else None)


def _verdicted(d: Delta | None, interval: bool) -> str:
    if d is None or d.comparison is None:
        return "–"
    return f"{_ratio(d, interval)} {d.outcome}"


def _speedups(a: Speedup | None, b: Speedup | None, interval: bool) -> str:
    if a is None and b is None:
        return "–"

    def one(s: Speedup | None) -> str:
        return fmt_ratio(s.value, s.ci95 if interval else None) if s else "–"

    return f"{one(a)} -> {one(b)}"


def common_load(rc: RunsComparison) -> str | None:
    """The client axes every matched pair shares ('in=512 out=128 data=random'), said once; None when they vary."""
    loads = {r.pair.a.load_text for r in rc.results}
    return next(iter(loads)) if len(loads) == 1 else None


def pair_table(rc: RunsComparison, compact: bool = False) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """The matched pairs as (header, rows) of strings (PAIR_HEADER). `compact` (the terminal): the TPOT, E2E and
    speedup columns without their intervals (the B vs A column keeps its own); the workload column only where the
    pairs' client axes vary (else `headlines` says it once)."""
    shared = common_load(rc) is not None
    header = tuple(h for h in PAIR_HEADER if not (shared and h == "workload"))
    rows = []
    for r in rc.results:
        row = pair_row(r, interval=not compact)
        rows.append(row[:3] + row[4:] if shared else row)
    return header, rows


def pair_row(r: PairResult, interval: bool = True) -> tuple[str, ...]:
    """One matched pair as the table's strings (PAIR_HEADER)."""
    a = r.pair.a
    c = a.cell
    lead = r.deltas.get(r.lead)
    compared = r.outcome in ("improvement", "regression", "tie", "undecided")
    verdict = r.outcome + (" (TPOT)" if r.lead == "tpot" and compared else "")
    return (a.label, fmt(c.tp), fmt(c.concurrency), a.load_text, _value(lead, r.lead), _ratio(lead), verdict,
            _verdicted(r.deltas.get("tpot"), interval), _verdicted(r.deltas.get("e2e"), interval),
            _speedups(r.speedup_a, r.speedup_b, interval), r.note)


@dataclass(frozen=True)
class UnmatchedGroup:
    """Cells of one store left unmatched for one reason."""

    store: str
    label: str
    cells: tuple[str, ...]  # 'TP 1 c=16' per cell
    why: str


def unmatched_groups(rc: RunsComparison) -> tuple[UnmatchedGroup, ...]:
    """The unmatched cells grouped by store and reason, in the matching's order."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for u in rc.matching.unmatched:
        c = u.side.cell
        groups.setdefault((u.store, u.side.label, u.text), []).append(f"TP {fmt(c.tp)} c={fmt(c.concurrency)}")
    return tuple(UnmatchedGroup(store, label, tuple(cells), why) for (store, label, why), cells in groups.items())


def unmatched_row(g: UnmatchedGroup) -> tuple[str, ...]:
    return (g.store, g.label, ", ".join(g.cells), g.why)


def _store_line(name: str, i: StoreInfo) -> str:
    engine = " ".join(x for x in (i.engine, i.engine_version) if x)
    return f"{name}: {i.path} ({engine + ', ' if engine else ''}{i.cells} cells)"


def headlines(rc: RunsComparison) -> list[str]:
    """The lines above the tables: the stores, the subject, what cannot match, labels run with other flags, the
    summary and the coverage."""
    m = rc.matching
    out = [_store_line("A", rc.a), _store_line("B", rc.b), m.subject_text]
    out += [f"A and B ran another {c.knob.text}: {c.a} -> {c.b} (those cells cannot match)" for c in m.apart]
    out += [lc.text + " (a different configuration: its cells are not compared)" for lc in m.relabelled]
    load = common_load(rc)
    if load:
        out.append(f"workload of every pair: {load}")
    out += [rc.summary, rc.coverage]
    return out


def explanation(rc: RunsComparison) -> str:
    pct = f"{100 * rc.margin:g}%"
    return (f"B vs A is a speed ratio (above 1: B is better; throughput B / A, a latency A / B) with its interval "
            f"(95%, or 1 - 0.05 / looks for stores that repeat until decided). improvement / regression: the whole "
            f"interval above / below 1; tie: the whole interval within {pct} of 1; undecided otherwise. The verdict "
            f"is on the lead metric: throughput for a closed loop, TPOT mean for a request-rate workload (TPOT). "
            f"Exit status 1 when any pair is a regression or failed in B.")


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    def cell(s: str) -> str:
        return s.replace("|", "\\|").replace("\n", " ") or " "

    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(cell(x) for x in row) + " |" for row in rows]
    return out


def render_markdown(rc: RunsComparison) -> str:
    """The markdown `compare --out FILE.md` writes (its first line is MARKER)."""
    lines = [MARKER, "", "# specbench compare: B against A", ""]
    lines += [f"- **{line}**" if line == rc.summary else f"- {line}" for line in headlines(rc)]
    lines += ["", "## Matched pairs", ""]
    if rc.results:
        lines += _md_table(*pair_table(rc))
    else:
        lines.append("No cell of B matches a cell of A.")
    lines += ["", explanation(rc)]
    groups = unmatched_groups(rc)
    if groups:
        lines += ["", "## Unmatched cells", ""]
        lines += _md_table(UNMATCHED_HEADER, [unmatched_row(g) for g in groups])
    return "\n".join(lines) + "\n"
