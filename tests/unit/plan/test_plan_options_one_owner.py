"""One set of plan options, one set of bounds (issue 38): `specbench plan`'s memory flags and a matrix's [plan] table
are checked by the same rule (contracts_inputs.py::plan_gib_problem); `gpu_mem_gib = 0` passed a matrix and was refused
by plan."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from specbench.contracts_inputs import PLAN_GIB_FIELDS, plan_gib_problem
from specbench.errors import UserError
from specbench.matrix.toml_load import load_matrix

MATRIX = """name = "m"
engine = "vllm"
command = ["vllm", "serve", "Qwen/Qwen3-8B"]
[plan]
gpu = "H100"
{field} = {value}
[[server.spec]]
label = "ar"
[client]
concurrency = [1]
"""


def _matrix_refuses(tmp_path: Path, field: str, value: str) -> bool:
    p = tmp_path / f"{field}.toml"
    p.write_text(MATRIX.format(field=field, value=value), encoding="utf-8")
    try:
        load_matrix(p)
    except UserError:
        return True
    return False


def _plan_refuses(field: str, value: str) -> bool:
    r = subprocess.run([sys.executable, "-m", "specbench", "plan", "--json", "--no-fixes",
                        f"--{field.replace('_', '-')}", value, "--", "vllm", "serve", "Qwen/Qwen3-8B"],
                       capture_output=True, text=True, timeout=120, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    return r.returncode == 2


@pytest.mark.parametrize("field", sorted(PLAN_GIB_FIELDS))
@pytest.mark.parametrize("value", ["0", "-1", "1e9", "80", "0.5"])
def test_the_matrix_and_plan_agree_on_every_memory_option(tmp_path: Path, field: str, value: str) -> None:
    want = plan_gib_problem(field, float(value)) is not None
    assert _matrix_refuses(tmp_path, field, value) == want
    if value in ("0", "80"):  # the CLI too, on the two values where the fields differ or pass (a process each)
        assert _plan_refuses(field, value) == want


def test_a_zero_gib_gpu_is_no_gpu_anywhere() -> None:
    assert plan_gib_problem("gpu_mem_gib", 0) is not None and plan_gib_problem("weights_gib", 0) is None
