"""Speedup over the autoregressive baseline: the one definition the runner stores and the report, the CLI and the
export show.

Every cell is compared with the done "ar" cell of the same baseline key, on two kinds of speedup
(docs/contracts.md "Results store: derived metrics"):

- throughput: `speedup` = output_throughput / the AR cell's output_throughput. Throughputs are pooled (total output
  tokens / total measured seconds, over every repeat: load/metrics.py aggregate of the pooled run); the interval is
  the log-ratio interval of load/spread.py `ratio` with each side's standard error from its repeats
  (`pooled_rate` of `spread.rate_parts`);
- latency: `tpot_speedup` = AR tpot_ms_mean / tpot_ms_mean and `e2e_speedup` = AR e2e_ms_p50 / e2e_ms_p50 (above 1:
  the speculative cell is faster per token / per request), each with its log-ratio interval from the per-repeat
  values (`spread.metrics`).

A closed-loop cell (no `request_rate`, or "inf") leads with the throughput speedup; a rate cell (`request_rate`
set) with the TPOT one: below saturation both servers deliver the offered rate, so its throughput ratio is about 1
by construction (`speedup_lead`, `decision` = the lead speedup's decision: faster / slower / undecided).

The baseline key is (TP, concurrency, prompt_tokens, output_tokens, request_rate, dataset) plus the optional workload
and sampling settings a cell sets (load/results.py workload_extras: category, length distributions, temperature...),
as matrix/expansion.py Cell.baseline_key expands a matrix: a spec cell is never compared with an AR cell of another
workload.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, TypeAlias

from specbench.load import spread as sp
from specbench.load.results import workload_extras

Key = tuple[Any, ...]
# a derived key's value: an estimate or df (float), an interval ([lo, hi]), a decision or the lead (str), None
DerivedValue: TypeAlias = float | str | list[float] | None

# (stored key prefix, the metric it divides, True when lower is better: the speedup is AR / cell)
KINDS = (("speedup", "output_throughput", False), ("tpot_speedup", "tpot_ms_mean", True),
         ("e2e_speedup", "e2e_ms_p50", True))
LEADS = {"throughput": "speedup", "tpot": "tpot_speedup"}  # speedup_lead -> the stored key it names
# the cell's own intervals (the pooled value's log interval over the repeats), stored as `<metric>_ci95`
INTERVAL_METRICS = ("output_throughput", "tpot_ms_mean", "e2e_ms_p50")
DIGITS = 4


def is_ar(algorithm: str | None, label: str | None = None) -> bool:
    """The autoregressive baseline: `algorithm == "ar"` (or, with no algorithm stored, the label "ar")."""
    a = (algorithm or "").lower()
    return a == "ar" or (not a and (label or "").lower() == "ar")


# The A/A twin of an autoregressive server (matrix `[client] aa_check = true`): launched exactly as the AR server, its
# cells stored with this algorithm so that no reader takes them for the baseline (`is_ar` is False): each gets a
# speedup over the AR cell like any other configuration, which an A/A check expects to be a tie or undecided.
AA_ALGORITHM = "ar-aa"


def is_aa_twin(algorithm: str | None) -> bool:
    return (algorithm or "").lower() == AA_ALGORITHM


def runs_autoregressive(algorithm: str | None) -> bool:
    """What the server runs (not what the cell is compared as): the AR baseline and its A/A twin decode
    autoregressively, so neither has an accept length."""
    return is_ar(algorithm) or is_aa_twin(algorithm)


def baseline_key(tp: Any, concurrency: Any, client: Mapping[str, Any] | None = None) -> Key:
    """Cells with equal keys compare against the same AR cell; request_rate as text ("inf", "4.0")."""
    c = client or {}
    rate = c.get("request_rate")
    return (tp, concurrency, c.get("prompt_tokens"), c.get("output_tokens"),
            None if rate is None else str(rate), c.get("dataset"), *workload_extras(c))


def is_rate_cell(client: Mapping[str, Any] | None) -> bool:
    """A cell driven at a request rate (Poisson arrivals), not a closed loop of `concurrency` workers."""
    rate = (client or {}).get("request_rate")
    if rate is None or isinstance(rate, bool):
        return False
    try:
        return math.isfinite(float(rate)) and float(rate) > 0
    except (TypeError, ValueError):
        return False


def lead_of(client: Mapping[str, Any] | None) -> str:
    """'tpot' for a rate cell, 'throughput' for a closed-loop one (module docstring)."""
    return "tpot" if is_rate_cell(client) else "throughput"


def _num(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return None
    return float(x)


def speedup_throughput(metrics: Mapping[str, Any]) -> Any:
    """The throughput a speedup divides: the cell's pooled output_throughput (over every repeat's requests and the
    summed measured time; a cell measured once: its own)."""
    return metrics.get("output_throughput")


def ratio(throughput: Any, ar_throughput: Any) -> float | None:
    """throughput / ar_throughput; None when either is absent or not finite, or the AR one is <= 0."""
    mine, base = _num(throughput), _num(ar_throughput)
    if mine is None or base is None or base <= 0:
        return None
    return mine / base


def speedup(metrics: Mapping[str, Any], baseline: Mapping[str, Any] | None) -> float | None:
    """A cell's metrics against its AR cell's metrics (output_throughput)."""
    if baseline is None:
        return None
    return ratio(metrics.get("output_throughput"), baseline.get("output_throughput"))


def ar_index(cells: Iterable[tuple[Key, bool, Any]]) -> dict[Key, float]:
    """(key, is AR and done, output_throughput) -> {key: AR output_throughput}; zero or absent is no baseline."""
    out: dict[Key, float] = {}
    for key, is_done_ar, tput in cells:
        t = _num(tput)
        if is_done_ar and t:
            out[key] = t
    return out


def speedup_at(key: Key, ar: bool, throughput: Any, index: Mapping[Key, float]) -> float | None:
    """The stored `speedup` of one cell: None for AR, else ratio to the AR cell of the same key."""
    return None if ar else ratio(throughput, index.get(key))


# ---------------------------------------------------------------- estimates and the derived keys


def estimate(metrics: Mapping[str, Any], key: str) -> sp.Estimate | None:
    """A metric of a cell as a log-scale estimate: the stored (pooled) value, with the standard error over its
    repeats when it has some (throughput: the ratio estimator of `spread.rate_parts`; a store written before them:
    the per-repeat values); None when the metric is absent or not positive."""
    value = _num(metrics.get(key))
    if value is None or value <= 0:
        return None
    raw = metrics.get("spread")
    sd: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    parts = sd.get("rate_parts")
    if key == "output_throughput" and isinstance(parts, Mapping):
        est = sp.pooled_rate(_nums(parts.get("output_tokens")), _nums(parts.get("duration_s")))
        if est is not None and est.n >= 2:
            return sp.Estimate(value, est.rel_se, est.df, est.n)  # the stored value is the same pooled ratio
    ms = sd.get("metrics")
    per = ms.get(key) if isinstance(ms, Mapping) else None
    return sp.relative(value, _nums(per.get("values")) if isinstance(per, Mapping) else [])


def _nums(v: Any) -> list[float]:
    """The finite numbers of a stored list (anything else: none)."""
    return [float(x) for x in v if _num(x) is not None] if isinstance(v, list) else []


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, DIGITS)


def _ci(ci: tuple[float, float] | None) -> list[float] | None:
    return None if ci is None else [round(ci[0], DIGITS), round(ci[1], DIGITS)]


def cell_intervals(metrics: Mapping[str, Any]) -> dict[str, DerivedValue]:
    """The cell's own keys: `<metric>_ci95` of INTERVAL_METRICS and `output_throughput_cv` (null: measured once)."""
    out: dict[str, DerivedValue] = {}
    for key in INTERVAL_METRICS:
        est = estimate(metrics, key)
        out[f"{key}_ci95"] = _ci(est.ci95) if est is not None else None
    sd = metrics.get("spread") if isinstance(metrics.get("spread"), Mapping) else {}
    cv = ((sd.get("metrics") or {}).get("output_throughput") or {}).get("cv") if sd else None
    out["output_throughput_cv"] = _round(_num(cv))
    return out


