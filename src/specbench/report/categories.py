"""Per dataset category (`requests.category`): each speculative cell's mean per-request output rate (output tokens /
E2E s) and accept length (sum output tokens / sum spec_verify_ct, else the mean of `accept_len`) on the requests of
one category, against the AR cell at the same baseline key on the same category; with repeats, the speedup interval
is the log-ratio interval (load/spread.py ratio) of the per-repeat mean rates. Pure: loaded stores -> rows."""

from __future__ import annotations

from collections.abc import Sequence

from specbench.load import speedup as speedups
from specbench.load import spread as sp
from specbench.load.metrics import accept_length_mean
from specbench.report.cellrows import ar_cells
from specbench.report.compare import Entry, entries
from specbench.report.rows import DONE, CategoryRow
from specbench.report.sections import ar_key
from specbench.stored.records import LoadedStore, RequestRecord, label_key, natural_key


def _rate(reqs: Sequence[RequestRecord]) -> float | None:
    rates = [q.output_tokens / q.e2e_s for q in reqs if q.ok and q.output_tokens and q.e2e_s]
    return sum(rates) / len(rates) if rates else None


def _accept(reqs: Sequence[RequestRecord]) -> float | None:
    return accept_length_mean([q for q in reqs if q.ok])


def _by(reqs: Sequence[RequestRecord], category: str) -> list[RequestRecord]:
    return [q for q in reqs if (q.category or "–") == category]


def _per_repeat(reqs: Sequence[RequestRecord]) -> list[float]:
    reps = sorted({q.repeat for q in reqs if q.repeat is not None})
    return [r for k in reps if (r := _rate([q for q in reqs if q.repeat == k])) is not None]


def category_rows(stores: Sequence[LoadedStore], ents: Sequence[Entry] | None = None) -> tuple[CategoryRow, ...]:
    """One row per done speculative cell and category of its requests (none when no request has a category)."""
    ars = ar_cells(stores)
    out = []
    for e in (entries(stores) if ents is None else ents):
        c = e.cell
        if c.is_ar or c.status != DONE or not any(q.category for q in c.requests):
            continue
        ar = ars.get(ar_key(e.store, c))
        for cat in sorted({q.category or "–" for q in c.requests}):
            mine = _by(c.requests, cat)
            base = _by(ar.requests, cat) if ar is not None else []
            rate, ar_rate = _rate(mine), _rate(base)
            speedup = speedups.ratio(rate, ar_rate)
            ci = None
            a, b = _per_repeat(mine), _per_repeat(base)
            ea, eb = sp.relative(rate, a), sp.relative(ar_rate, b)
            if len(a) >= 2 and len(b) >= 2 and ea is not None and eb is not None:
                ci = sp.ratio(ea, eb).ci95
            out.append(CategoryRow(store=e.store.label, series=e.series, tp=c.tp, concurrency=c.concurrency,
                                   category=cat, requests=sum(1 for q in mine if q.ok), accept_length=_accept(mine),
                                   rate=rate, ar_rate=ar_rate, speedup=speedup, speedup_ci=ci,
                                   simulated=c.simulated_accept_len))
    out.sort(key=lambda r: (r.tp or 0, label_key(r.series), natural_key(r.category), r.concurrency or 0))
    return tuple(out)
