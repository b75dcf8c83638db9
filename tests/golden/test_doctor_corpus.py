"""Issue #13: `doctor` on 46 real public excerpts (tests/data/doctor_corpus/index.json), the incident log with no
model config reachable, and `--diff` of logs without argument dumps."""

from __future__ import annotations

import json

import pytest

from paths import DATA
from specbench.doctor.diff import diff
from specbench.doctor.doctor import diagnose_file, diagnose_text
from specbench.logs.normalize import normalize

CORPUS = DATA / "doctor_corpus"
INDEX = json.loads((CORPUS / "index.json").read_text())
INC = DATA / "incident"

# index kind_hint -> the doctor's stable failure kind (failures.py documents them)
KIND = {
    "mamba_ping_pong": {"mamba_ping_pong"}, "max_model_len_exceeds_kv": {"vllm_max_model_len"},
    "no_memory_for_cache_blocks": {"vllm_no_kv_memory"}, "cuda_oom_during_sampler_warmup": {"cuda_oom_sampler_warmup"},
    "cuda_oom_during_weight_load": {"cuda_oom_load"}, "hybrid_kv_cache_manager_disabled": {"vllm_hybrid_kv_unify_failed"},
    "unsupported_architecture": {"unsupported_architecture"}, "device_init_failed": {"device_error"},
    "free_memory_below_utilization": {"vllm_free_memory_below_utilization"},
    "hip_oom": {"cuda_oom", "cuda_oom_load", "cuda_graph_oom"}, "tp_not_divisible": {"tp_not_divisible"},
    "cuda_graph_capture_failed": {"cuda_graph_capture_failed", "cuda_graph_oom"},
    "cuda_oom": {"cuda_oom", "cuda_oom_load"}, "kv_smaller_than_context": {"exception"},
    "cuda_oom_during_graph_capture": {"cuda_graph_oom"}, "kv_cache_page_size_mismatch": {"kv_cache_page_size_mismatch"},
    "hybrid_kv_unsupported_by_plugin": {"hybrid_kv_unsupported"},
}


def _clean(line: str) -> str:
    return " ".join(ln.text for ln in normalize(line))


@pytest.mark.parametrize("entry", INDEX, ids=[e["file"][:3] for e in INDEX])
def test_corpus_entry(entry: dict):
    d = diagnose_file(str(CORPUS / entry["file"]), with_fixes=False)
    j = d.to_json()
    want = entry["status"]
    if want == "capped":
        assert (j["status"], j["capped"]) == ("started", True), j["explanation"]
    elif want == "started":
        assert (j["status"], j["capped"]) == ("started", False), j["explanation"]
    else:
        assert j["status"] == want, j["explanation"]
    f = j["failure"]
    if want == "failed":
        assert f is not None
        if entry["wrapper"]:
            assert _clean(entry["wrapper"]) not in f["message"]  # the wrapper is context, never the cause
    if entry["root_cause"]:
        assert _clean(entry["root_cause"]) in f["message"]
        assert f["kind"] in KIND[entry["kind_hint"]], f
    for w in entry["warnings"]:
        got = [x for x in j["warnings"] if x["kind"] == w["kind"]]
        assert got, [x["kind"] for x in j["warnings"]]
        assert _clean(w["line"])[:60] in got[0]["message"]
        assert set(got[0]) >= {"kind", "message", "fixes"}


def test_corpus_count():
    assert len(INDEX) == 46


def test_cap_only_log_gives_the_warning_with_the_engines_fixes():
    j = diagnose_file(str(CORPUS / "001-sglang-mamba-cap-dgx-spark.log"), with_fixes=False).to_json()
    assert j["status"] == "started" and j["capped"] is True
    w = j["warnings"][0]
    assert "(max_mamba_cache_size=64, 5 state slots per request)" in w["message"]  # wrapped record joined
    flags = [next(iter(fx["change"])) for fx in w["fixes"]]
    assert flags[:3] == ["--mamba-full-memory-ratio", "--max-mamba-cache-size", "--mamba-ssm-dtype"]
    assert w["fixes"][2]["change"] == {"--mamba-ssm-dtype": "bfloat16"}


def test_vllm_caps_carry_the_engines_numbers():
    j = diagnose_file(str(CORPUS / "031-vllm-docker-ts-cudagraph-profiling-kv.log"), with_fixes=False).to_json()
    w = next(x for x in j["warnings"] if x["kind"] == "effective_gpu_memory_utilization_reduced")
    assert {"change": {"--gpu-memory-utilization": 0.9099}, "source": "engine",
            "why": w["fixes"][0]["why"]} == w["fixes"][0]
    j = diagnose_file(str(CORPUS / "003-vllm-max-model-len-exceeds-kv-3090.log"), with_fixes=False).to_json()
    w = next(x for x in j["warnings"] if x["kind"] == "kv_smaller_than_context")
    assert w["fixes"][0]["change"] == {"--max-model-len": 23780}  # 29000 x 0.82: what the KV cache holds


