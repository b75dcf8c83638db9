"""Per-cell aggregation of request results (pure functions); the /metrics counters come from engines/prometheus.py.

Definitions follow vLLM's bench client (vllm/benchmarks/serve.py::calculate_metrics) so numbers are
comparable: throughputs divide by the measured wall time; TPOT per request is
(E2E - TTFT) / (output tokens - 1); ITL is pooled over all requests; percentiles are numpy's linear
interpolation; goodput counts requests that meet every SLO given.

Mean accept length (tokens per verify step, the bonus token included):
- SGLang: per request `completion_tokens / spec_verify_ct` from `meta_info`
  (python/sglang/bench_serving.py computes `accept_length` the same way);
- vLLM: `1 + accepted / drafts` from the deltas of `vllm:spec_decode_num_accepted_tokens_total` and
  `vllm:spec_decode_num_drafts_total` over the cell
  (vllm/v1/spec_decode/metrics.py::SpecDecodingLogging.log prints "Mean acceptance length" so).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

import numpy as np

from specbench.engines.prometheus import SpecCounters
from specbench.load.metric_table import DISTRIBUTIONS, PERCENTILES
from specbench.load.results import RequestResult


@dataclass(frozen=True, slots=True)
class Slo:
    """Service-level objectives for goodput, in ms; None = not constrained."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None

    def met_by(self, r: RequestResult) -> bool:
        if not r.ok:
            return False
        checks = ((self.ttft_ms, r.ttft_s), (self.tpot_ms, r.tpot_s), (self.e2e_ms, r.e2e_s))
        return all(lim is None or (v is not None and v * 1000.0 <= lim) for lim, v in checks)

    @property
    def empty(self) -> bool:
        return self.ttft_ms is None and self.tpot_ms is None and self.e2e_ms is None


def summary_ms(values_s: Sequence[float], name: str) -> dict[str, float | None]:
    """`{name}_ms_mean`, `_p50`, `_p90`, `_p99` of values given in seconds; None when empty."""
    if len(values_s) == 0:
        return {f"{name}_ms_mean": None, **{f"{name}_ms_p{p}": None for p in PERCENTILES}}
    a = np.asarray(values_s, dtype=float) * 1000.0
    out: dict[str, float | None] = {f"{name}_ms_mean": float(a.mean())}
    for p, v in zip(PERCENTILES, np.percentile(a, PERCENTILES)):
        out[f"{name}_ms_p{p}"] = float(v)
    return out


# Two stream events closer than this arrived in the same socket read (the client stamps each read once).
SAME_READ_S = 1e-5


def draft_positions(server: Mapping[str, Any]) -> int | None:
    """Draft positions per verify step (an accept length is at most this + 1) from a cell's server settings:
    `num_steps` (SGLang --speculative-num-steps), else `num_draft_tokens` (vLLM num_speculative_tokens); the
    engine-side spellings an older store's server_json may hold are read too."""
    for key in ("num_steps", "speculative_num_steps", "num_draft_tokens", "num_speculative_tokens"):
        v = server.get(key)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return None


def accept_length_mean(ok: Sequence[Any]) -> float | None:
    """Token-weighted over the requests: sum(output tokens) / sum(spec_verify_ct) of those that report verify steps,
    else the mean of their per-request accept lengths; None without either. `ok`: successful requests with
    `output_tokens`, `spec_verify_ct` and `accept_len` (load RequestResult, the report's RequestRecord)."""
    steps = sum(r.spec_verify_ct or 0 for r in ok if r.spec_verify_ct)
    if steps:
        return sum(r.output_tokens or 0 for r in ok if r.spec_verify_ct) / steps
    acc = [r.accept_len for r in ok if r.accept_len is not None]
    return sum(acc) / len(acc) if acc else None


class StreamDelivery(TypedDict):
    """The `metrics_json` keys of `stream_delivery`."""
    tokens_per_arrival: float | None
    stream_warning: str | None


def stream_delivery(ok: Sequence[RequestResult], accept_length: float | None) -> StreamDelivery:
    """How the server streamed: output tokens per distinct arrival (a socket read holding one or more events).

    A streaming server delivers about one token per arrival (autoregressive) or about the accept length
    (speculative). Far more tokens per arrival means the server held its stream back and sent it in bursts
    (e.g. vLLM's API process starved of CPU by its engine-core process on a small machine: the demo's AR cell
    got all 64 tokens in one read): then TTFT, TPOT and ITL measure delivery, not generation, and the cell
    says so in `stream_warning`."""
    reqs = [r for r in ok if r.output_tokens > 0]
    if not reqs:
        return {"tokens_per_arrival": None, "stream_warning": None}
    arrivals = sum(1 + sum(1 for g in r.itl_s if g > SAME_READ_S) for r in reqs)
    tokens = sum(r.output_tokens for r in reqs)
    per_arrival = tokens / arrivals
    expected = max(1.0, accept_length or 1.0)
    warn = None
    if per_arrival > 2 * expected + 1 and tokens / len(reqs) > 4:
        warn = (f"the server delivered {per_arrival:.1f} output tokens per arrival (expected about {expected:.1f}): "
                f"it sent its stream in bursts, so TTFT/TPOT/ITL here measure delivery, not generation")
    return {"tokens_per_arrival": per_arrival, "stream_warning": warn}


