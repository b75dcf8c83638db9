"""The incident (../shared/scenario/), rebuilt as two SGLang 0.5.12-era logs, diagnosed and diffed through the real
CLI process; JSON checked against the contract of ARCHITECTURE.md."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from paths import DATA
from specbench.doctor.diff import diff
from specbench.doctor.doctor import diagnose_file
from specbench.doctor.replan import facts_for_plan

INC = DATA / "incident"
WORKING, FAILING = str(INC / "working.log"), str(INC / "failing.log")
CONTRACT_FACTS = ("avail_before_load_gib", "weights_gib", "draft_weights_gib", "max_mamba_cache_size",
                  "conv_state_gib", "ssm_state_gib", "intermediate_ssm_state_gib", "kv_tokens", "k_size_gib",
                  "v_size_gib", "max_running_requests", "context_len", "server_args")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "160"}  # rich wraps tables to the terminal; pin it
    return subprocess.run([sys.executable, "-m", "specbench", "doctor", *args], capture_output=True, text=True,
                          timeout=300, env=env)


@pytest.fixture(scope="module")
def failing_json() -> dict:
    r = cli(FAILING, "--json", "--gpu", "RTX PRO 6000", "--claimed-quant", "nvfp4")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def diff_json() -> dict:
    r = cli("--diff", WORKING, FAILING, "--json", "--no-fixes")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_failing_log_contract(failing_json: dict):
    j = failing_json
    assert j["status"] == "failed"
    assert j["failure"] == {"kind": "max_running_requests_zero", "message": "AssertionError: max_running_request is zero",
                            # issue #13: the wrapper around the root cause is kept as context, never as the cause
                            "wrapper": "Scheduler hit an exception: Traceback (most recent call last):"}
    f = j["facts"]
    for key in CONTRACT_FACTS:
        assert key in f
    assert (f["avail_before_load_gib"], f["weights_gib"], f["draft_weights_gib"]) == (94.24, 51.05, None)
    assert (f["max_mamba_cache_size"], f["conv_state_gib"], f["ssm_state_gib"], f["intermediate_ssm_state_gib"]) == \
        (2, 0.01, 0.42, 2.25)
    assert (f["kv_tokens"], f["k_size_gib"], f["v_size_gib"]) == (11893, 0.36, 0.36)
    assert f["server_args"]["max_running_requests"] == 8
    assert f["max_running_requests"] == 0  # what the assertion says the engine ended with
    assert isinstance(j["explanation"], str)
    assert "8 × 16 draft tokens × 146.8 MiB = 18.35 GiB" in j["explanation"]
    assert "min(8, 2 // 4) = 0" in j["explanation"]
    assert isinstance(j["fixes"], list)


def test_failing_log_fixes_come_from_the_planner_with_measured_numbers(failing_json: dict):
    fixes = failing_json["fixes"]
    assert fixes, failing_json["notes"]
    assert fixes[0]["change"] == {"--max-running-requests": 4}
    res = fixes[0]["result"]
    assert res["status"] == "ok" and res["max_mamba_cache_size"] == 24
    assert res["weights_gib"] == 51.05  # the log's number, not the model estimate
    assert failing_json["plan"]["avail_before_load_gib"] == 94.24


def test_claimed_nvfp4_is_flagged(failing_json: dict):
    notes = " ".join(failing_json["notes"])
    assert "Inconsistent weights" in notes and "51.05 GiB" in notes and "nvfp4" in notes


def test_working_log_budget():
    d = diagnose_file(WORKING, with_fixes=False)
    assert d.status == "started" and d.failure is None
    budget = {r.key: r.gib for r in d.budget}
    assert budget == {"free_before_load": 94.24, "weights": 51.05, "draft_weights": 3.30, "rest": 43.19,
                      "slack": 23.56, "mamba": 15.06, "kv": 6.98, "pool_end": 17.86, "graphs": 0.58,
                      "free_end": 17.28}
    assert "Started fine: 87,061 KV tokens, 24 Mamba slots, up to 4 running requests" in d.explanation
    assert "4 × 16 draft tokens × 146.8 MiB = 9.18 GiB now; each request more costs 2.29 GiB" in d.explanation
    # 17.28 free - 1.5 MB x 8192 prefill tokens (12.0 GiB) = 5.3 GiB unused by design
    assert "about 5.3 GiB more could go to the Mamba/KV pools" in d.explanation
    # no claim from the log itself (quantization=None, bf16 path): no weight warning
    assert not any("Inconsistent" in n for n in d.notes)


def test_diff_contract_and_cause(diff_json: dict):
    j = diff_json
    assert set(("left", "right", "arg_changes", "explanation")) <= set(j)
    assert j["arg_changes"] == {"--max-running-requests": [4, 8]}  # flag spelling, as in the planner's fixes
    assert j["left"]["status"] == "started" and j["right"]["status"] == "failed"
    e = j["explanation"]
    assert ("max_running_requests 4 -> 8 grew the speculative intermediate state reservation by "
            "4 x 16 draft tokens x 146.8 MiB") in e
    assert "starved the Mamba and KV pools: max_mamba_cache_size 24 -> 2, KV tokens 87,061 -> 11,893" in e
    assert j["explained_by"] == "--max-running-requests"
    # the check is against the logs' own pool sizes, independent of the formula
    assert j["observed_pool_change_gib"] == pytest.approx(-9.18, abs=0.05)
    assert j["ignored_arg_changes"] == ["--random-seed"]


def test_diff_with_no_explaining_change_says_so():
    d = diagnose_file(WORKING, with_fixes=False)
    r = diff(d, d)
    assert r.arg_changes == {} and r.explaining is None
    assert "The server arguments are the same" in r.explanation


def test_human_output_has_tables():
    r = cli("--diff", WORKING, FAILING, "--gpu", "RTX PRO 6000")
    assert r.returncode == 0, r.stderr
    assert "budgets side by side" in r.stdout and "max_running_requests" in r.stdout
    assert "fixes for" in r.stdout and "--max-running-requests 4" in r.stdout
    r = cli(FAILING, "--no-fixes")
    assert r.returncode == 0 and "memory budget" in r.stdout and "max_running_requests_zero" in r.stdout


def test_facts_for_plan():
    got = facts_for_plan(FAILING)
    assert (got["avail_before_load_gib"], got["weights_gib"], got["draft_weights_gib"]) == (94.24, 51.05, None)
    assert got["engine"] == "sglang" and got["engine_version"] == "0.5.12"
    argv = got["argv"]
    assert argv[:3] == ["python", "-m", "sglang.launch_server"]
    pairs = dict(zip(argv[3::2], argv[4::2]))
    assert pairs["--max-running-requests"] == "8" and pairs["--speculative-num-draft-tokens"] == "16"
    assert pairs["--mamba-scheduler-strategy"] == "extra_buffer"


@pytest.mark.parametrize("setup,expect", [
    ("missing", "specbench: error: log file not found"),
    ("folder", "is a folder"),
])
def test_bad_paths_give_one_line(tmp_path: Path, setup: str, expect: str):
    target = tmp_path / "nope.log" if setup == "missing" else tmp_path
    r = cli(str(target))
    assert r.returncode == 2
    assert r.stderr.startswith("specbench: error: ") and expect in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert "Traceback" not in r.stderr


def test_binary_and_empty_files_are_unknown(tmp_path: Path):
    b = tmp_path / "core.bin"
    b.write_bytes(bytes(range(256)) * 20)
    e = tmp_path / "empty.log"
    e.write_text("")
    for path, words in ((b, "not a text log"), (e, "empty")):
        r = cli(str(path), "--json")
        assert r.returncode == 0 and "Traceback" not in r.stderr
        j = json.loads(r.stdout)
        assert j["status"] == "unknown" and j["failure"] is None and words in j["explanation"]


def test_diff_needs_two_logs():
    r = cli("--diff", WORKING)
    assert r.returncode == 2 and "exactly two logs" in r.stderr


def test_vllm_diff_names_the_utilization_change():
    def boot(u: float, kv: float) -> str:
        return "\n".join([
            f"(APIServer pid=1) INFO 11-30 02:28:48 [utils.py:1] non-default args: {{'model': 'Qwen/Qwen3-8B', "
            f"'gpu_memory_utilization': {u}, 'port': {8000 + int(u * 100)}}}",
            f"(EngineCore_DP0 pid=2) INFO 11-30 02:29:40 [gpu_worker.py:1] Free memory on device (78.66/79.19 GiB) on "
            f"startup. Desired GPU memory utilization is ({u}, {u * 79.19:.2f} GiB). Actual usage is 15.52 GiB for "
            f"consumed memory (weights + non-torch), 4.12 GiB for peak activation, and 0.55 GiB for CUDAGraph memory. "
            f"Current kv cache memory in use is {kv} GiB.",
        ])
    from specbench.doctor.doctor import diagnose_text
    left = diagnose_text(boot(0.9, 51.63), with_fixes=False)
    right = diagnose_text(boot(0.8, 43.71), with_fixes=False)
    r = diff(left, right)
    assert r.arg_changes == {"gpu_memory_utilization": [0.9, 0.8]}
    assert r.noise_changes == ("port",)
    assert r.observed_pool_change_gib == -7.92
    assert r.explaining is not None and r.explaining.arg == "gpu_memory_utilization"
    assert "moves vLLM's budget by 7.92 GiB" in r.explanation


def test_journalctl_dump_of_a_restarting_service():
    """Two boots in one journal, prefixes and colours on every line: the doctor reads the last (failing) boot."""
    d = diagnose_file(str(DATA / "logs" / "journal-incident-restart.log"), with_fixes=False)
    assert d.status == "failed" and d.failure is not None
    assert d.failure.message == "AssertionError: max_running_request is zero"
    assert (d.facts.boots, d.facts.max_mamba_cache_size, d.facts.kv_tokens) == (2, 2, 11893)
    assert d.facts.server_args["max_running_requests"] == 8
    assert any("2 boots" in n for n in d.notes)


def test_kv_dtype_inconsistency_is_flagged():
    """The working log relaunched 'with fp8 KV' but still printing bf16 sizes: K = 16·(N+1)·4·256·itemsize."""
    from specbench.doctor.doctor import diagnose_text
    text = (INC / "working.log").read_text().replace("kv_cache_dtype='auto'", "kv_cache_dtype='fp8_e4m3'")
    notes = " ".join(diagnose_text(text, with_fixes=False).notes)
    assert "K size 2.66 GiB for 87,061 tokens is a bf16/fp16 KV cache" in notes and "fp8_e4m3" in notes
    clean = diagnose_text((INC / "working.log").read_text(), with_fixes=False)
    assert not any("Inconsistent KV" in n for n in clean.notes)


def test_memory_in_use_before_load_is_flagged():
    from specbench.doctor.doctor import diagnose_text
    text = (INC / "failing.log").read_text().replace("Load weight begin. avail mem=94.24 GB",
                                                     "Load weight begin. avail mem=60.41 GB")
    notes = " ".join(diagnose_text(text, gpu="RTX PRO 6000", with_fixes=False).notes)
    assert "35.18 GiB of the 95.59 GiB RTX PRO 6000 were already in use before the weights loaded" in notes
    clean = diagnose_text((INC / "failing.log").read_text(), gpu="RTX PRO 6000", with_fixes=False)
    assert not any("already in use" in n for n in clean.notes)  # 1.35 GiB: CUDA context and NCCL only


def test_diff_in_reverse_order():
    r = diff(diagnose_file(FAILING, with_fixes=False), diagnose_file(WORKING, with_fixes=False))
    assert r.arg_changes == {"max_running_requests": [8, 4]}
    assert r.explaining is not None and r.explaining.arg == "max_running_requests"
    assert r.observed_pool_change_gib == pytest.approx(9.18, abs=0.05)
    assert "shrank the speculative intermediate state reservation by 4 x 16 draft tokens x 146.8 MiB" in r.explanation
    assert "On the left, 2 Mamba slots with 4 slots per request" in r.explanation


def test_facts_for_plan_without_an_argument_dump(tmp_path: Path):
    from specbench.errors import UserError
    log = tmp_path / "excerpt.log"
    log.write_text("[2026-02-01 00:05:02 TP0] Load weight begin. avail mem=15.24 GB\n")
    with pytest.raises(UserError, match="no argument dump"):
        facts_for_plan(log)
    with pytest.raises(UserError, match="not found"):
        facts_for_plan(tmp_path / "missing.log")


def test_scratch_rule_follows_the_printed_version():
    """<= 0.5.12 takes p·mrr·D before the split; 0.5.13+ solves jointly (research §9). Version line beats arg names."""
    from dataclasses import replace

    from specbench.doctor.reading import log_reader
    from specbench.engines.sglang import logrules as er
    f = log_reader().facts_of_text((INC / "working.log").read_text())
    assert f.engine_version is None and er.scratch_before_split(f)  # from the argument names
    assert er.scratch_before_split(replace(f, engine_version="0.5.12.post1"))
    assert not er.scratch_before_split(replace(f, engine_version="0.5.13"))
    assert not er.scratch_before_split(replace(f, server_args={"mamba_radix_cache_strategy": "extra_buffer"}))
