"""Per-cell metrics on hand-computed inputs; Prometheus parsing; vLLM spec counter deltas."""

from __future__ import annotations

import math

import pytest

from specbench.engines.prometheus import SpecCounters, spec_delta
from specbench.engines.prometheus import samples as parse_prometheus
from specbench.load.metrics import Slo, aggregate, summary_ms
from specbench.load.results import RequestResult
from specbench.load.speedup import speedup, with_speedup


def _r(idx: int, ttft: float, e2e: float, out: int, itl: tuple[float, ...] = (), *, prompt: int = 100,
       error: str | None = None, verify: int | None = None) -> RequestResult:
    return RequestResult(idx, 0.0, ttft, e2e, itl, prompt, out, error, verify,
                         out / verify if verify else None, out)


def test_tpot_definition() -> None:
    r = _r(0, 0.1, 1.1, 11)
    assert r.tpot_s == pytest.approx(0.1)  # (1.1 - 0.1) / (11 - 1)
    assert _r(0, 0.1, 0.1, 1).tpot_s is None
    assert _r(0, 0.1, 1.1, 11, error="x").tpot_s is None


def test_summary_ms_uses_linear_percentiles() -> None:
    s = summary_ms([0.001 * i for i in range(1, 101)], "ttft")  # 1..100 ms
    assert s["ttft_ms_mean"] == pytest.approx(50.5)
    assert s["ttft_ms_p50"] == pytest.approx(50.5)
    assert s["ttft_ms_p90"] == pytest.approx(90.1)
    assert s["ttft_ms_p99"] == pytest.approx(99.01)
    assert summary_ms([], "itl") == {"itl_ms_mean": None, "itl_ms_p50": None, "itl_ms_p90": None, "itl_ms_p99": None}


def test_aggregate_throughput_latency_and_failures() -> None:
    rs = [
        _r(0, 0.010, 0.110, 11, (0.01,) * 10, prompt=100),
        _r(1, 0.030, 0.230, 21, (0.01,) * 20, prompt=50),
        _r(2, 0.0, 0.0, 0, error="HTTP 500: boom"),
    ]
    m = aggregate(rs, 2.0, concurrency=4)
    assert m["completed"] == 2 and m["failed"] == 1
    assert m["request_throughput"] == pytest.approx(1.0)
    assert m["output_throughput"] == pytest.approx(16.0)  # 32 tokens / 2 s
    assert m["total_token_throughput"] == pytest.approx(91.0)  # (150 + 32) / 2
    assert m["ttft_ms_mean"] == pytest.approx(20.0)
    assert m["tpot_ms_mean"] == pytest.approx(10.0)
    assert m["itl_ms_p99"] == pytest.approx(10.0)
    assert m["e2e_ms_p50"] == pytest.approx(170.0)
    assert m["goodput"] is None and m["speedup"] is None and m["accept_length_mean"] is None
    assert m["errors"] == {"HTTP 500: boom": 1}
    keys = {"completed", "failed", "duration_s", "concurrency", "request_rate", "request_throughput",
            "output_throughput", "total_token_throughput", "accept_length_mean", "accept_lengths", "goodput",
            "speedup"} | {f"{n}_ms_{s}" for n in ("ttft", "tpot", "itl", "e2e") for s in ("mean", "p50", "p90", "p99")}
    assert keys <= set(m)


def test_goodput_counts_requests_meeting_every_slo() -> None:
    rs = [_r(0, 0.010, 0.110, 11), _r(1, 0.300, 0.400, 11), _r(2, 0.010, 2.010, 11)]
    m = aggregate(rs, 1.0, concurrency=1, slo=Slo(ttft_ms=100, tpot_ms=50))
    assert m["goodput"] == pytest.approx(1.0)  # only request 0: #1 misses TTFT, #2 misses TPOT (200 ms)
    assert aggregate(rs, 1.0, concurrency=1, slo=Slo(e2e_ms=500))["goodput"] == pytest.approx(2.0)


def test_sglang_accept_length_from_meta_info() -> None:
    rs = [_r(0, 0.01, 0.5, 100, verify=40), _r(1, 0.01, 0.5, 60, verify=20)]
    m = aggregate(rs, 1.0, concurrency=2)
    assert m["accept_lengths"] == [2.5, 3.0]
    assert m["accept_length_mean"] == pytest.approx(160 / 60)  # token-weighted over the cell
    assert m["accept_length_source"] == "sglang_meta_info"


VLLM_BEFORE = """# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="tiny-target"} 100.0
vllm:spec_decode_num_drafts_created{engine="0",model_name="tiny-target"} 1.7e+09
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="tiny-target"} 300.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="tiny-target"} 150.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="tiny-target",position="0"} 80.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="tiny-target",position="1"} 70.0
vllm:kv_cache_usage_perc{engine="0",model_name="tiny-target"} 0.25
"""
VLLM_AFTER = VLLM_BEFORE.replace("} 100.0", "} 160.0").replace("} 300.0", "} 480.0").replace("} 150.0", "} 258.0")


def test_parse_prometheus_sums_label_sets_and_skips_created() -> None:
    s = parse_prometheus(VLLM_BEFORE)
    assert s["vllm:spec_decode_num_drafts_total"] == 100.0
    assert s["vllm:spec_decode_num_accepted_tokens_per_pos_total"] == 150.0
    assert s["vllm:kv_cache_usage_perc"] == 0.25
    assert "vllm:spec_decode_num_drafts_created" not in s


