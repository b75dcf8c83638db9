"""What a cell's numbers rest on, as `metrics_json` keys (pure functions; docs/contracts.md "Measurement truth"):
the tokens counted (load/counting.py), the concurrency that really ran, whether the server was over-saturated, the
per-token inter-token latency beside the inter-chunk one, and the one accept length both engines are read as.

Accept length, one definition (`accept_length_common`): tokens per verify step = 1 + accepted drafts / verify steps,
the bonus token included and the prefill token not (vLLM's "Mean acceptance length",
vllm/v1/spec_decode/metrics.py::SpecDecodingLogging.log@0.32.0). SGLang's own `completion_tokens / spec_verify_ct`
(managers/tokenizer_manager.py::TokenizerManager._calculate_spec_decoding_metrics@0.5.15.post1) counts the first
token, which the prefill produced, as if a verify step had: it reads 1 / steps too high, so it is converted as
(completion_tokens - 1) / spec_verify_ct per request, (generated tokens - requests) / verify calls from its counters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

import numpy as np

OVERSATURATED_TTFT_GROWTH = 2.0  # last third's median TTFT over the first third's (in send order)
MIN_FOR_TREND = 9  # requests: fewer say nothing about a trend


class ConcurrencyKeys(TypedDict):
    effective_concurrency: int | None
    running_cap: int | None
    running_cap_source: str | None
    queued: bool


class SaturationKeys(TypedDict):
    ttft_growth: float | None
    peak_in_flight: int | None
    oversaturated: bool
    saturation_reason: str | None


class CountKeys(TypedDict):
    count_sources: dict[str, int]
    early_stops: int
    early_stop_example: str | None
    server_output_tokens_total: int


class ItlKeys(TypedDict):
    itl_per_token_ms_mean: float | None
    itl_kind: str


class CapCheckKeys(TypedDict):
    observed_concurrency: int | None
    cap_check: str | None
    cap_check_reason: str | None


def concurrency(concurrency: int | None, cap: int | None, cap_source: str | None) -> ConcurrencyKeys:
    """`effective_concurrency` = min(c, cap) (c when the cap is unknown), `running_cap`, its source, `queued`."""
    eff = concurrency if cap is None or concurrency is None else min(concurrency, cap)
    return {"effective_concurrency": eff, "running_cap": cap, "running_cap_source": cap_source,
            "queued": bool(cap is not None and concurrency is not None and concurrency > cap)}


def concurrency_text(concurrency: Any, cap: Any, source: str | None = None) -> str:
    """The concurrency asked, with the one that really runs when a known running cap is below it: '64 (runs 47:
    cap)', or 'planner cap' when the cap is the planner's prediction (`source` 'planner...'); '16' otherwise."""
    if isinstance(concurrency, int) and isinstance(cap, int) and not isinstance(cap, bool) and cap < concurrency:
        return f"{concurrency} (runs {cap}: {'planner cap' if (source or '').startswith('planner') else 'cap'})"
    return str(concurrency)


def peak_in_flight(results: Sequence[Any]) -> int | None:
    """The most requests the client had in flight at once (each from its send, `start_s`, to its end, `start_s` +
    `e2e_s`; a request without an end is left out); None without any. The server never held more than this."""
    return most_at_once([(r.start_s, r.start_s + r.e2e_s) for r in results if r.e2e_s is not None])


def most_at_once(spans: Sequence[tuple[float, float]]) -> int | None:
    """The most (start, end) spans open at one instant (an end and a start at the same instant do not overlap);
    None without any."""
    edges = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])  # an end sorts first
    if not edges:
        return None
    peak = now = 0
    for _, d in edges:
        now += d
        peak = max(peak, now)
    return peak


def saturation(results: Sequence[Any], queued: bool, cap: int | None = None,
               closed_loop: bool = False) -> SaturationKeys:
    """`ttft_growth` (median TTFT of the last third of the requests, in send order, over the first third's),
    `peak_in_flight` and `oversaturated`: the requests queued at the server (c > its cap and more than `cap` were
    really in flight at once: a paced run whose arrivals never filled the cap queued nothing) or TTFT grew through
    the run by more than OVERSATURATED_TTFT_GROWTH (arrivals faster than the server serves) while requests overlapped:
    with one request in flight at a time nothing can queue behind another, so a TTFT trend there is the machine's
    noise, not saturation (seen: 11 -> 25 ms medians over 12 requests at c=1 on a loaded 2-core machine; a queue
    grows TTFT by whole service times).

    In a closed loop (`closed_loop`: c workers, each sending its next request when the last one ended) arrivals
    cannot outpace the server: at c <= cap no queue can build, and the first wave's TTFT (c prompts prefilled at once
    from an idle server) is not the steady state's (each new prompt prefilled beside c - 1 decoding requests), so a
    TTFT trend there says nothing about saturation (seen: closed loops at c = the cap flagged on TTFT growth alone).
    A closed loop is over-saturated only where it queued (c above the cap). With the cap known, an open loop whose
    requests in flight never reached it did not outpace the server (a backlog grows until the cap holds it): its
    TTFT trend is the machine's (seen: 6.3x on a paced cell at 10/s, ~2 in flight under a cap of 8, on a 2-core
    machine running the test suite beside it)."""
    ok = sorted((r for r in results if r.ok and r.ttft_s is not None), key=lambda r: r.start_s)
    growth = None
    if len(ok) >= MIN_FOR_TREND:
        k = len(ok) // 3
        first = float(np.median([r.ttft_s for r in ok[:k]]))
        last = float(np.median([r.ttft_s for r in ok[-k:]]))
        growth = last / first if first > 0 else None
    peak = peak_in_flight(results)
    why = []
    if queued and (cap is None or peak is None or peak > cap):
        why.append("more requests in flight than the server runs at once (they queued)")
    filled = cap is None or peak is None or peak >= cap  # arrivals outpacing the server pile up to its cap
    if growth is not None and growth > OVERSATURATED_TTFT_GROWTH and (peak is None or peak > 1) and filled \
            and not closed_loop:
        why.append(f"TTFT grew {growth:.1f}x from the first third of the requests to the last")
    return {"ttft_growth": growth, "peak_in_flight": peak, "oversaturated": bool(why),
            "saturation_reason": "; ".join(why) or None}


def counts(results: Sequence[Any]) -> CountKeys:
    """How the output tokens were counted: `count_sources` {token_ids | tokenizer | server: requests},
    `early_stops` (requests that asked ignore_eos and ended before max_tokens), `server_output_tokens_total`."""
    ok = [r for r in results if r.ok]
    sources: dict[str, int] = {}
    for r in ok:
        key = r.count_source or "server"
        sources[key] = sources.get(key, 0) + 1
    early = [r for r in ok if r.early_stop]
    return {"count_sources": sources, "early_stops": len(early),
            "early_stop_example": (f"asked {early[0].max_tokens}, got {early[0].output_tokens}" if early else None),
            "server_output_tokens_total": sum(r.server_output_tokens or 0 for r in ok
                                              if r.server_output_tokens is not None)}


def itl_per_token(results: Sequence[Any]) -> ItlKeys:
    """`itl_per_token_ms_mean`: decode time per output token after the first, pooled over the requests
    (sum(E2E - TTFT) / sum(output tokens - 1), token-weighted TPOT); `itl_kind`: the `itl_ms_*` keys are gaps between
    stream chunks (one verify step of several tokens under speculation), not per token."""
    ok = [r for r in results if r.ok and r.ttft_s is not None and r.e2e_s is not None and r.output_tokens > 1]
    tokens = sum(r.output_tokens - 1 for r in ok)
    t = sum(r.e2e_s - r.ttft_s for r in ok)
    return {"itl_per_token_ms_mean": 1000.0 * t / tokens if tokens else None, "itl_kind": "inter-chunk"}


def accept_common_sglang(results: Sequence[Any]) -> float | None:
    """SGLang per-request meta_info -> tokens per verify step without the prefill token, pooled."""
    rs = [r for r in results if r.ok and r.spec_verify_ct]
    steps = sum(r.spec_verify_ct for r in rs)
    return (sum(r.output_tokens - 1 for r in rs) / steps) if steps else None


def accept_common_sglang_counters(before: Mapping[str, float], after: Mapping[str, float],
                                  requests: int) -> float | None:
    """SGLang counters (`sglang:generation_tokens_total`, `sglang:spec_verify_calls_total`, --enable-metrics,
    observability/metrics_collector.py@0.5.15.post1) -> (generated - requests) / verify calls over the cell."""
    gen = after.get("sglang:generation_tokens_total", 0.0) - before.get("sglang:generation_tokens_total", 0.0)
    ver = after.get("sglang:spec_verify_calls_total", 0.0) - before.get("sglang:spec_verify_calls_total", 0.0)
    if ver <= 0 or gen <= 0:
        return None
    return (gen - requests) / ver


def accept_sglang_counters(before: Mapping[str, float], after: Mapping[str, float]) -> float | None:
    """SGLang's own definition from its counters: generated tokens / verify calls over the cell (the per-request
    `completion_tokens / spec_verify_ct` of meta_info, pooled). Not the `sglang:spec_accept_length` gauge: that is
    the scheduler's last logging window, not the cell."""
    gen = after.get("sglang:generation_tokens_total", 0.0) - before.get("sglang:generation_tokens_total", 0.0)
    ver = after.get("sglang:spec_verify_calls_total", 0.0) - before.get("sglang:spec_verify_calls_total", 0.0)
    return gen / ver if ver > 0 and gen > 0 else None


