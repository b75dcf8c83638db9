"""`plan --from-log LOG -- CMD` moves measured memory only within what transfers (issue 37, item 3): the same
engine, the same checkpoint, the log's GPU. Real logs: a real H200 SGLang boot (tests/data/sglang-0.5.15.post1) and a
public vLLM V0 boot on an RTX 3090 (tests/data/doctor_corpus/004, vllm#10517)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from paths import DATA

SGLANG_LOG = DATA / "sglang-0.5.15.post1" / "llama31_8b_mrr8.log"
VLLM_V0_LOG = DATA / "doctor_corpus" / "004-vllm-started-llama8b-3090-20k.log"


def _plan(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"), "PATH": "/usr/bin:/bin", "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "specbench", "plan", "--json", "--no-fixes", *args],
                          capture_output=True, text=True, timeout=300, env=env)


def _one_line(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2, r.stdout[-400:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("specbench: error: "), r.stderr
    return lines[0]


def test_a_vllm_log_never_moves_to_an_sglang_launch(tmp_path: Path) -> None:
    said = _one_line(_plan(tmp_path, "--from-log", str(VLLM_V0_LOG), "--", "python", "-m", "sglang.launch_server",
                           "--model-path", "meta-llama/Llama-3.1-8B-Instruct"))
    assert "vllm" in said and "sglang" in said


def test_weights_of_another_model_are_refused_naming_both_sizes(tmp_path: Path) -> None:
    # the V0 log names no model; its 14.99 GiB of weights are Llama-3.1-8B's, a quarter of Qwen3-32B's
    said = _one_line(_plan(tmp_path, "--from-log", str(VLLM_V0_LOG), "--", "vllm", "serve", "Qwen/Qwen3-32B"))
    assert "14.99 GiB" in said and "Qwen/Qwen3-32B" in said and "not a boot of CMD's model" in said


def test_a_log_whose_model_resolves_to_other_shapes_is_refused_naming_both(tmp_path: Path) -> None:
    log = tmp_path / "boot.log"  # the real boot, its dumped model path a name that resolves here
    log.write_text(SGLANG_LOG.read_text(encoding="utf-8").replace("/tmp/models/llama31_8b",
                                                                  "meta-llama/Llama-3.1-8B-Instruct"), encoding="utf-8")
    said = _one_line(_plan(tmp_path, "--from-log", str(log), "--", "python", "-m", "sglang.launch_server",
                           "--model-path", "Qwen/Qwen3-8B"))
    assert "meta-llama/Llama-3.1-8B-Instruct" in said and "Qwen/Qwen3-8B" in said
    same = _plan(tmp_path, "--from-log", str(log), "--", "python", "-m", "sglang.launch_server", "--model-path",
                 "meta-llama/Llama-3.1-8B-Instruct")
    assert same.returncode == 0, same.stderr
    assert json.loads(same.stdout)["from_log"]["measured"]["weights_gib"] == 15.02


def test_the_same_model_from_a_v0_log_is_planned_on_the_logs_gpu(tmp_path: Path) -> None:
    # "Memory profiling results: total_gpu_memory=23.58GiB ...": the plan is on that GPU, not the default H200
    r = _plan(tmp_path, "--from-log", str(VLLM_V0_LOG), "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct",
              "--max-model-len", "20000")
    assert r.returncode == 0, r.stderr
    p = json.loads(r.stdout)
    assert abs(p["budget"]["total_gib"] - 23.58) < 0.01, p["budget"]
    notes = " ".join(p["from_log"]["notes"])
    assert "23.58 GiB" in notes and "taken as CMD's meta-llama/Llama-3.1-8B-Instruct" in notes