class DraftAcceptance(TypedDict):
    draft_acceptance_rate: float | None


def draft_acceptance(m: Mapping[str, Any], draft_tokens: int | None) -> DraftAcceptance:
    """`draft_acceptance_rate`: accepted draft tokens / drafted tokens. vLLM: its counters (accepted /
    draft_tokens, vllm/v1/spec_decode/metrics.py "Draft acceptance rate"); SGLang (per-request accept lengths only):
    (accept_length_mean - 1) / draft_tokens, the same quantity for chain drafting with `draft_tokens` positions per
    step; None when neither is known."""
    sc = m.get("spec_counters") or {}
    if sc.get("draft_tokens"):
        return {"draft_acceptance_rate": sc["accepted"] / sc["draft_tokens"]}
    acc = m.get("accept_length_mean")
    if isinstance(acc, (int, float)) and draft_tokens:
        return {"draft_acceptance_rate": (float(acc) - 1.0) / draft_tokens}
    return {"draft_acceptance_rate": None}


def aggregate(
    results: Sequence[RequestResult],
    duration_s: float,
    *,
    concurrency: int | None,
    request_rate: float | None = None,
    slo: Slo | None = None,
    spec: SpecCounters | None = None,
) -> dict[str, Any]:
    """One cell's `metrics_json` (keys as in docs/structures.md). `speedup` is left None: see load/speedup.py."""
    ok = [r for r in results if r.ok]
    dur = duration_s if duration_s > 0 else math.inf  # nothing ran: throughputs 0, never NaN in metrics_json
    out_tokens = sum(r.output_tokens for r in ok)
    in_tokens = sum(r.prompt_tokens or 0 for r in ok)
    m: dict[str, Any] = {
        "completed": len(ok),
        "failed": len(results) - len(ok),
        "duration_s": duration_s,
        "concurrency": concurrency,
        "request_rate": request_rate,
        "request_throughput": len(ok) / dur,
        "output_throughput": out_tokens / dur,
        "total_token_throughput": (in_tokens + out_tokens) / dur,
        "total_input_tokens": in_tokens,
        "total_output_tokens": out_tokens,
    }
    for dist in DISTRIBUTIONS:  # load/metric_table.py: <name>_ms_{mean,p50,p90,p99}
        m.update(summary_ms([v for r in ok for v in dist.values(r)], dist.name))
    per_request = [r.accept_len for r in ok if r.accept_len is not None]
    if per_request:
        m["accept_lengths"] = per_request
        m["accept_length_mean"] = accept_length_mean(ok)
        m["accept_length_source"] = "sglang_meta_info"
    elif spec is not None and spec.accept_length is not None:
        m["accept_lengths"] = []
        m["accept_length_mean"] = spec.accept_length
        m["accept_length_source"] = "vllm_metrics"
        m["spec_counters"] = {"drafts": spec.drafts, "draft_tokens": spec.draft_tokens, "accepted": spec.accepted,
                              "accepted_per_pos": list(spec.accepted_per_pos)}
        if spec.drafts > 0 and spec.accepted_per_pos:  # the share of verify steps that accepted position i
            m["acceptance_per_pos"] = [a / spec.drafts for a in spec.accepted_per_pos]
    else:
        m["accept_lengths"] = []
        m["accept_length_mean"] = None
        m["accept_length_source"] = None
    if slo is not None and not slo.empty:
        m["goodput"] = sum(1 for r in ok if slo.met_by(r)) / dur
        m["slo"] = {"ttft_ms": slo.ttft_ms, "tpot_ms": slo.tpot_ms, "e2e_ms": slo.e2e_ms}
    else:
        m["goodput"] = None
    m.update(stream_delivery(ok, m.get("accept_length_mean")))
    m["speedup"] = None
    errors: dict[str, int] = {}
    for r in results:
        if r.error is not None:
            key = r.error[:120]
            errors[key] = errors.get(key, 0) + 1
    m["errors"] = errors
    return m
