"""A cell's metrics_json from its stored repeats alone (pure functions): the one computation behind every stored
number, whether the repeats ran back to back on one boot, on a boot each (`repeat_across_boots`), or some of them in
later repeat-until-decided rounds (matrix/rounds.py).

Each repeat is read back from its rows (matrix/store_rows.py): every request's `RequestResult` with its send time
relative to the repeat's start (`sent_at` - `started_at`), and the repeat's measured time, stalls, counter deltas, the
running cap of its boot and its prefix-cache reset. The runner computes the metrics from exactly these values (the
rows it writes, not what it held before writing them), so recomputing them from the store gives the stored numbers.

One repeat: `cell_metrics` (load/metrics.py::aggregate, the client's stalls, the draft acceptance, the keys of
load/integrity.py). Several: the metrics of all repeats' requests pooled (throughputs over the summed measured time,
percentiles over every request, counter deltas summed), plus `spread` (load/spread.py) from each repeat's own metrics.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from specbench.load.integrity import CapCheckKeys, ConcurrencyKeys, CountKeys, ItlKeys, SaturationKeys
from specbench.load.results import LoadRun, RequestResult
from specbench.load.speedup import runs_autoregressive
from specbench.load.stall import Stalls
from specbench.matrix.expansion import Cell
from specbench.matrix.store_rows import CacheReset, CounterDelta, RepeatRecord, RequestRow, StoredRepeat, summed


def request_count(client: Mapping[str, Any]) -> int:
    """The measured requests of a cell: num_requests, raised to requests_per_concurrency x concurrency."""
    n = int(client["num_requests"])
    if client.get("requests_per_concurrency"):
        n = max(n, int(client["requests_per_concurrency"]) * int(client["concurrency"]))
    return n


# ---------------------------------------------------------------- rows <-> results


def request_rows(run: LoadRun, first_idx: int, repeat: int | None, categories: Sequence[str | None]) -> tuple[
        RequestRow, ...]:
    """A repeat's LoadRun as the rows the store keeps: `idx` from `first_idx` on, each with its absolute send,
    first-token and end times (started_at + start_s (+ ttft_s, + e2e_s)) and its error text masked as the store
    masks it."""
    from specbench.redact import redact_text

    out = []
    for r in run.results:
        sent = run.started_at + r.start_s
        out.append(RequestRow(
            idx=first_idx + r.idx, prompt_tokens=r.prompt_tokens, output_tokens=r.output_tokens, ttft_s=r.ttft_s,
            e2e_s=r.e2e_s, itl=list(r.itl_s), error=None if r.error is None else redact_text(r.error),
            accept_len=r.accept_len, spec_verify_ct=r.spec_verify_ct,
            category=categories[r.idx % len(categories)] if categories else None, repeat=repeat,
            server_output_tokens=r.server_output_tokens, counted_tokens=r.counted_tokens,
            count_source=r.count_source, early_stop=r.early_stop, sent_at=sent,
            first_token_at=None if r.ttft_s is None else sent + r.ttft_s,
            ended_at=None if r.e2e_s is None else sent + r.e2e_s, max_tokens=r.max_tokens,
            accept_hist=r.accept_hist))
    return tuple(out)


def result_of(row: RequestRow, started_at: float) -> RequestResult:
    """A stored row back as the client's RequestResult (send time relative to its repeat's start)."""
    sent = row.sent_at if row.sent_at is not None else started_at
    return RequestResult(
        idx=row.idx, start_s=sent - started_at, ttft_s=row.ttft_s, e2e_s=row.e2e_s, itl_s=tuple(row.itl or ()),
        prompt_tokens=row.prompt_tokens, output_tokens=int(row.output_tokens or 0), error=row.error,
        spec_verify_ct=row.spec_verify_ct, accept_len=row.accept_len, server_output_tokens=row.server_output_tokens,
        counted_tokens=row.counted_tokens, count_source=row.count_source, max_tokens=row.max_tokens,
        early_stop=bool(row.early_stop), accept_hist=row.accept_hist)


def load_run(rep: StoredRepeat) -> LoadRun:
    """A stored repeat as the LoadRun its metrics are computed from."""
    rec = rep.record
    return LoadRun(results=tuple(result_of(r, rec.started_at) for r in rep.rows), duration_s=rec.duration_s,
                   started_at=rec.started_at, warmup_errors=rec.warmup_errors, client_cpu_s=rec.client_cpu_s,
                   client_stalls=Stalls(rec.stall_longest_s, rec.stall_total_s))


# ---------------------------------------------------------------- metrics


def cell_metrics(run: LoadRun, cell: Cell, counters: CounterDelta | None, info: RepeatRecord) -> dict[str, Any]:
    """metrics_json (docs/structures.md) of one measured run by `specbench.load.metrics.aggregate`; speedup is filled
    after the matrix (runner.fill_speedups). An autoregressive cell carries no accept length. `info`: the running
    cap and prefix-cache reset of the boot (the last repeat's record)."""
    from specbench.load.metrics import Slo, aggregate, draft_acceptance, draft_positions
    from specbench.load.stall import client_stall_metrics

    c = cell.client
    rate = c.get("request_rate")
    rate_v = None if rate is None or isinstance(rate, str) else float(rate)
    ar = runs_autoregressive(cell.algorithm)
    spec = counters.spec if (not ar and counters is not None) else None
    slo = Slo(ttft_ms=c.get("slo_ttft_ms"), tpot_ms=c.get("slo_tpot_ms"))
    m = aggregate(run.results, run.duration_s, concurrency=int(c["concurrency"]), request_rate=rate_v,
                  slo=slo, spec=spec)
    m.update(client_stall_metrics(run.client_stalls, run.duration_s))
    if ar:
        m["accept_length_mean"] = None
        m["accept_lengths"] = []
    else:
        m.update(draft_acceptance(m, draft_positions(cell.server)))
    truth = truth_metrics(run.results, cell, info, m, counters)
    m.update(truth)
    if "accept_length_mean" in truth:  # read from SGLang's counters: its draft acceptance follows
        m.update(draft_acceptance(m, draft_positions(cell.server)))
    return m


class _TruthAlways(CountKeys, ConcurrencyKeys, SaturationKeys, CapCheckKeys, ItlKeys):
    waves: float | None  # measured requests / effective concurrency


class TruthKeys(_TruthAlways, total=False):
    """What `truth_metrics` adds to metrics_json, in this key order; the `accept_length_common*` pair is always set
    (last), the others only where they were measured."""

    prefix_cache_reset: CacheReset
    accept_length_mean: float | None  # SGLang's own, from its counters (when the client saw none)
    accept_length_source: str
    acceptance_per_pos: list[float]
    accept_length_common: float | None
    accept_length_common_source: str | None


def truth_metrics(results: Sequence[Any], cell: Cell, info: RepeatRecord, m: Mapping[str, Any],
                  counters: CounterDelta | None) -> TruthKeys:
    """The keys of load/integrity.py: counts, the concurrency that ran, saturation, per-token ITL, the common
    accept length (docs/contracts.md "Measurement truth")."""
    from specbench.load import integrity

    cap = info.running_cap
    ran = integrity.concurrency(int(cell.client["concurrency"]), cap if isinstance(cap, int) else None,
                                info.running_cap_source)
    sat = integrity.saturation(results, ran["queued"], ran["running_cap"], closed_loop=is_closed_loop(cell))
    checked = integrity.cap_check(results, ran["running_cap"], ran["running_cap_source"], sat["peak_in_flight"])
    n = request_count(cell.client)
    eff = ran["effective_concurrency"]
    out: TruthKeys = {**integrity.counts(results), **ran, **sat, **checked, **integrity.itl_per_token(results),
                      "waves": n / eff if eff else None}
    if info.cache_reset is not None:
        out["prefix_cache_reset"] = info.cache_reset
    common, source = None, None
    if not runs_autoregressive(cell.algorithm):
        if m.get("accept_length_source") == "vllm_metrics":
            common, source = m.get("accept_length_mean"), "vllm_metrics"
        elif (c := integrity.accept_common_sglang(results)) is not None:
            common, source = c, "sglang_meta_info"
        elif counters is not None:
            before, after = counters.sglang_samples()
            c = integrity.accept_common_sglang_counters(before, after, sum(1 for r in results if r.ok))
            if c is not None:
                common, source = c, "sglang_metrics"
                if m.get("accept_length_mean") is None:  # SGLang's own definition, as its meta_info would give it
                    out["accept_length_mean"] = integrity.accept_sglang_counters(before, after)
                    out["accept_length_source"] = "sglang_metrics"
        hist = integrity.per_pos_from_histograms(results)
        if hist is not None and not m.get("acceptance_per_pos"):
            out["acceptance_per_pos"] = hist
    out["accept_length_common"] = common
    out["accept_length_common_source"] = source
    return out


def cell_metrics_repeats(repeats: Sequence[StoredRepeat], cell: Cell) -> dict[str, Any]:
    """One repeat: `cell_metrics`. Several: the metrics of all repeats' requests pooled (throughputs over the summed
    measured time, percentiles over every request, the counter deltas summed), plus `spread` (load/spread.py) from
    each repeat's own metrics; `warmup_errors` of every warm-up."""
    from specbench.load.integrity import cap_check, saturation
    from specbench.load.spread import NOISY_CV_DEFAULT, spread_json

    if not repeats:
        raise ValueError("a cell's metrics need at least one repeat")
    info = repeats[-1].record
    raw_runs = [load_run(r) for r in repeats]
    raw = [x for r in raw_runs for x in r.results]
    trims = [trim_run(r, cell.client) for r in raw_runs]
    runs = [r for r, _ in trims]
    counters = [r.record.counters for r in repeats]
    warm = [e for r in repeats for e in r.record.warmup_errors]
    if len(runs) == 1:
        m1 = cell_metrics(runs[0], cell, counters[0], info)
        if trims[0][1]:  # over-saturation is the whole run's: its trend is read before the ends are trimmed
            m1.update(saturation(raw, bool(m1.get("queued")), m1.get("running_cap"), closed_loop=is_closed_loop(cell)))
        return {**m1, **trims[0][1], **({"warmup_errors": warm} if warm else {})}
    per = [cell_metrics(r, cell, d, info) for r, d in zip(runs, counters)]
    pooled = LoadRun(results=tuple(x for r in runs for x in r.results),
                     duration_s=sum(r.duration_s for r in runs), started_at=runs[0].started_at,
                     client_stalls=functools.reduce(Stalls.merged, (r.client_stalls for r in runs)))
    m = cell_metrics(pooled, cell, summed(counters), info)
    cv = cell.client.get("noisy_cv")
    m["spread"] = spread_json(per, float(cv) if cv is not None else NOISY_CV_DEFAULT)
    # each repeat's own trend (their send times restart at 0): the cell is over-saturated when one of them was
    per_sat = [saturation(r.results, bool(m.get("queued")), m.get("running_cap"), closed_loop=is_closed_loop(cell))
               for r in raw_runs]
    growths = [x["ttft_growth"] for x in per_sat if x["ttft_growth"] is not None]
    peaks = [x["peak_in_flight"] for x in per_sat if x["peak_in_flight"] is not None]
    m.update({"ttft_growth": max(growths) if growths else None, "peak_in_flight": max(peaks) if peaks else None,
              "oversaturated": any(x["oversaturated"] for x in per_sat),
              "saturation_reason": next((x["saturation_reason"] for x in per_sat if x["saturation_reason"]), None)})
    # what ran at once, per repeat too (the pooled send times overlap repeats that never ran together)
    checks = [cap_check(r.results, m.get("running_cap"), m.get("running_cap_source"), x["peak_in_flight"])
              for r, x in zip(raw_runs, per_sat)]
    seen = [c for c in checks if c["observed_concurrency"] is not None]
    if seen:
        order = {"exceeded": 0, "not_reached": 1, "agrees": 2, None: 3}
        m.update(min(seen, key=lambda c: (order[c["cap_check"]], -(c["observed_concurrency"] or 0))))
    if any(t for _, t in trims):
        m["trimmed_requests"] = sum(int(t.get("trimmed_requests") or 0) for _, t in trims)
        m["trim_window_s"] = [t.get("trim_window_s") for _, t in trims]
    if warm:
        m["warmup_errors"] = warm
    m["repeat_rounds"] = [r.record.round for r in repeats]
    return m


class TrimKeys(TypedDict, total=False):
    """What `trim_run` adds to metrics_json: nothing for an untrimmed run."""

    trimmed_requests: int
    trim_window_s: list[float]
    trim_note: str  # no request fell inside the window: the whole run was measured


def trim_run(run: LoadRun, client: Mapping[str, Any]) -> tuple[LoadRun, TrimKeys]:
    """The run's steady state (`trim_warmup`, `trim_cooldown`: fractions of its wall time D): the requests sent at or
    after warmup x D and done by (1 - cooldown) x D, over the time from the first kept send to the last kept end;
    `trimmed_requests` and `trim_window_s` say what was left out. Unset: the run as it was."""
    import dataclasses

    a, b = float(client.get("trim_warmup") or 0.0), float(client.get("trim_cooldown") or 0.0)
    if not a and not b:
        return run, {}
    d = run.duration_s
    lo, hi = a * d, (1.0 - b) * d
    kept = tuple(r for r in run.results
                 if r.start_s >= lo and (r.e2e_s is None or r.start_s + r.e2e_s <= hi))
    if not kept:  # nothing in the window: measure the whole run rather than nothing, and say so
        return run, {"trimmed_requests": 0, "trim_window_s": [lo, hi], "trim_note": "no request inside the window"}
    first = min(r.start_s for r in kept)
    last = max(r.start_s + (r.e2e_s or 0.0) for r in kept)
    out = dataclasses.replace(run, results=kept, duration_s=max(last - first, 1e-9))
    return out, {"trimmed_requests": len(run.results) - len(kept), "trim_window_s": [lo, hi]}


def is_closed_loop(cell: Any) -> bool:
    """A closed loop of `concurrency` workers (no request rate, or "inf"): load/speedup.py::is_rate_cell's opposite."""
    from specbench.load.speedup import is_rate_cell

    return not is_rate_cell(cell.client)
