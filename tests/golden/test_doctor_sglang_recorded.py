"""Real SGLang GPU boots recorded by tools/gpu/boot_one.sh (tests/data/sglang-<version>/*.log): what the doctor reads
from the log must agree with the recorder's header (package version, final status) and with what the running server
reported about itself (`GET /get_server_info`, written at the end of the file)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from paths import DATA
from specbench.doctor.doctor import diagnose_text

RECORDED = sorted(DATA.glob("sglang-*/*.log"))


def _server_info(text: str) -> dict[str, Any] | None:
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("# GET /get_server_info"):
            body = " ".join(ln[1:].strip() for ln in lines[i + 1:] if ln.startswith("#   "))
            m = re.search(r"\{.*\}", body)
            try:
                return json.loads(m.group(0)) if m else None
            except json.JSONDecodeError:
                return None
    return None


def _info_value(info: dict[str, Any], key: str) -> Any:
    """The scheduler's effective value (internal_states). Top-level keys are the requested server args, which can
    differ (sgl-project/sglang#38846: 32 requested, 9 effective), so they are not used."""
    for state in info.get("internal_states") or []:
        if isinstance(state, dict) and key in state:
            return state[key]
    return None


@pytest.mark.parametrize("path", RECORDED, ids=[f"{p.parent.name}/{p.name}" for p in RECORDED])
def test_recorded_sglang_boot(path: Path):
    text = path.read_text(errors="replace")
    d = diagnose_text(text, with_fixes=False)
    f = d.facts
    assert f.engine == "sglang"
    version = re.search(r"^# sglang (\S+)", text, re.M)
    if version:
        assert f.engine_version == version.group(1)
    status = re.search(r"status=(\w+) after", text)
    if status and status.group(1) == "ready":
        assert d.status == "started"
        assert f.avail_before_load_gib is not None and f.weights_gib is not None and f.kv_tokens is not None
    elif status and status.group(1) == "exited":
        assert d.status == "failed" and d.failure is not None
    info = _server_info(text)
    if info:
        # internal_states repeats the requested server args; the scheduler's own numbers have their own keys
        for fact, key in (("max_running_requests", "effective_max_running_requests_per_dp"),
                          ("max_total_num_tokens", "max_total_num_tokens")):
            want = _info_value(info, key)
            if isinstance(want, int):
                assert getattr(f, fact) == want, key


V0512 = DATA / "sglang-0.5.12.post1"
V0515 = DATA / "sglang-0.5.15.post1"


def _need(*paths: Path) -> None:
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        pytest.skip(f"recorded boot not in this checkout: {missing}")


def test_incident_reproduced_on_a_real_engine_is_diffed():
    """The incident on a real SGLang 0.5.12.post1 H200 boot (mem fraction 0.507 to land on K = 2): the diff names
    max_running_requests 4 -> 8 and checks the reservation against the two logs' own pool sizes."""
    from specbench.doctor.diff import diff
    from specbench.doctor.doctor import DoctorOptions, diagnose_file

    ok, bad = V0512 / "q36_27b_mrr4_mf507_df16_eb05.log", V0512 / "q36_27b_mrr8_mf507_df16_eb05.log"
    _need(ok, bad)
    opts = DoctorOptions(with_fixes=False, model_config="Qwen/Qwen3.6-27B")  # the log's model path is device-local
    left, right = diagnose_file(ok, opts), diagnose_file(bad, opts)
    assert left.status == "started" and left.failure is None  # the recorder's SIGTERM stop is not a failure
    assert right.status == "failed" and right.failure is not None
    assert right.failure.message == "AssertionError: max_running_request is zero"
    r = diff(left, right)
    assert r.arg_changes == {"max_running_requests": [4, 8]}
    assert r.explaining is not None and r.explaining.arg == "max_running_requests"
    assert ("max_running_requests 4 -> 8 grew the speculative intermediate state reservation by 4 x 16 draft "
            "tokens x 146.8 MiB = 9.18 GiB") in r.explanation
    assert "max_mamba_cache_size 23 -> 2, KV tokens 86,871 -> 9,914" in r.explanation
    assert r.observed_pool_change_gib == pytest.approx(-9.18, abs=0.05)


def test_incident_without_the_model_config_estimates_p_from_the_log():
    from specbench.doctor.doctor import diagnose_file
    from specbench.engines.sglang import logrules as er

    ok = V0512 / "q36_27b_mrr4_mf507_df16_eb05.log"
    _need(ok)
    p = er.slot_size(diagnose_file(ok, with_fixes=False).facts)
    # (conv 0.07 + ssm 3.38) GiB / 24 slots = 147.2 MiB; the exact value is 146.8 MiB (printed sizes are rounded)
    assert p is not None and p.source.startswith("log:") and abs(p.mib - 146.81) < 0.5


def test_kv_capacity_message_that_is_really_the_mamba_cap():
    """SGLang 0.5.15 says 'reduced ... due to the available KV cache capacity' when the Mamba cap K // ρ bit."""
    from specbench.doctor.doctor import diagnose_file

    path = V0515 / "q36_27b_mrr8_df16_eb.log"
    _need(path)
    d = diagnose_file(path, with_fixes=False)
    assert d.facts.mrr_reduced_from == 8 and d.facts.max_running_requests == 7
    assert "the limit is the Mamba state: 39 slots // 5 per request" in d.explanation


def test_unsupported_backend_assertion():
    from specbench.doctor.doctor import diagnose_file

    path = V0515 / "nano30b_mrr8.log"
    _need(path)
    d = diagnose_file(path, with_fixes=False)
    assert d.status == "failed" and d.failure is not None and d.failure.kind == "exception"
    assert d.failure.message.startswith("AssertionError: NemotronHForCausalLM does not support triton attention")


def _shapes(text: str) -> set[str]:
    """Memory lines with numbers masked: the format, not the values."""
    from specbench.logs.normalize import normalize

    keys = ("Load weight begin", "Load weight end", "Mamba Cache is allocated", "KV Cache is allocated",
            "Memory pool end", "max_total_num_tokens=", "Using KV cache dtype", "max_running_request is zero")
    return {re.sub(r"\d+(?:\.\d+)?", "#", ln.text) for ln in normalize(text) if ln.text.startswith(keys)}


def test_incident_fixtures_are_in_the_real_0512_format():
    """tests/data/incident/*.log were written from the scenario's numbers; every memory line must have exactly the
    shape a real SGLang 0.5.12.post1 boot of the same model and launch prints."""
    real = [V0512 / "q36_27b_mrr4_mf507_df16_eb05.log", V0512 / "q36_27b_mrr8_mf507_df16_eb05.log"]
    _need(*real)
    real_shapes = set().union(*(_shapes(p.read_text()) for p in real))
    for name in ("working.log", "failing.log"):
        mine = _shapes((DATA / "incident" / name).read_text())
        assert mine and mine <= real_shapes, sorted(mine - real_shapes)


def test_mtp_draft_memory_returned_after_sizing():
    from specbench.doctor.doctor import diagnose_file

    path = V0515 / "q36_27b_mrr16_mf85_mtp.log"
    _need(path)
    d = diagnose_file(path, with_fixes=False)
    assert d.facts.draft_loaded_before_pools is True and d.facts.draft_weights_gib == 5.53
    assert any("4.60 GiB came back after the pools were sized" in n and "MTP" in n
               and "eagle_worker_v2.py::EagleDraftWorker.init_lm_head@0.5.15.post1" in n for n in d.notes)
    assert any("stopped on purpose" in n for n in d.notes) and d.failure is None


def test_run_logs_runtime_lines():
    """The H200 `specbench run` fixture: MTP server with dummy weights logs accept len 1.00 on every decode line."""
    from specbench.doctor.doctor import diagnose_file

    logs = sorted((DATA / "h200-run-sglang-0.5.15.post1").glob("*-boot1.log"))
    if not logs:
        pytest.skip("run fixture not in this checkout")
    spec = [diagnose_file(p, with_fixes=False) for p in logs]
    spec = [d for d in spec if d.facts.server_args.get("speculative_algorithm")]
    assert spec, "one of the two servers runs MTP"
    d = spec[0]
    assert d.status == "started" and d.facts.accept_lengths and set(d.facts.accept_lengths) == {1.0}
    assert d.facts.gen_throughputs and len(d.facts.gen_throughputs) == len(d.facts.accept_lengths)
    assert "draft tokens were (almost) never accepted" in d.explanation
