"""What a measurement rests on, as table rows of display strings: the integrity of each measured cell (the
concurrency that ran, waves, over-saturation, cache reset, stalls, failures, simulated acceptance: report/integrity.py)
and the A/A check, the AR server measured against its identical twin (matrix `aa_check`).
"""

from __future__ import annotations

from collections.abc import Sequence

from specbench.matrix.cellrun import no_reset_route
from specbench.report.formatting import fmt, fmt_ratio, percent
from specbench.report.rows import CellRow, Question

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
                    percent(i.stalled_share, 0) if i.stalled_share is not None else "–", fmt(i.early_stops),
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
