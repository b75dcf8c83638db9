"""Speedup over the autoregressive baseline: the one definition the runner stores and the report shows.

speedup = output_throughput / output_throughput of the done "ar" cell with the same baseline key; None for an AR
cell itself, without such a cell, or when the AR throughput is absent or zero (docs/structures.md
`metrics_json.speedup`). With repeats, each side's throughput is the mean over its repeats (`spread`), so the stored
speedup is the ratio the report's delta-method interval is centred on (load/spread.py::ratio_ci).

The baseline key is (TP, concurrency, prompt_tokens, output_tokens, request_rate, dataset) plus the optional workload
and sampling settings a cell sets (load/results.py workload_extras: category, length distributions, temperature...),
as matrix/spec.py Cell.baseline_key expands a matrix: a spec cell is never compared with an AR cell of another workload (the
(TP, concurrency)-only key compared 1024-token prompts against 128-token ones and let the last AR cell win).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from specbench.load.results import workload_extras

Key = tuple[Any, ...]


def is_ar(algorithm: str | None, label: str | None = None) -> bool:
    """The autoregressive baseline: `algorithm == "ar"` (or, with no algorithm stored, the label "ar")."""
    a = (algorithm or "").lower()
    return a == "ar" or (not a and (label or "").lower() == "ar")


def baseline_key(tp: Any, concurrency: Any, client: Mapping[str, Any] | None = None) -> Key:
    """Cells with equal keys compare against the same AR cell; request_rate as text ("inf", "4.0")."""
    c = client or {}
    rate = c.get("request_rate")
    return (tp, concurrency, c.get("prompt_tokens"), c.get("output_tokens"),
            None if rate is None else str(rate), c.get("dataset"), *workload_extras(c))


def _num(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return None
    return float(x)


def speedup_throughput(metrics: Mapping[str, Any]) -> Any:
    """The throughput a speedup divides: the mean over the repeats when the cell has a spread of them, else the
    cell's output_throughput."""
    sd = (metrics.get("spread") or {}).get("metrics") or {}
    mean = (sd.get("output_throughput") or {}).get("mean") if isinstance(sd, Mapping) else None
    return mean if mean is not None else metrics.get("output_throughput")


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


def with_speedup(cells: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Fill `metrics.speedup` for cells given as {"tp", "concurrency", "algorithm", "metrics", "client"?}."""
    out = [dict(c) for c in cells]

    def key(c: Mapping[str, Any]) -> Key:
        return baseline_key(c.get("tp"), c.get("concurrency"), c.get("client"))

    index = ar_index((key(c), is_ar(c.get("algorithm")), (c.get("metrics") or {}).get("output_throughput"))
                     for c in out)
    for c in out:
        m = dict(c.get("metrics") or {})
        m["speedup"] = speedup_at(key(c), is_ar(c.get("algorithm")), m.get("output_throughput"), index)
        c["metrics"] = m
    return out
