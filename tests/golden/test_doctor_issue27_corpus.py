"""Issue 27: `doctor` on the 32 public excerpts of tests/data/doctor_corpus/issue27/ (each with its URL, expected
status, failure kind and fix in index.json): false caps, failures read as starts, host OOM kills, one-line budgets,
fixes from the log's own numbers, multi-rank and ROCm output, start-ups cut short."""

from __future__ import annotations

import json

import pytest

from paths import DATA
from specbench.doctor.doctor import diagnose_file

CORPUS = DATA / "doctor_corpus" / "issue27"
INDEX = json.loads((CORPUS / "index.json").read_text())


def _status(j: dict) -> str:
    return "capped" if j["status"] == "started" and j["capped"] else j["status"]


def _has_fix(want, fixes: list[dict]) -> bool:
    if isinstance(want, str):
        return any(fx.get("kind") == want for fx in fixes)
    return any(all(k in fx["change"] and (v is None or fx["change"][k] == v) for k, v in want.items())
               for fx in fixes)


def test_the_corpus_has_at_least_30_public_excerpts_with_their_source():
    assert len(INDEX) >= 30
    assert all(e["url"].startswith("https://github.com/") and (CORPUS / e["file"]).is_file() for e in INDEX)
    classes = {e["class"] for e in INDEX}
    assert {"false_cap", "one_line_budget", "max_seq_len", "other_process", "host_oom", "cap", "multi_rank",
            "cut_start", "rocm"} <= classes


@pytest.mark.parametrize("entry", INDEX, ids=[e["file"][:3] for e in INDEX])
def test_excerpt(entry: dict):
    j = diagnose_file(CORPUS / entry["file"], with_fixes=True).to_json()
    assert _status(j) == entry["status"], j["explanation"]
    assert (j["failure"] or {}).get("kind") == entry["failure"], j["failure"]
    if entry["status"] != "capped":
        assert not any(w["cap"] for w in j["warnings"]), j["warnings"]
    fixes = j["fixes"] + [fx for w in j["warnings"] if w["cap"] for fx in w["fixes"]]
    if entry["fix"] is not None:
        assert _has_fix(entry["fix"], fixes), fixes
    if entry["status"] in ("started", "unknown"):
        assert j["fixes"] == [], j["fixes"]  # no "nearby configuration" for a healthy or unfinished start
    for key, value in entry["numbers"].items():
        if key in j["facts"] and j["facts"][key] is not None:
            assert j["facts"][key] == value, (key, j["facts"][key])


def test_one_line_budget_is_read_and_said():
    j = diagnose_file(CORPUS / "109-vllm-worker-tp0-available-kv-only.log").to_json()
    assert j["engine"] == "vllm" and j["facts"]["available_kv_gib"] == 10.55
    assert "10.55 GiB" in j["explanation"]


def test_a_fix_from_the_engines_count_starts():
    """--max-model-len B is what the KV cache holds by the engine's own count (V0), or its estimate (V1)."""
    j = diagnose_file(CORPUS / "111-vllm-v0-max-seq-len-4096-kv-1216.log").to_json()
    assert j["fixes"][0]["change"] == {"--max-model-len": 1216} and j["fixes"][0]["source"] == "engine"
    j = diagnose_file(CORPUS / "119-vllm-v1-dgx-spark-max-seq-len-estimate.log").to_json()
    assert j["fixes"][0]["change"] == {"--max-model-len": 190272}


def test_another_process_on_the_gpu_is_said_and_freeing_it_comes_first():
    j = diagnose_file(CORPUS / "121-vllm-xpu-free-memory-0-22-of-30-3.log").to_json()
    assert j["fixes"][0]["kind"] == "free_gpu" and "30.08 of the 30.30 GiB" in j["fixes"][0]["why"]
    assert any("already in use" in n for n in j["notes"]), j["notes"]
    j = diagnose_file(CORPUS / "120-vllm-free-memory-19-77-of-22-05.log").to_json()
    assert j["fixes"][0]["change"] == {"--gpu-memory-utilization": 0.89}
    assert 0.89 * 22.05 < 19.77  # request_memory: total x utilization must fit in the free memory


def test_host_oom_kill_names_the_host_and_the_memory():
    j = diagnose_file(CORPUS / "122-host-dmesg-oom-kill-engine-core-cicc.log").to_json()
    assert j["status"] == "failed" and j["failure"]["kind"] == "host_oom_killed"
    fx = j["fixes"][0]
    assert fx["kind"] == "host_ram" and fx["result"]["host_ram_needed_gib"] == pytest.approx(2111980 / 2**20, 0.01)
    assert "host" in j["explanation"].lower()
