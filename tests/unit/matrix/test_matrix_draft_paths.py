"""Drafter folders of a matrix: a relative path is read from the matrix file's folder and must exist; an absolute
path not on this machine (a matrix written for a GPU machine) is kept as written and said, never a load error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from specbench.errors import UserError
from specbench.matrix.toml_load import load_matrix

MATRIX = """\
engine = "sglang"
command = ["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B"]

[[server.spec]]
label = "ar"

[[server.spec]]
algorithm = "EAGLE3"
draft_model = "{draft}"

[client]
concurrency = [1]
prompt_tokens = 64
output_tokens = 16
"""


def _write(tmp_path: Path, draft: str) -> Path:
    p = tmp_path / "m.toml"
    p.write_text(MATRIX.format(draft=draft))
    return p


def test_a_relative_drafter_folder_is_read_from_the_matrix_folder(tmp_path: Path):
    (tmp_path / "drafts" / "e3").mkdir(parents=True)
    spec, _ = load_matrix(_write(tmp_path, "drafts/e3"))
    assert spec.server.spec[1].draft_model == str((tmp_path / "drafts" / "e3").resolve())
    assert spec.remote_paths == ()


def test_a_missing_relative_drafter_folder_is_a_one_line_error(tmp_path: Path):
    with pytest.raises(UserError, match=r"m.toml:\d+: server.spec\[1\].draft_model: .*no such folder"):
        load_matrix(_write(tmp_path, "./drafts/absent"))


def test_an_absolute_drafter_folder_of_another_machine_is_kept_and_said(tmp_path: Path):
    far = str(tmp_path / "on-the-gpu-box" / "eagle3")
    spec, _ = load_matrix(_write(tmp_path, far))
    assert spec.server.spec[1].draft_model == far
    assert len(spec.remote_paths) == 1 and far in spec.remote_paths[0]
    r = subprocess.run([sys.executable, "-m", "specbench", "run", "--dry-run", str(tmp_path / "m.toml")],
                       capture_output=True, text=True, timeout=120)
    # said before anything else; the planner then wants the drafter's config ([plan] draft_config), in one line
    first = r.stderr.splitlines()[0]
    assert first.startswith("warning:") and "not a folder on this machine" in first and far in first
    assert "Traceback" not in r.stderr
    assert r.returncode == 0 or "pass --draft-config PATH" in r.stderr
