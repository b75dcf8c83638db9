"""The report's view of repeats, speculative detail and categories (pure: loaded stores -> row fields and rows).

- intervals and speedups: the derived keys the runner stored (load/speedup.py `derived`: the pooled throughput's
  log interval, the throughput and latency speedups with their log-ratio intervals and decisions, the lead); a store
  written before them gets the same function's values here (`derived_of`), so there is one definition;
- simulated acceptance: `server_json.simulated_accept_len` (the engine's own switch: the accept length is what the
  engine was told, not what the drafter achieved);
- per category (`requests.category`): mean per-request output rate (output tokens / E2E s) and accept length
  (sum output tokens / sum spec_verify_ct, else the mean of `accept_len`) of a speculative cell's requests in that
  category, against the AR cell at the same baseline key on the same category; with repeats, the speedup interval
  is the log-ratio interval (load/spread.py ratio) of the per-repeat mean rates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from specbench.load import speedup as speedups
from specbench.load import spread as sp
from specbench.load.metrics import accept_length_mean
from specbench.report.compare import Entry, entries
from specbench.report.records import CellRecord, LoadedStore, RequestRecord, label_key, natural_key
from specbench.report.rows import DONE, CategoryRow
from specbench.report.sections import ar_key

ArCells = Mapping[tuple[Any, ...], CellRecord]


def ar_cells(stores: Sequence[LoadedStore]) -> dict[tuple[Any, ...], CellRecord]:
    """sections.py::ar_key (store label, model, *baseline_key) -> the done AR cell there."""
    return {ar_key(s, c): c for s in stores for c in s.cells if c.is_ar and c.status == DONE}


def metric_spread(cell: CellRecord, key: str) -> sp.Spread | None:
    return sp.from_json((cell.spread.get("metrics") or {}).get(key))


def derived_of(cell: CellRecord, ar: CellRecord | None) -> Mapping[str, Any]:
    """The cell's metrics with the derived keys of load/speedup.py: as stored (the runner's fill_speedups), else
    computed by the same function (a store written before they existed)."""
    if "speedup_lead" in cell.metrics:
        return cell.metrics
    return {**cell.metrics, **speedups.derived(cell.metrics, ar.metrics if ar is not None else None, cell.client,
                                               cell.is_ar)}


def speedup_interval(cell: CellRecord, ar: CellRecord | None) -> tuple[float, tuple[float, float]] | None:
    """(throughput speedup, its log-ratio 95% interval) when both cells have repeats; else None."""
    if ar is None or cell.is_ar:
        return None
    d = derived_of(cell, ar)
    ci = _pair(d.get("speedup_ci95"))
    return (float(d["speedup"]), ci) if ci is not None and d.get("speedup") is not None else None


def _pair(v: Any) -> tuple[float, float] | None:
    if isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(x, (int, float)) for x in v):
        return float(v[0]), float(v[1])
    return None


def _f(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def row_extras(store: LoadedStore, cell: CellRecord, ars: ArCells) -> dict[str, Any]:
    """The CellRow fields of rows.py that come from repeats, the derived speedups, simulation and the speculative
    metrics."""
    sd = cell.spread
    d = derived_of(cell, ars.get(ar_key(store, cell)))
    out: dict[str, Any] = {
        "repeats": sd.get("repeats") if isinstance(sd.get("repeats"), int) else None,
        "throughput_ci": _pair(d.get("output_throughput_ci95")),
        "throughput_cv": _f(d.get("output_throughput_cv")),
        "simulated": cell.simulated_accept_len, "draft_tokens": cell.draft_tokens,
        "ttft_mean": cell.metric("ttft_ms_mean"), "e2e_p50": cell.metric("e2e_ms_p50"),
        "e2e_p99": cell.metric("e2e_ms_p99"), "goodput": cell.metric("goodput"),
        "draft_rate": cell.metric("draft_acceptance_rate"),
        "acceptance_per_pos": tuple(float(x) for x in cell.metrics.get("acceptance_per_pos") or ()
                                    if isinstance(x, (int, float))),
        "speedup_ci": None if cell.is_ar else _pair(d.get("speedup_ci95")),
        "speedup_decision": None if cell.is_ar else d.get("speedup_decision"),
        "tpot_speedup": None if cell.is_ar else _f(d.get("tpot_speedup")),
        "tpot_speedup_ci": None if cell.is_ar else _pair(d.get("tpot_speedup_ci95")),
        "e2e_speedup": None if cell.is_ar else _f(d.get("e2e_speedup")),
        "e2e_speedup_ci": None if cell.is_ar else _pair(d.get("e2e_speedup_ci95")),
        "speedup_lead": str(d.get("speedup_lead") or speedups.lead_of(cell.client)),
        "decision": None if cell.is_ar else d.get("decision"),
        **gpu_fields(cell.metrics.get("gpu_telemetry")),
    }
    return out


def gpu_fields(tel: Any) -> dict[str, float | None]:
    """CellRow's GPU fields from `metrics_json.gpu_telemetry` (matrix/telemetry.py summary)."""
    gpus = [g for g in (tel.get("gpus") or []) if isinstance(g, Mapping)] if isinstance(tel, Mapping) else []

    def vals(key: str) -> list[float]:
        return [float(g[key]) for g in gpus if isinstance(g.get(key), (int, float))]

    mem, util, power = vals("memory_used_mib_max"), vals("utilization_pct_mean"), vals("power_w_mean")
    return {"gpu_memory_max": max(mem) if mem else None, "gpu_util_mean": sum(util) / len(util) if util else None,
            "gpu_power_mean": sum(power) if power else None}


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


def fmt_ci(value: float | None, ci: tuple[float, float] | None, digits: int = 2, unit: str = "") -> str:
    """'1.23× [1.10, 1.35]' (the 95% interval in brackets when there is one), '–' for None."""
    if value is None:
        return "–"
    text = f"{value:,.{digits}f}{unit}"
    return f"{text} [{ci[0]:,.{digits}f}, {ci[1]:,.{digits}f}]" if ci is not None else text
