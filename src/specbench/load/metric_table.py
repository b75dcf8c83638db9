"""The one table of the client metrics a cell's `metrics_json` holds: what each is, its unit, and where it is shown.

Every per-request distribution (`Distribution`: TTFT, TPOT, ITL, E2E) becomes `<name>_ms_{mean,p50,p90,p99}`
(load/metrics.py::aggregate computes them from the row's extractor); every metric that is shown somewhere is a
`MetricDef` row of `METRICS`: the report's cell-table columns (report/formatting.py::cell_columns, in this order), the
run summary's rows (`specbench run --json`, commands/run_summary.py::summary_rows) and the metric table of
docs/contracts.md ("Results store: client metrics", checked by tests/unit/load/test_metric_table.py) are generated
from it. Adding a metric is one row here (and, for a new per-request distribution, one `Distribution`). AIPerf keeps
one file per metric (`aiperf/metrics/types/`); here a metric is a frozen row, its computation the distribution's
extractor or load/metrics.py's aggregate for the counts and throughputs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from specbench.load.results import RequestResult

PERCENTILES = (50, 90, 99)
STATS = ("mean", *(f"p{p}" for p in PERCENTILES))

# how a report column shows the value: a plain number with `digits`, a percentage of a fraction, the pooled
# throughput with its interval (formatting.py::fmt_throughput), the accept length with its simulation marker
Style = Literal["number", "percent", "throughput", "accept"]


@dataclass(frozen=True)
class Distribution:
    """A per-request quantity in seconds, summarized over a cell's successful requests as `<name>_ms_<stat>`."""

    name: str
    label: str
    about: str
    values: Callable[[RequestResult], list[float]]

    def key(self, stat: str) -> str:
        return f"{self.name}_ms_{stat}"


DISTRIBUTIONS: tuple[Distribution, ...] = (
    Distribution("ttft", "TTFT", "time to first token: send to the first output token",
                 lambda r: [r.ttft_s] if r.ttft_s is not None else []),
    Distribution("tpot", "TPOT", "time per output token after the first: (E2E - TTFT) / (output tokens - 1)",
                 lambda r: [t] if (t := r.tpot_s) is not None else []),
    Distribution("itl", "ITL", "gap between two stream arrivals, pooled over every request",
                 lambda r: list(r.itl_s)),
    Distribution("e2e", "E2E", "end-to-end latency: send to the last token", lambda r: [r.e2e_s] if r.e2e_s is not None
                 else []),
)


@dataclass(frozen=True)
class MetricDef:
    """One metric of `metrics_json`: its key, unit and meaning; `column`: its header in the report's cell tables ("":
    none); `digits` / `style`: how that column shows it; `run_row`: in `specbench run`'s summary rows."""

    key: str
    unit: str
    about: str
    column: str = ""
    digits: int = 1
    style: Style = "number"
    run_row: bool = False


def _dist(d: Distribution, stat: str, column: str = "", run_row: bool = False, digits: int = 1) -> MetricDef:
    what = "mean" if stat == "mean" else f"{stat[1:]}th percentile (numpy linear)"
    return MetricDef(d.key(stat), "ms", f"{d.label} {what}: {d.about}", column, digits, "number", run_row)


_D = {d.name: d for d in DISTRIBUTIONS}

# In the report's column order (the columns between `status` and `speedup vs AR`); then the metrics no table shows.
METRICS: tuple[MetricDef, ...] = (
    MetricDef("output_throughput", "tok/s", "output tokens of the successful requests / measured wall time (pooled "
              "over the repeats)", "out tok/s", style="throughput", run_row=True),
    _dist(_D["ttft"], "p50", "TTFT p50 ms", run_row=True),
    _dist(_D["ttft"], "p99", "TTFT p99 ms", run_row=True),
    _dist(_D["tpot"], "p50", "TPOT p50 ms", run_row=True),
    _dist(_D["tpot"], "p99", "TPOT p99 ms", run_row=True),
    _dist(_D["itl"], "p50", "ITL p50 ms"),
    _dist(_D["itl"], "p99", "ITL p99 ms"),
    MetricDef("accept_length_mean", "tokens", "tokens per verify step, the bonus token included (SGLang: output "
              "tokens / spec_verify_ct; vLLM: 1 + accepted / drafts)", "accept len", 2, "accept", run_row=True),
    MetricDef("draft_acceptance_rate", "fraction", "accepted draft tokens / drafted tokens (vLLM: its counters; "
              "SGLang: (accept length - 1) / draft positions; the runner's repeat metrics write it)", "draft acc.", 0,
              "percent"),
    MetricDef("request_throughput", "req/s", "successful requests / measured wall time"),
    MetricDef("total_token_throughput", "tok/s", "(input + output tokens) / measured wall time"),
    MetricDef("goodput", "req/s", "successful requests meeting every SLO of the matrix / measured wall time; null "
              "without an SLO"),
    *(_dist(d, s) for d in DISTRIBUTIONS for s in STATS
      if d.key(s) not in ("ttft_ms_p50", "ttft_ms_p99", "tpot_ms_p50", "tpot_ms_p99", "itl_ms_p50", "itl_ms_p99")),
)

BY_KEY: dict[str, MetricDef] = {m.key: m for m in METRICS}


def columns() -> tuple[MetricDef, ...]:
    """The metrics the report's cell tables show, in column order."""
    return tuple(m for m in METRICS if m.column)


def run_row_keys() -> tuple[str, ...]:
    """The metrics `specbench run`'s summary rows carry, in order."""
    return tuple(m.key for m in METRICS if m.run_row)


def contracts_table() -> str:
    """The markdown table of docs/contracts.md's "Client metrics" section."""
    lines = ["| key | unit | what | report column | `run --json` row |", "|---|---|---|---|---|"]
    lines += [f"| `{m.key}` | {m.unit} | {m.about} | {m.column or '–'} | {'yes' if m.run_row else '–'} |"
              for m in METRICS]
    return "\n".join(lines)
