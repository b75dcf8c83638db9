"""Identity before numbers (issue 36 item 1): a target is never planned on a drafter's config, and a model that
cannot be resolved offline is refused in one line naming the nearest bundled families and what to pass."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from paths import ROOT
from specbench.specs.resolve import _bundled_match, nearest_bundled


def plan(tmp_path: Path, *cmd: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    return subprocess.run([sys.executable, "-m", "specbench", "plan", "--", *cmd], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env=env)


def test_a_plain_name_never_resolves_to_a_drafter_or_a_quantized_variant():
    # the only bundled name that extends it is the DFlash2 drafter: a plain name never takes it
    assert _bundled_match("Qwen/Qwen3.8-27B") is None
    assert _bundled_match("z-lab/Qwen3.8-27B-DFlash2") is not None  # asked by its own name, it is found
    assert _bundled_match("Qwen/Qwen3.6-27B") is not None  # the one longer plain name still resolves


def test_an_unresolvable_target_names_the_nearest_families_and_what_to_pass(tmp_path):
    r = plan(tmp_path, "vllm", "serve", "Qwen/Qwen3.8-27B")
    assert r.returncode != 0 and "Traceback" not in r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert "cannot find a config for 'Qwen/Qwen3.8-27B'" in line and "DFlash" not in line
    assert "nearest bundled: Qwen/Qwen3.5-27B" in line and "--model-config" in line and "HF_ENDPOINT" in line
    assert nearest_bundled("MiniMaxAI/MiniMax-M3")[:2] == ["MiniMaxAI/MiniMax-M2.7", "MiniMaxAI/MiniMax-M2.5"]


def test_a_drafter_named_as_the_target_is_refused(tmp_path):
    r = plan(tmp_path, "vllm", "serve", "z-lab/Qwen3.8-27B-DFlash2")
    assert r.returncode != 0 and "Traceback" not in r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert "resolves to a drafter's config (DFlash2DraftModel" in line and "--model-config" in line
