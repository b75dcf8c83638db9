"""The command table: every command is listed, and a command imports only what it needs (real CLI subprocesses).

Behaviour, not timing: `specbench plan` imports only the modules of PLAN_MAY_IMPORT (an allowlist: a new import on
the plan path fails here until it is added on purpose), never the Hub client, the report's matplotlib or the
runner's HTTP clients. The timings live in benchmarks/cli_latency.py.
"""

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from paths import DATA, ROOT
from specbench.cli import COMMANDS

ALL = ["plan", "doctor", "run", "report", "export", "compare", "models", "predict", "calibrate"]
PLAN = ["plan", "--", "python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", "--tp", "1"]
# Never on the plan path. pydantic neither: a valid config.json is checked without it (specs/config_fields.py) and
# plain str/float options are coerced without typer's pydantic adapters (cli.py::_install_plain_coercion).
HEAVY = ("matplotlib", "numpy", "httpx", "httpx2", "aiohttp", "jinja2", "tokenizers", "safetensors", "huggingface_hub",
         "pydantic", "pydantic_core", "typer._adapters",
         "specbench.report", "specbench.matrix", "specbench.models_gen", "specbench.load")

VLLM_PLAN = ["plan", "--json", "--", "vllm", "serve", "Qwen/Qwen3-8B", "--max-model-len", "32768"]
# What a plan may import besides the standard library and what the interpreter loads before any code runs
# (site hooks): the CLI framework (typer; rich renders the text plan) and packaging (engine versions); of specbench
# the planner's layers only (README "Where things are").
PLAN_MAY_IMPORT = ("typer", "shellingham", "annotated_doc", "rich", "packaging",
                   "specbench.cli", "specbench.commands.plan", "specbench.plan", "specbench.engines", "specbench.specs",
                   "specbench.logs", "specbench.contracts", "specbench.contracts_inputs",
                   "specbench.contracts_per_tp", "specbench.planfmt", "specbench.redact", "specbench.errors",
                   "specbench.scoped", "specbench.userfile")  # userfile: the one reader of a file the user names
PLAN_MAY_IMPORT_PACKAGES = ("specbench", "specbench.commands")  # the packages themselves (their __init__ is empty)
# ... and of the planner's layers not these: the runner's launchers and clients, the Hub client's module
PLAN_MUST_NOT_IMPORT = ("specbench.engines.vllm.launch", "specbench.engines.vllm.local", "specbench.engines.sglang.launch",
                        "specbench.engines.openai.server", "specbench.engines.prometheus", "huggingface_hub",
                        "typer._adapters")
# ... and of the standard library not these, which nothing of a plan needs: importlib.resources' readers (and
# zipfile through them; specs/resolve.py::bundled_dir reads its folder), rich's emoji table (commands/plan.py
# prints with emoji=False)
PLAN_MUST_NOT_IMPORT_STD = ("importlib.resources", "importlib.readers", "zipfile", "rich._emoji_codes")

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


def _startup_modules() -> set[str]:
    """What this interpreter has loaded before any code runs (site hooks such as setuptools' _distutils_hack)."""
    r = subprocess.run([sys.executable, "-c", "import sys, json; print(json.dumps(sorted(sys.modules)))"],
                       capture_output=True, text=True, timeout=60, check=True)
    return set(json.loads(r.stdout))


def _not_allowed(modules: list[str]) -> list[str]:
    start, std = _startup_modules(), set(sys.stdlib_module_names)
    std |= {m for m in modules if m.startswith("_sysconfigdata_")}  # sysconfig's per-platform data module

    def under(m: str, roots: tuple[str, ...]) -> bool:
        return any(m == r or m.startswith(r + ".") for r in roots)

    return [m for m in modules if m not in start and (under(m, PLAN_MUST_NOT_IMPORT_STD) or (
            m.split(".")[0] not in std and m not in PLAN_MAY_IMPORT_PACKAGES
            and (not under(m, PLAN_MAY_IMPORT) or under(m, PLAN_MUST_NOT_IMPORT))))]


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
    # one line, as every user mistake (issue 36: "`plna` gives two errors", a usage block and a boxed panel)
    assert r.stderr.splitlines() == [r.stderr.strip()] and r.stderr.startswith("specbench: error: "), r.stderr


@pytest.mark.parametrize("argv, said", [
    (["run", "--bogus", "m.toml"], "specbench run: No such option: --bogus"),
    (["report"], "specbench report: Missing argument"),
    (["models", "bild"], "No such command 'bild'. Did you mean 'build'?"),
    (["--bogus"], "No such option: --bogus"),
])
def test_a_usage_mistake_is_one_line_naming_it(argv, said):
    r = _cli(*argv)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.splitlines() == [r.stderr.strip()] and said in r.stderr and "--help'" in r.stderr, r.stderr


@pytest.mark.parametrize("argv", [PLAN, VLLM_PLAN], ids=["sglang", "vllm-json"])
def test_plan_imports_only_its_allowlist(tmp_path, argv):
    code, modules = _modules_after(tmp_path, argv)
    assert code == 0
    assert "specbench.commands.plan" in modules
    assert _not_allowed(modules) == []


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
    assert not any(m.startswith(("specbench.plan", "specbench.engines", "specbench.logs", "specbench.doctor")) for m in modules)


def test_doctor_coerces_its_options_without_pydantic(tmp_path):
    # its LOG argument is a list[str], served by cli.py's plain coercion like plan's str/float options
    log = str(DATA / "logs" / "journal-incident-restart.log")
    code, modules = _modules_after(tmp_path, ["doctor", log, "--json"])
    assert code == 0
    assert "specbench.commands.doctor" in modules
    assert not [m for m in modules if m.split(".")[0] in ("pydantic", "pydantic_core") or m == "typer._adapters"]


def test_predict_from_the_shipped_calibration_imports_no_fitter_and_no_http_client(tmp_path):
    """`predict` with a calibration file evaluates fitted constants: the fitter's numpy and the runner's HTTP client
    are never needed (they were ~0.3 s of its 1 s on a 2-core machine, benchmarks/RESULTS.md)."""
    matrix = str(ROOT / "examples" / "h100-sglang-qwen3-moe-eagle3.toml")
    code, modules = _modules_after(tmp_path, ["predict", matrix, "--json"])
    assert code == 0
    slow = [m for m in modules if m.split(".")[0] in ("numpy", "httpx")
            or m in ("specbench.predict.fit", "specbench.engines.httpclient")]
    assert slow == [], slow
