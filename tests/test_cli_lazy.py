"""The command table: every command is listed, and a command imports only what it needs (real CLI subprocesses).

Behaviour, not timing: `specbench plan` must not load the report's matplotlib or the runner's HTTP clients. The
timings live in benchmarks/cli_latency.py.
"""

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from specbench.cli import COMMANDS

ALL = ["plan", "doctor", "run", "report", "export", "models", "predict", "calibrate"]
PLAN = ["plan", "--", "python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", "--tp", "1"]
# Never on the plan path. (pydantic is not listed: typer itself imports it to coerce option values.)
HEAVY = ("matplotlib", "numpy", "httpx", "aiohttp", "jinja2", "tokenizers", "safetensors",
         "specbench.report", "specbench.matrix", "specbench.models_gen", "specbench.load")

PROBE = textwrap.dedent("""
    import json, sys
    out, argv = sys.argv[1], sys.argv[2:]
    from specbench.cli import main
    try:
        main(argv)
        code = 0
    except SystemExit as e:
        code = e.code
    with open(out, "w") as f:
        json.dump({"code": code, "modules": sorted(sys.modules)}, f)
""")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "specbench", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "100"})


def _modules_after(tmp_path, argv: list[str]) -> tuple[int, list[str]]:
    out = tmp_path / "probe.json"
    r = subprocess.run([sys.executable, "-c", PROBE, str(out), *argv], capture_output=True, text=True, timeout=120)
    assert out.exists(), r.stderr
    data = json.loads(out.read_text())
    return data["code"], data["modules"]


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]


def test_the_table_names_every_command_in_help_order():
    assert list(COMMANDS) == ALL


def test_help_lists_every_command_in_order():
    r = _cli("--help")
    assert r.returncode == 0, r.stderr
    # a command's row starts right after the panel's border; wrapped help text is indented further
    listed = [m.group(1) for m in re.finditer(r"^│ (\w+)  ", r.stdout, re.M)]
    assert listed == ALL, r.stdout


@pytest.mark.parametrize("cmd", ALL + ["models build", "models list"])
def test_every_command_has_help(cmd):
    r = _cli(*cmd.split(), "--help")
    assert r.returncode == 0, r.stderr
    assert "Usage: specbench " + cmd in r.stdout


def test_an_unknown_command_is_a_usage_error_with_a_suggestion():
    r = _cli("plna")
    assert r.returncode == 2
    assert "No such command 'plna'" in r.stderr and "'plan'" in r.stderr


def test_plan_loads_no_report_runner_or_numeric_stack(tmp_path):
    code, modules = _modules_after(tmp_path, PLAN)
    assert code == 0
    assert "specbench.commands.plan" in modules
    assert _heavy(modules) == []
    # only the command that runs is imported
    assert not any(m in modules for m in ("specbench.commands.run", "specbench.commands.report",
                                          "specbench.commands.doctor", "specbench.commands.models"))


def test_help_loads_no_command_implementation(tmp_path):
    code, modules = _modules_after(tmp_path, ["--help"])
    assert code == 0
    assert _heavy(modules) == []
    assert not any(m.startswith(("specbench.plan", "specbench.engines", "specbench.logs")) for m in modules)