def per_pos_from_histograms(results: Sequence[Any]) -> list[float] | None:
    """SGLang's per-request `spec_correct_drafts_histogram` ([k]: verify steps that accepted k drafts) pooled ->
    the share of verify steps that accepted draft position i (vLLM's acceptance_per_pos)."""
    hists = [h for r in results if r.ok and (h := getattr(r, "accept_hist", None))]
    if not hists:
        return None
    n = max(len(h) for h in hists)
    total = [sum(h[k] for h in hists if k < len(h)) for k in range(n)]
    steps = sum(total)
    if steps <= 0:
        return None
    return [sum(total[k] for k in range(i + 1, n)) / steps for i in range(n - 1)]


CAP_SLACK = 1  # requests: a client reads a first token and an end a network hop late, so one more may overlap


def observed_running(results: Sequence[Any]) -> int | None:
    """The most requests the client saw generating at once: each from its first token (`start_s` + `ttft_s`) to
    its end (`start_s` + `e2e_s`), successful requests only. The server ran at least this many at once (a request
    it has admitted but not yet prefilled shows no token yet), so it is a lower bound of the running count."""
    return most_at_once([(r.start_s + r.ttft_s, r.start_s + r.e2e_s) for r in results
                         if r.ok and r.ttft_s is not None and r.e2e_s is not None])


