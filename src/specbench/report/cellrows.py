"""A stored cell as one report row (`CellRow`): its numbers, its intervals, its speedups over the AR cell of its
baseline key, its comparison with that AR cell on every metric (decide/: throughput, TPOT mean, E2E p50, with the
tie margin and the looks of repeat-until-decided), its integrity (report/integrity.py) and its GPU telemetry.

The one place a `CellRecord` becomes display values: the phase tables, the decisions (report/decisions.py), the
figures, the export and the run summary all read these rows, so a number can differ nowhere.

- speedup: the pooled estimate of load/speedup.py (`derived`: as the runner stored it, or computed by the same
  function for a store written before the derived keys existed); its interval is centred on it on the log scale,
  and it is the interval of `vs_ar` (decide/verdict.py::compare at the cell's looks: 95 % for a fixed repeat count);
- AR baseline: the done AR cell at sections.py::ar_key (same store, model and baseline key).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from specbench.decide import METRICS, Comparison, Metric, compare, looks_of
from specbench.load import metric_table
from specbench.load import speedup as speedups
from specbench.load import spread as sp
from specbench.report.compare import Entry, workload_label
from specbench.report.integrity import integrity
from specbench.report.rows import DONE, FAILED_STATES, CellRow
from specbench.report.sections import ar_key
from specbench.stored.records import CellRecord, LoadedStore

ArCells = Mapping[tuple[Any, ...], CellRecord]


def ar_cells(stores: Sequence[LoadedStore]) -> dict[tuple[Any, ...], CellRecord]:
    """sections.py::ar_key (store label, model, *baseline_key) -> the done AR cell there."""
    return {ar_key(s, c): c for s in stores for c in s.cells if c.is_ar and c.status == DONE}


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


def estimates(cell: CellRecord) -> dict[Metric, sp.Estimate | None]:
    """Each decision metric of the cell as an estimate over its repeats (load/speedup.py::estimate)."""
    return {m: speedups.estimate(cell.metrics, key) for m, (key, _, _) in METRICS.items()}


def vs_ar(cell: CellRecord, ar: CellRecord | None) -> dict[Metric, Comparison]:
    """The cell against its AR cell on every metric it and the AR cell both have (none for AR itself)."""
    if ar is None or cell.is_ar or cell.status != DONE:
        return {}
    looks = max(looks_of(cell.client), looks_of(ar.client))
    mine, base = estimates(cell), estimates(ar)
    out: dict[Metric, Comparison] = {}
    for m, (_, lower, _) in METRICS.items():
        a, b = mine[m], base[m]
        if a is not None and b is not None:
            out[m] = compare(a, b, lower_is_better=lower, looks=looks)
    return out


def _pair(v: Any) -> tuple[float, float] | None:
    if isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(x, (int, float)) for x in v):
        return float(v[0]), float(v[1])
    return None


def _f(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def gpu_fields(tel: Any) -> dict[str, float | None]:
    """CellRow's GPU fields from `metrics_json.gpu_telemetry` (matrix/telemetry.py summary)."""
    gpus = [g for g in (tel.get("gpus") or []) if isinstance(g, Mapping)] if isinstance(tel, Mapping) else []

    def vals(key: str) -> list[float]:
        return [float(g[key]) for g in gpus if isinstance(g.get(key), (int, float))]

    mem, util, power = vals("memory_used_mib_max"), vals("utilization_pct_mean"), vals("power_w_mean")
    return {"gpu_memory_max": max(mem) if mem else None, "gpu_util_mean": sum(util) / len(util) if util else None,
            "gpu_power_mean": sum(power) if power else None}


def _speedup(cell: CellRecord, thr: Comparison | None, ar: CellRecord | None) -> tuple[float | None, str]:
    """The throughput speedup and where it came from: 'baseline' (AR itself), 'store' (the runner stored it and it
    is the ratio of the two cells' pooled throughputs), 'recomputed' (the stored value disagrees with those
    throughputs: a store written by an older estimator, or edited; the ratio is shown, the disagreement named in the
    cell's note), 'computed' (nothing stored: the same ratio), 'no-baseline', or '' (not done). The value is always
    the pooled estimate its interval is centred on, where both throughputs are there."""
    if cell.is_ar:
        return None, "baseline"
    if cell.status != DONE or cell.metric("output_throughput") is None:
        return None, ""
    stored = cell.metric("speedup")
    if thr is None:
        return (stored, "store") if stored is not None else (None, "no-baseline" if ar is None else "")
    if stored is None:
        return thr.ratio, "computed"
    agrees = abs(stored - thr.ratio) <= STORED_ROUNDING * max(1.0, abs(thr.ratio))
    return thr.ratio, "store" if agrees else "recomputed"


STORED_ROUNDING = 1e-3  # the runner stores 4 decimals (load/speedup.py DIGITS): a wider gap is another estimator


def _ci(comparison: Comparison | None, stored: Any) -> tuple[float, float] | None:
    """The interval of the comparison (the cell's looks) when there is one, else the stored 95% one."""
    if comparison is not None and comparison.ci is not None:
        return comparison.ci
    return _pair(stored)