def test_text_output_says_started_but_capped():
    """A real cap (SGLang's Mamba cap) reads "started, but capped"; a routine padding line (issue 27) is shown as a
    note and never called a cap."""
    from io import StringIO

    from rich.console import Console

    from specbench.commands.doctor import render_diagnosis
    buf = StringIO()
    d = diagnose_file(str(CORPUS / "001-sglang-mamba-cap-dgx-spark.log"), with_fixes=False)
    render_diagnosis(d, "x.log", Console(file=buf, width=200))
    assert "started, but capped" in buf.getvalue() and "mamba_cap" in buf.getvalue()
    buf = StringIO()
    d = diagnose_file(str(CORPUS / "032-vllm-tp2-padding-layers-warning.log"), with_fixes=False)
    render_diagnosis(d, "x.log", Console(file=buf, width=200))
    assert "capped" not in buf.getvalue() and "kv_padding_layers" in buf.getvalue()


@pytest.mark.parametrize("model_path,resolved", [("/models/Qwen3.6-27B", True), ("/models/private-27b-x", False)])
def test_incident_failing_log_without_a_reachable_config(model_path: str, resolved: bool):
    """The incident's real model path is a local folder: by basename among the bundled configs (as plan), else the
    fixes come from the log's own numbers. Both give --max-running-requests 4 and the fraction that fits 8."""
    text = (INC / "failing.log").read_text().replace("model_path='Qwen/Qwen3.6-27B'", f"model_path='{model_path}'")
    assert model_path in text
    d = diagnose_text(text, gpu="RTX PRO 6000")
    assert d.status == "failed" and d.failure is not None and d.failure.kind == "max_running_requests_zero"
    assert "min(8, 2 // 4) = 0" in d.explanation and "8 × 16 draft tokens × 146.8 MiB = 18.35 GiB" in d.explanation
    assert d.fixes and d.fixes[0].change == {"--max-running-requests": 4}
    frac = next(fx for fx in d.fixes if "--mem-fraction-static" in fx.change)
    assert frac.result is not None and frac.result.max_running_requests == 8
    assert frac.result.extra["max_mamba_cache_size"] >= 32
    assert 0.85 <= frac.change["--mem-fraction-static"] <= 0.9
    notes = " ".join(d.notes)
    if resolved:
        assert "resolved by name to the bundled Qwen__Qwen3.6-27B-bf16-derived" in notes
    else:
        assert "log-derived" in notes and all(fx.extra["source"] == "log" for fx in d.fixes)


def test_diff_without_argument_dumps_says_it_cannot_compare():
    left = diagnose_file(str(CORPUS / "004-vllm-started-llama8b-3090-20k.log"), with_fixes=False)
    right = diagnose_file(str(CORPUS / "003-vllm-max-model-len-exceeds-kv-3090.log"), with_fixes=False)
    r = diff(left, right)
    assert "are the same" not in r.explanation
    assert "cannot be compared" in r.explanation and "left and the right logs have no argument dump" in r.explanation
    assert r.explanation.startswith("Left started, right failed")


def test_diff_never_calls_the_healthy_side_failed():
    ready = diagnose_text((INC / "working.log").read_text(), with_fixes=False)
    crashed = diagnose_text((INC / "failing.log").read_text(), with_fixes=False)
    for a, b in ((ready, crashed), (crashed, ready)):
        e = diff(a, b).explanation
        healthy = "Left" if a is ready else "right"
        assert f"{healthy} failed" not in e and f"{healthy} started" in e
    # a started server with a run-time error is "started (then at run time ...)", not failed
    runtime = diagnose_text((INC / "working.log").read_text()
                            + "\n[2026-11-20 15:00:00 TP0] Error in request: The input (33012 tokens) is longer than "
                              "the model's context length (32768 tokens).", with_fixes=False)
    e = diff(runtime, crashed).explanation
    assert "Left failed" not in e and "Left started (then at run time" in e


def test_plan_and_doctor_read_a_server_folder_path_alike():
    """A log's `/models/gpt-oss-20b` (a folder on the server, not here): the doctor and `plan` both take the bundled
    config by its basename (specs/resolve.py::_bundled_match), and plan says so in model_notes."""
    from specbench.contracts_inputs import PlanOptions
    from specbench.logs.launch_model import model_source
    from specbench.plan.api import plan_command

    assert model_source({"model_path": "/models/gpt-oss-20b"}) == "openai__gpt-oss-20b"
    p = plan_command("python -m sglang.launch_server --model-path /models/gpt-oss-20b",
                     PlanOptions(gpu="H200", fixes=False))
    assert p["status"] == "ok" and p["model_source"] == "bundled (offline fallback)"
    assert any("bundled config of openai/gpt-oss-20b" in n for n in p["model_notes"])
    assert model_source({"model_path": "/models/private-27b-x"}) is None