def test_vllm_spec_delta_accept_length() -> None:
    d = spec_delta(VLLM_BEFORE, VLLM_AFTER)
    assert (d.drafts, d.draft_tokens, d.accepted) == (60.0, 180.0, 108.0)
    assert d.accept_length == pytest.approx(1 + 108 / 60)
    assert d.acceptance_rate == pytest.approx(0.6)
    m = aggregate([_r(0, 0.01, 0.5, 100)], 1.0, concurrency=1, spec=d)
    assert m["accept_length_mean"] == pytest.approx(2.8) and m["accept_length_source"] == "vllm_metrics"
    assert SpecCounters().accept_length is None


def test_speedup_against_ar_baseline_same_tp_and_concurrency() -> None:
    assert speedup({"output_throughput": 300.0}, {"output_throughput": 200.0}) == pytest.approx(1.5)
    assert speedup({"output_throughput": 300.0}, None) is None
    assert speedup({"output_throughput": 300.0}, {"output_throughput": 0.0}) is None
    cells = [
        {"tp": 1, "concurrency": 1, "algorithm": "ar", "metrics": {"output_throughput": 100.0}},
        {"tp": 1, "concurrency": 1, "algorithm": "draft_model", "metrics": {"output_throughput": 250.0}},
        {"tp": 1, "concurrency": 4, "algorithm": "draft_model", "metrics": {"output_throughput": 250.0}},
        {"tp": 4, "concurrency": 1, "algorithm": "ar", "metrics": {"output_throughput": 400.0}},
        {"tp": 4, "concurrency": 1, "algorithm": "dflash", "metrics": {"output_throughput": 600.0}},
    ]
    out = [c["metrics"]["speedup"] for c in with_speedup(cells)]
    assert out[0] is None and out[1] == pytest.approx(2.5) and out[2] is None
    assert out[3] is None and out[4] == pytest.approx(1.5)


def test_empty_cell_is_not_a_crash() -> None:
    m = aggregate([], 0.0, concurrency=1)
    assert m["completed"] == 0 and m["request_throughput"] == 0.0 and m["ttft_ms_p50"] is None
    assert not any(isinstance(v, float) and math.isnan(v) for v in m.values())


def test_stream_delivery_flags_a_burst_stream():
    """64 tokens arriving in one socket read per request (what a CPU-starved vLLM frontend did to the demo's AR
    cell: TTFT = E2E, TPOT 0) is flagged; one token per arrival, or a verify step's tokens per arrival at the
    accept length, is not."""
    from specbench.load.metrics import stream_delivery
    from specbench.load.results import RequestResult

    def req(tokens: int, gap: float, events: int | None = None) -> RequestResult:
        n = events or tokens
        gaps = tuple([gap] * (n - 1))
        return RequestResult(idx=0, start_s=0.0, ttft_s=0.02, e2e_s=0.02 + sum(gaps), itl_s=gaps,
                             prompt_tokens=128, output_tokens=tokens, events=n)

    burst = stream_delivery([req(64, 0.0)] * 4, None)  # 64 events, all in the same read
    assert burst["tokens_per_arrival"] == 64 and "bursts" in burst["stream_warning"]
    assert stream_delivery([req(64, 0.004)] * 4, None)["stream_warning"] is None
    assert stream_delivery([req(64, 0.004, events=16)] * 4, 4.0)["stream_warning"] is None  # spec: ~accept len
    assert stream_delivery([req(64, 0.004, events=2)] * 4, 4.0)["stream_warning"] is not None


def _timed(ttfts: list[float], *, overlap: bool) -> list[RequestResult]:
    """Requests sent 1 s apart, each lasting 0.5 s; `overlap`: 2 s each instead, so two are in flight at once."""
    span = 2.0 if overlap else 0.5
    return [RequestResult(i, float(i), t, span, (), 24, 16) for i, t in enumerate(ttfts)]


def test_ttft_growth_is_saturation_only_where_requests_overlapped() -> None:
    from specbench.load.integrity import saturation

    ttfts = [0.010] * 4 + [0.012] * 4 + [0.025] * 4  # 2.5x from the first third to the last
    one_at_a_time = saturation(_timed(ttfts, overlap=False), queued=False)
    assert one_at_a_time["ttft_growth"] == pytest.approx(2.5) and one_at_a_time["peak_in_flight"] == 1
    assert not one_at_a_time["oversaturated"] and one_at_a_time["saturation_reason"] is None
    overlapping = saturation(_timed(ttfts, overlap=True), queued=False)
    assert overlapping["peak_in_flight"] == 2
    assert overlapping["oversaturated"] and "TTFT grew 2.5x" in overlapping["saturation_reason"]
    flat = saturation(_timed([0.010] * 12, overlap=True), queued=False)
    assert not flat["oversaturated"]


def test_a_closed_loop_is_over_saturated_only_where_it_queued() -> None:
    """Issue 34: a closed loop at c = the cap was flagged on TTFT growth alone (the first wave's prefill from an idle
    server against the steady state's). In a closed loop arrivals cannot outpace the server: only a queue (c above
    the cap, more in flight than it runs) is over-saturation; the growth is still reported."""
    from specbench.load.integrity import saturation

    ttfts = [0.010] * 4 + [0.012] * 4 + [0.025] * 4
    at_cap = saturation(_timed(ttfts, overlap=True), queued=False, cap=2, closed_loop=True)
    assert at_cap["ttft_growth"] == pytest.approx(2.5) and not at_cap["oversaturated"]
    assert at_cap["saturation_reason"] is None
    above = saturation(_timed(ttfts, overlap=True), queued=True, cap=1, closed_loop=True)
    assert above["oversaturated"] and "queued" in above["saturation_reason"]
    assert "TTFT grew" not in above["saturation_reason"]
    paced = saturation(_timed(ttfts, overlap=True), queued=False, cap=2, closed_loop=False)
    assert paced["oversaturated"]  # a request-rate run: arrivals can outpace the server
