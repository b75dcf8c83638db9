"""The timeline figure (issue 34 item 7): what each cell of one question did over time, re-derived from its request
rows' absolute times (`requests.sent_at`, `first_token_at`, `ended_at`; stores written before them have none and
get no figure). One panel per cell: the requests in flight (sent, not ended: what the client held open) and the
requests generating (first token seen, not ended: what the server was decoding), over the cell's measured time with
its repeats laid end to end (a dashed line where the next begins: a repeat added by a later round ran on another
boot, perhaps hours later). Waves show as a sawtooth, synchronized prefills as a step up of `in flight` before `generating` follows,
a queue as `in flight` above `generating`, repeats as separate bursts.

The question drawn: the highest concurrency of the first section's closed-loop questions whose cells all have times
(the one where waves and queues matter most), at most MAX_PANELS of its cells in rank order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from specbench.report.plot_base import PALETTE, Plot, new_figure, save
from specbench.report.rows import Question
from specbench.stored.records import RequestRecord

MAX_PANELS = 6


def counts_over_time(spans: Sequence[tuple[float, float]]) -> tuple[list[float], list[int]]:
    """The step function of how many (start, end) spans are open: its change points and the count after each (an
    end and a start at the same instant: the end first, as load/integrity.py::most_at_once counts)."""
    edges = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
    xs: list[float] = []
    ys: list[int] = []
    now = 0
    for t, d in edges:
        now += d
        if xs and xs[-1] == t:
            ys[-1] = now
        else:
            xs.append(t)
            ys.append(now)
    return xs, ys


def end_to_end(reqs: Sequence[RequestRecord]) -> tuple[dict[int | None, float], list[float]]:
    """Each repeat's time shift so that the repeats lie end to end (a repeat added by a later round may have run
    hours after the others, on another boot): repeat k starts where repeat k-1 ended, plus a tenth of its length as
    a gap; and the times where each later repeat starts (the separators drawn)."""
    by: dict[int | None, list[RequestRecord]] = {}
    for q in reqs:
        by.setdefault(q.repeat, []).append(q)
    shift: dict[int | None, float] = {}
    cuts: list[float] = []
    at = 0.0
    for k in sorted(by, key=lambda k: -1 if k is None else k):
        start = min(q.sent_at for q in by[k] if q.sent_at is not None)
        end = max(q.ended_at for q in by[k] if q.ended_at is not None)
        if shift:
            at += 0.1 * (end - start)
            cuts.append(at)
        shift[k] = start - at
        at += end - start
    return shift, cuts


def _timed(reqs: Sequence[RequestRecord]) -> list[RequestRecord]:
    return [q for q in reqs if q.sent_at is not None and q.ended_at is not None]


def _question(questions: Sequence[Question], requests: Mapping[tuple[str, str], Sequence[RequestRecord]]
              ) -> Question | None:
    first = questions[0].section if questions else ""
    timed = [q for q in questions if q.section == first and q.lead == "throughput"
             and all(_timed(requests.get((r.store, r.cell_id), ())) for r in q.rows)]
    return max(timed, key=lambda q: (q.concurrency or 0, -questions.index(q)), default=None)


def timeline_plot(questions: Sequence[Question], requests: Mapping[tuple[str, str], Sequence[RequestRecord]],
                  path: Path) -> Plot | None:
    q = _question(questions, requests)
    if q is None:
        return None
    cells = q.rows[:MAX_PANELS]
    fig = new_figure(0.6 + 3.6 * min(3, len(cells)), 0.9 + 2.5 * ((len(cells) + 2) // 3))
    ncols = min(3, len(cells))
    grid = fig.subplots((len(cells) + ncols - 1) // ncols, ncols, squeeze=False, sharey=True)
    fig.suptitle(f"Requests over time: TP{q.tp}, c={q.concurrency}" + (f"\n({q.workload})" if q.workload else ""),
                 fontsize=11, fontweight="bold")
    panels = []
    for k, r in enumerate(cells):
        ax = grid[k // ncols][k % ncols]
        reqs = _timed(requests.get((r.store, r.cell_id), ()))
        shift, cuts = end_to_end(reqs)
        flight = counts_over_time([(s - shift[x.repeat], e - shift[x.repeat])
                                   for x in reqs if (s := x.sent_at) is not None and (e := x.ended_at) is not None])
        gen = counts_over_time([(f - shift[x.repeat], e - shift[x.repeat]) for x in reqs
                                if x.ok and (f := x.first_token_at) is not None and (e := x.ended_at) is not None])
        for c in cuts:  # where one repeat ends and the next begins (another boot, maybe hours later)
            ax.axvline(c, color="#bbbbbb", linewidth=0.8, linestyle="--")
        ax.step(*flight, where="post", color=PALETTE[0], alpha=0.55, linewidth=1.2, label="in flight")
        ax.step(*gen, where="post", color=PALETTE[3], linewidth=1.2, label="generating")
        if q.concurrency:
            ax.axhline(q.concurrency, color="#888888", linewidth=0.8, linestyle=":")
        ax.set_title(f"#{r.rank} {r.series}", fontsize=9)
        ax.set_xlabel("s of measured time (repeats end to end)", fontsize=8)
        if k % ncols == 0:
            ax.set_ylabel("requests", fontsize=8)
        ax.grid(True, alpha=0.3)
        ax.set_ylim(bottom=0)
        panels.append((r.series, ax))
    for k in range(len(cells), len(grid) * ncols):
        grid[k // ncols][k % ncols].set_visible(False)
    grid[0][0].legend(fontsize=7, frameon=False, loc="upper right")
    caption = ("Per cell of the question drawn (the highest concurrency of the first section), re-derived from the "
               "request rows' absolute times: the requests in flight (sent, not ended) and generating (first token "
               "seen, not ended), the repeats end to end (dashed: where the next repeat begins); dotted: the "
               "concurrency asked. A sawtooth is waves of synchronized prefills; in flight above generating is a "
               "queue.")
    return save(fig, path, "timeline.png", "Requests over time", caption, panels)
