"""Every typo named (issue 36 items 4 and 5): an engine flag the release does not have is the engine's own start-up
failure, with the nearest flag of that release; specbench's own mistyped option is named with the nearest one; a
`--json` error is JSON on stdout; "H100 PCIe" is its own board; a log's measured free memory never moves to a GPU
of another size."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from paths import ROOT
from specbench.contracts_inputs import PlanOptions
from specbench.plan.api import plan_command
from specbench.predict.calibration import ceilings
from specbench.specs.gpu import find_gpu

LOG_22GIB = ROOT / "tests/data/doctor_corpus/issue27/120-vllm-free-memory-19-77-of-22-05.log"


def sb(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specbench", *argv], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)


@pytest.mark.parametrize("cmd,engine,typo,near", [
    ("python -m sglang.launch_server --model-path Qwen/Qwen3-8B --contxt-length 4096", "SGLang", "--contxt-length",
     "--context-length"),
    ("vllm serve Qwen/Qwen3-8B --max-modle-len 4096", "vLLM", "--max-modle-len", "--max-model-len"),
])
def test_an_unknown_engine_flag_fails_in_the_engines_words(cmd, engine, typo, near):
    out = plan_command(cmd.split(), PlanOptions(gpu="H200", fixes=True))
    assert out["status"] == "fails"
    assert f"{engine} " in out["error"] and "unrecognized arguments" in out["error"]
    assert f"{typo} (did you mean {near}?)" in out["error"]
    assert out["fixes"] == []  # no fix keeps a flag the parser refuses
    assert out["unknown_flags"] and out["unknown_flags"][0].startswith(typo)


def test_a_known_flag_still_starts():
    out = plan_command("vllm serve Qwen/Qwen3-8B --max-model-len 4096".split(), PlanOptions(gpu="H200", fixes=False))
    assert out["status"] != "fails" and not out["unknown_flags"]


def test_specbench_s_own_mistyped_option_is_named():
    r = sb("plan", "--modle-config", "x.json", "--", "vllm", "serve", "Qwen/Qwen3-8B")
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0
    assert "has no option --modle-config; did you mean --model-config?" in r.stderr


def test_a_json_error_is_json_on_stdout():
    r = sb("plan", "--json", "--gpu", "no-such-board", "--", "vllm", "serve", "Qwen/Qwen3-8B")
    assert r.returncode == 2
    doc = json.loads(r.stdout)
    assert doc["status"] == "error" and "unknown GPU 'no-such-board'" in doc["error"]
    # a --json inside the launch command is the engine's, not ours: no JSON answer for it
    r2 = sb("plan", "--gpu", "no-such-board", "--", "vllm", "serve", "Qwen/Qwen3-8B", "--json")
    assert r2.returncode == 2 and r2.stdout == ""


def test_h100_pcie_is_its_own_board():
    g = find_gpu("H100 PCIe")
    assert g.name == "H100 PCIe" and find_gpu("h100").name == "H100 80GB"
    pcie, sxm = ceilings("H100 PCIe"), ceilings("H100 80GB")
    assert pcie is not None and sxm is not None
    assert pcie.bytes_per_s < sxm.bytes_per_s and pcie.link_bytes_per_s < sxm.link_bytes_per_s


def test_from_log_never_moves_free_memory_to_another_gpu():
    r = sb("plan", "--from-log", str(LOG_22GIB), "--gpu", "H200", "--", "vllm", "serve", "Qwen/Qwen3-8B")
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0
    assert "22.05 GiB" in r.stderr and "140.40 GiB" in r.stderr
    ok = sb("plan", "--from-log", str(LOG_22GIB), "--json", "--", "vllm", "serve", "Qwen/Qwen3-8B")
    assert ok.returncode == 0, ok.stderr
    doc = json.loads(ok.stdout)
    assert doc["gpu"] == "custom 22.05 GiB"
    assert any("the log's GPU: 22.05 GiB" in n for n in doc["from_log"]["notes"])


def test_vllm_serve_with_model_flag_serves_it_whatever_stray_word_follows():
    """vLLM moves `--model X` to the front as the positional model (FlexibleArgumentParser.parse_args@0.32.0): a stray
    positional word (`/--served-model-name`, a broken line continuation) is an extra argument, never the model."""
    out = plan_command("vllm serve --model Qwen/Qwen3-8B /--served-model-name foo".split(),
                       PlanOptions(gpu="H200", fixes=False))
    assert out["model"] == "Qwen/Qwen3-8B" and "/--served-model-name" in out["unknown_flags"]
    assert out["status"] == "ok"  # not a flag: warned as unknown, not a parser failure of ours to invent
    plain = plan_command("vllm serve Qwen/Qwen3-8B".split(), PlanOptions(gpu="H200", fixes=False))
    assert plain["model"] == "Qwen/Qwen3-8B"