def speedups(metrics: Mapping[str, Any], ar: Mapping[str, Any] | None,
             client: Mapping[str, Any] | None) -> dict[str, DerivedValue]:
    """Every speedup key of a speculative cell against its AR cell's metrics (None: no baseline): the value, its
    95% interval, its degrees of freedom and its decision per kind, the lead and its decision."""
    out: dict[str, DerivedValue] = {}
    for name, key, lower_better in KINDS:
        mine, base = estimate(metrics, key), estimate(ar, key) if ar is not None else None
        if mine is None or base is None:
            r = None
        else:
            r = sp.ratio(base, mine) if lower_better else sp.ratio(mine, base)
        out[name] = _round(r.value) if r is not None else None
        out[f"{name}_ci95"] = _ci(r.ci95) if r is not None else None
        out[f"{name}_df"] = _round(r.df) if r is not None else None
        out[f"{name}_decision"] = r.decision if r is not None else None
    lead = lead_of(client)
    out["speedup_lead"] = lead
    out["decision"] = out[f"{LEADS[lead]}_decision"]
    return out


SPEEDUP_KEYS = tuple(k for name, _, _ in KINDS for k in (name, f"{name}_ci95", f"{name}_df", f"{name}_decision")) \
    + ("speedup_lead", "decision")