def cap_check(results: Sequence[Any], cap: int | None, source: str | None, peak: int | None) -> CapCheckKeys:
    """What was seen against the running cap the server (or the log, or the planner) says: `observed_concurrency`
    (observed_running) and `cap_check`:
    - "exceeded": more requests generated at once than the cap allows (+ CAP_SLACK): the cap is wrong, a failure
      of the cell (`cap_check_reason` names both numbers);
    - "not_reached": the client held at least `cap` requests in flight but never saw that many generate at once
      (the KV pool, or the prefill, held the rest back: effective concurrency is the observed one, a note);
    - "agrees"; None when the cap or the timings are unknown."""
    seen = observed_running(results)
    out: CapCheckKeys = {"observed_concurrency": seen, "cap_check": None, "cap_check_reason": None}
    if cap is None or seen is None:
        return out
    said = f"{cap} ({source})" if source else str(cap)
    if seen > cap + CAP_SLACK:
        out["cap_check"] = "exceeded"
        out["cap_check_reason"] = (f"the running cap is {said} but the client saw {seen} requests generating at "
                                   "once: the reported cap is wrong")
    elif peak is not None and peak >= cap and seen < cap:
        out["cap_check"] = "not_reached"
        out["cap_check_reason"] = (f"{peak} requests were in flight against a running cap of {said}, but at most "
                                   f"{seen} generated at once")
    else:
        out["cap_check"] = "agrees"
    return out


ACCEPT_SLACK = 1e-6  # relative: counters are integers, sums of floats from /metrics


def spec_counter_problem(m: Mapping[str, Any], draft_positions: int | None) -> str | None:
    """Why a speculative cell's acceptance numbers cannot be true, or None: a counter that went down during the
    cell (the server restarted, or the counters are not cumulative), more accepted than drafted tokens, per-position
    counts that do not add up to the accepted total or grow with the position (position i+1 is accepted only after
    position i), an accept length (tokens per verify step) below 1 or above the draft positions + 1, or more
    accepted draft tokens than the client received. `m`: the cell's metrics (load/metrics.py::aggregate keys)."""
    sc = m.get("spec_counters") or {}
    if sc:
        drafts, drafted, accepted = (float(sc.get(k) or 0.0) for k in ("drafts", "draft_tokens", "accepted"))
        per_pos = [float(x) for x in sc.get("accepted_per_pos") or []]
        if min([drafts, drafted, accepted, *per_pos]) < 0:
            return "a spec-decode counter went down during the cell (the server restarted, or it does not count up)"
        if accepted > drafted * (1 + ACCEPT_SLACK):
            return f"{accepted:g} draft tokens accepted of {drafted:g} drafted"
        if per_pos and abs(sum(per_pos) - accepted) > max(1.0, ACCEPT_SLACK * accepted):
            return f"accepted per position sum to {sum(per_pos):g}, the accepted total is {accepted:g}"
        if any(b > a * (1 + ACCEPT_SLACK) + 0.5 for a, b in zip(per_pos, per_pos[1:])):
            return f"more tokens accepted at a later draft position than an earlier one ({per_pos})"
        out_tokens = float(m.get("total_output_tokens") or 0)
        if out_tokens and accepted > out_tokens:
            return f"{accepted:g} draft tokens accepted but the client received {out_tokens:g} output tokens"
    # the engine's own accept length may count the prefill token (SGLang: + 1 / steps, at most + 1): one more allowed
    for key, extra in (("accept_length_mean", 1), ("accept_length_common", 0)):
        v = m.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            top = draft_positions + 1 + extra if draft_positions else None
            if v < 1 - ACCEPT_SLACK or (top is not None and v > top * (1 + ACCEPT_SLACK)):
                bound = f"between 1 and {top}" if top is not None else "at least 1"
                return f"{key} = {v:.3f} tokens per verify step, which must be {bound}"
    return None