def _notes(c: CellRecord) -> list[str]:
    notes = []
    if c.clamp.get("clamped"):
        notes.append(f"prompt clamped {c.clamp.get('requested_prompt_tokens')}→{c.clamp.get('prompt_tokens')}")
    if c.status in FAILED_STATES and c.reason:
        notes.append(next((ln.strip() for ln in str(c.reason).splitlines() if ln.strip()), ""))
    if c.simulated_accept_len is not None:
        notes.append(f"simulated acceptance ({c.simulated_accept_len:g} set on the engine)")
    return [n for n in notes if n]


# the integrity warning of a cell that measured a stand-in's artifact: beside its name wherever a decision names it
# (decide/question.py::Arm.warnings); the engine's reason is in the row's notes
STAND_IN_WARNING = "a stand-in's artifact, not a real model's speed (see the cell's notes)"


def cell_row(e: Entry, ars: ArCells, multi: bool, section: str = "", log_file: str | None = None,
             stand_in: str | None = None) -> CellRow:
    """One phase-table row of an entry (report/compare.py); `stand_in`: what a stand-in's artifact measured in the
    cell (predict/observe.py::stand_in_cells), said first among its warnings."""
    c = e.cell
    ar = ars.get(ar_key(e.store, c))
    d = derived_of(c, ar) if c.status == DONE else c.metrics
    cmp = vs_ar(c, ar)
    speedup, source = _speedup(c, cmp.get("throughput"), ar)
    health = integrity(c) if c.metrics else None
    if health is not None and stand_in:  # said in the integrity table and wherever a decision names the cell
        health = replace(health, warnings=(STAND_IN_WARNING, *health.warnings))
    artifact = [f"a stand-in's artifact, not a real model's speed: {stand_in}"] if stand_in else []
    notes = _notes(c) + artifact + list(health.warnings if health is not None else ())
    if source == "recomputed":
        notes.append(f"stored speedup {c.metric('speedup'):.4f} is not the ratio of the pooled throughputs "
                     f"({speedup:.4f}, shown): written by an older estimator or edited")
    sd = c.spread
    gpu = gpu_fields(c.metrics.get("gpu_telemetry"))
    return CellRow(
        store=e.store.label, cell_id=c.cell_id, series=e.series, config=e.config, label=c.label, phase=c.phase,
        tp=c.tp, concurrency=c.concurrency, workload=e.workload, status=c.status,
        output_throughput=c.metric("output_throughput"),
        ttft_p50=c.metric("ttft_ms_p50"), ttft_p99=c.metric("ttft_ms_p99"),
        tpot_p50=c.metric("tpot_ms_p50"), tpot_p99=c.metric("tpot_ms_p99"), tpot_mean=c.metric("tpot_ms_mean"),
        itl_p50=c.metric("itl_ms_p50"), itl_p99=c.metric("itl_ms_p99"),
        accept_length=c.metric("accept_length_mean"),
        speedup=speedup, speedup_source=source,
        ar_throughput=ar.metric("output_throughput") if ar is not None else None, note="; ".join(notes),
        log_file=log_file, workload_full=workload_label(c), section=section,
        repeats=sd.get("repeats") if isinstance(sd.get("repeats"), int) else None,
        throughput_ci=_pair(d.get("output_throughput_ci95")), throughput_cv=_f(d.get("output_throughput_cv")),
        simulated=c.simulated_accept_len, draft_tokens=c.draft_tokens,
        ttft_mean=c.metric("ttft_ms_mean"), e2e_p50=c.metric("e2e_ms_p50"), e2e_p99=c.metric("e2e_ms_p99"),
        goodput=c.metric("goodput"), draft_rate=c.metric("draft_acceptance_rate"),
        acceptance_per_pos=tuple(float(x) for x in c.metrics.get("acceptance_per_pos") or ()
                                 if isinstance(x, (int, float))),
        speedup_ci=None if c.is_ar else _ci(cmp.get("throughput"), d.get("speedup_ci95")),
        speedup_decision=None if c.is_ar else d.get("speedup_decision"),
        tpot_speedup=None if c.is_ar else _f(d.get("tpot_speedup")),
        tpot_speedup_ci=None if c.is_ar else _ci(cmp.get("tpot"), d.get("tpot_speedup_ci95")),
        e2e_speedup=None if c.is_ar else _f(d.get("e2e_speedup")),
        e2e_speedup_ci=None if c.is_ar else _ci(cmp.get("e2e"), d.get("e2e_speedup_ci95")),
        speedup_lead=str(d.get("speedup_lead") or speedups.lead_of(c.client)),
        decision=None if c.is_ar else d.get("decision"),
        integrity=health, warnings=health.warnings if health is not None else (),
        vs_ar={m: x.verdict for m, x in cmp.items()}, aa_twin=speedups.is_aa_twin(c.algorithm),
        gpu_memory_max=gpu["gpu_memory_max"], gpu_util_mean=gpu["gpu_util_mean"],
        gpu_power_mean=gpu["gpu_power_mean"],
        values={m.key: c.metric(m.key) for m in metric_table.columns()},
    )
