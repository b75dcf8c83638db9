"""SGLang launch argv per version, the SPEC_V2 rule, client mode, and readiness/read-back against a real
server speaking SGLang's native endpoints (the instant server's /generate and /get_server_info)."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import httpx
import pytest

from proc_helpers import free_port
from specbench.engines.sglang import launch as sg
from specbench.engines.versions import parse_release
from specbench.matrix import lifecycle

BASE = ["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3.6-27B", "--tp", "2",
        "--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3", "--mamba-scheduler-strategy",
        "extra_buffer", "--port=1"]


def test_ar_argv_drops_speculative_flags_and_sets_the_axes() -> None:
    argv = sg.build_argv(BASE, {"tp": 4, "algorithm": "ar", "max_running_requests": 4, "mem_fraction_static": 0.75,
                                "context_length": 32768, "flags": {}}, "127.0.0.1", 30000, "0.5.12")
    assert not any(w.startswith("--speculative") for w in argv) and "EAGLE" not in argv
    assert "--tp" not in argv and argv[argv.index("--tp-size") + 1] == "4"
    assert argv[argv.index("--max-running-requests") + 1] == "4"
    assert argv[argv.index("--mem-fraction-static") + 1] == "0.75"
    assert argv[argv.index("--context-length") + 1] == "32768"
    assert argv[-4:] == ["--host", "127.0.0.1", "--port", "30000"] and "--port=1" not in argv


def test_speculative_argv_and_the_mamba_flag_spelled_per_version() -> None:
    settings = {"tp": 1, "algorithm": "DDTREE", "draft_model": "z-lab/d", "ddtree_budget": 16,
                "flags": {"--mamba-scheduler-strategy": "extra_buffer", "--disable-radix-cache": True,
                          "--cuda-graph-bs": ["1", "2", "4"]}}
    old = sg.build_argv(BASE, settings, "127.0.0.1", 30000, "0.5.12")
    new = sg.build_argv(BASE, settings, "127.0.0.1", 30000, "0.5.23")
    assert old[old.index("--speculative-algorithm") + 1] == "DDTREE"
    assert old[old.index("--speculative-ddtree-budget") + 1] == "16"
    assert old[old.index("--speculative-draft-model-path") + 1] == "z-lab/d"
    assert "--speculative-num-steps" in old  # from the base command, kept for a speculative server
    assert "--mamba-scheduler-strategy" in old and "--mamba-radix-cache-strategy" not in old
    assert "--mamba-radix-cache-strategy" in new and "--mamba-scheduler-strategy" not in new
    assert "--disable-radix-cache" in new
    i = new.index("--cuda-graph-bs")
    assert new[i + 1: i + 4] == ["1", "2", "4"]


def test_spec_v2_never_for_ar_and_gone_from_0_5_14() -> None:
    env, notes = sg.launch_env({"SGLANG_ENABLE_SPEC_V2": "1", "X": "y"}, "ar", "0.5.12")
    assert env == {"X": "y"} and "autoregressive" in notes[0]
    env, notes = sg.launch_env({"SGLANG_ENABLE_SPEC_V2": "1"}, "DFLASH", "0.5.12")
    assert env == {"SGLANG_ENABLE_SPEC_V2": "1"} and notes == []
    env, notes = sg.launch_env({"SGLANG_ENABLE_SPEC_V2": "1"}, "DFLASH", "0.5.17")
    assert env == {} and "0.5.14" in notes[0]
    assert sg.env_to_drop("ar") == ("SGLANG_ENABLE_SPEC_V2",) and sg.env_to_drop("DFLASH") == ()


def test_client_mode_and_versions() -> None:
    assert sg.client_mode(BASE) == "openai"
    assert sg.client_mode(BASE + ["--skip-tokenizer-init"]) == "generate-ids"
    assert parse_release("v0.5.17-cu130") == (0, 5, 17)
    assert parse_release("0.5.15.post1") == (0, 5, 15)
    assert parse_release(None) is None and parse_release("dev") is None


@pytest.fixture(scope="module")
def native_server(tmp_path_factory: pytest.TempPathFactory) -> str:
    port = free_port()
    proc = lifecycle.ServerProcess(
        argv=[sys.executable, "-m", "specbench.testing.instant_server", "--port", str(port), "--accept-length", "3"],
        env=dict(os.environ), log_path=Path(tmp_path_factory.mktemp("sg")) / "server.log").start()
    url = f"http://127.0.0.1:{port}"
    try:
        lifecycle.wait_ready(proc, url, ("/health",), lambda u, t: None, timeout_s=30)
        yield url
    finally:
        proc.stop(5)


def test_probe_and_read_back_on_native_endpoints(native_server: str) -> None:
    sg.probe(native_server, 10.0)
    sg.probe(native_server, 10.0, token_ids=True)
    info = sg.read_server_info(native_server)
    assert info is not None and info["source"] == "/get_server_info" and isinstance(info["info"], dict)


def test_probe_fails_without_a_server() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(httpx.HTTPError):  # nothing listens: the probe's HTTP call fails
        sg.probe(f"http://127.0.0.1:{port}", 2.0)
    assert sg.read_server_info(f"http://127.0.0.1:{port}", 2.0) is None


def test_unknown_version_keeps_the_users_spelling() -> None:
    argv = sg.build_argv(BASE, {"tp": 1, "algorithm": "ar", "flags": {}}, "127.0.0.1", 30000, None)
    assert "--mamba-scheduler-strategy" in argv
