"""Issue 27: no routine line is ever reported as a cap. Over every recorded log of both engines in tests/data
(the doctor corpora, the recorded boots of SGLang 0.5.12/0.5.15 and vLLM CPU 0.32.0, the H200 runs, the incident,
the raw excerpts of real-logs-dev.json), each warning the doctor calls a cap names the value it lowered, the flag
that asks for it, the value it was lowered to and why; and the kinds that are routine are never caps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from paths import DATA
from specbench.diagnosis_contract import DiagnosisSummary
from specbench.doctor.doctor import diagnose_file, diagnose_text

LOGS = sorted(DATA.rglob("*.log"))
RAW = [(c["id"], "\n".join(c["raw_log"])) for c in json.loads((DATA / "real-logs-dev.json").read_text())
       if c.get("raw_log")]
# vLLM / SGLang lines that lower nothing that was asked (engines/<engine>/caps.py says why for each)
ROUTINE = {"attention_block_size_overridden", "mamba_page_padding", "kv_padding_layers",
           "hybrid_kv_cache_manager_disabled", "graph_capture_headroom_low", "mrr_reset_for_speculative",
           "low_avail_mem_after_pool", "backend_overridden", "prefill_cuda_graph_disabled",
           "negative_profiled_kv_tokens"}


def _check(j: dict) -> int:
    back = DiagnosisSummary.from_json(j).to_json()  # the doctor's typed result and its JSON, key for key, in order
    assert back == j and [list(f) for f in back["fixes"]] == [list(f) for f in j["fixes"]]
    caps = 0
    for w in j["warnings"]:
        assert w["cap"] == (w["capped"] is not None), w
        if not w["cap"]:
            continue
        caps += 1
        c = w["capped"]
        assert w["kind"] not in ROUTINE, w
        assert c["value"] and c["flag"].startswith("--") and c["why"], w
        assert isinstance(c["to"], (int, float)) and c["to"] > 0, w  # a cap to 0 is a failure, not a cap
        if c["asked"] is not None:
            assert isinstance(c["asked"], (int, float)) and c["asked"] != c["to"], w
    if j["capped"]:
        assert j["status"] == "started" and caps, j
    return caps


def test_there_are_recorded_logs_of_both_engines():
    engines = {diagnose_file(p, with_fixes=False).facts.engine for p in LOGS}
    assert {"sglang", "vllm"} <= engines and len(LOGS) >= 100


@pytest.mark.parametrize("path", LOGS, ids=[str(p.relative_to(DATA)) for p in LOGS])
def test_every_cap_of_a_recorded_log_names_the_asked_and_the_lowered_value(path: Path):
    _check(diagnose_file(path, with_fixes=False).to_json())


@pytest.mark.parametrize("case", RAW, ids=[c[0] for c in RAW])
def test_every_cap_of_a_raw_excerpt_names_the_asked_and_the_lowered_value(case):
    _check(diagnose_text(case[1], with_fixes=False).to_json())


def test_the_caps_that_are_there_say_what_was_asked():
    """The real caps of the corpora: SGLang's Mamba cap with the dumped --max-running-requests, vLLM's CUDA-graph
    profiling with the asked and the equivalent utilization."""
    j = diagnose_file(DATA / "doctor_corpus" / "031-vllm-docker-ts-cudagraph-profiling-kv.log", with_fixes=False)
    c = next(w for w in j.to_json()["warnings"] if w["cap"])["capped"]
    assert c["flag"] == "--gpu-memory-utilization" and c["asked"] is not None and c["to"] < c["asked"]
    j = diagnose_file(DATA / "doctor_corpus" / "issue27" / "125-sglang-mamba-cap-9-of-32.log", with_fixes=False)
    c = next(w for w in j.to_json()["warnings"] if w["cap"])["capped"]
    assert (c["value"], c["to"]) == ("max_running_requests", 9) and "47 // 5 = 9" in c["why"]
    assert "lowered from the asked value (not in the log) to 9" in j.explanation