def derived(metrics: Mapping[str, Any], ar: Mapping[str, Any] | None, client: Mapping[str, Any] | None,
            is_ar_cell: bool) -> dict[str, DerivedValue]:
    """Every derived key a done cell stores: its own intervals, and (speculative cells) its speedups; an AR cell has
    the speedup keys null."""
    out = cell_intervals(metrics)
    if is_ar_cell:
        out.update(dict.fromkeys(SPEEDUP_KEYS))
        out["speedup_lead"] = lead_of(client)
    else:
        out.update(speedups(metrics, ar, client))
    return out


def fill(cells: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """`derived` for cells given as {"tp", "concurrency"?, "algorithm", "label"?, "status"?, "metrics", "client"?,
    "model"?}: each done cell's metrics with the derived keys set (cells that are not done come back unchanged). The
    AR cell of a key is the done AR cell with a positive throughput, of the same `model` when the cells name one."""
    out = [dict(c) for c in cells]

    def key(c: Mapping[str, Any]) -> Key:
        cl = c.get("client") or {}
        return (c.get("model"), *baseline_key(c.get("tp"), c.get("concurrency", cl.get("concurrency")), cl))

    def done(c: Mapping[str, Any]) -> bool:
        return c.get("status", "done") == "done" and bool(c.get("metrics"))

    ars: dict[Key, Mapping[str, Any]] = {}
    for c in out:
        if done(c) and is_ar(c.get("algorithm"), c.get("label")) and (_num(c["metrics"].get("output_throughput"))
                                                                      or 0) > 0:
            ars[key(c)] = c["metrics"]
    for c in out:
        if done(c):
            ar_cell = is_ar(c.get("algorithm"), c.get("label"))
            c["metrics"] = {**c["metrics"], **derived(c["metrics"], None if ar_cell else ars.get(key(c)),
                                                      c.get("client"), ar_cell)}
    return out


def with_speedup(cells: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Fill `metrics.speedup` (and every derived key, `fill`) for cells given as {"tp", "concurrency", "algorithm",
    "metrics", "client"?}."""
    return fill(cells)
