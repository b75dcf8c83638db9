"""User mistakes end in one line on stderr and exit 2, never a traceback (real CLI subprocesses)."""

import signal
import subprocess
import sys

import pytest

CASES = [
    (["plan", "--engine-version", "x.y", "--", "sglang", "serve", "--model-path", "Qwen/Qwen3-8B"], "SGLang version"),
    (["plan", "--engine-version", "x", "--", "vllm", "serve", "Qwen/Qwen3-8B"], "vLLM version"),
    (["models", "build", "--out", "/proc/specbench-cannot-write-here"], "cannot write the models"),
    (["run", "/nonexistent/matrix.toml"], "no such matrix file"),
    (["report", "/nonexistent/store.db"], "no such results store"),
    (["doctor", "/nonexistent/server.log"], "not found"),
]


@pytest.mark.parametrize("argv,needle", CASES, ids=[" ".join(c[0][:2]) + f" {i}" for i, c in enumerate(CASES)])
def test_one_line_error(argv, needle):
    r = subprocess.run([sys.executable, "-m", "specbench", *argv], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    assert needle in r.stderr and len(r.stderr.strip().splitlines()) == 1


CTRL_C_IN_PLAN = """
import signal, sys
import specbench.plan.api as api
from specbench.cli import main
# the disposition this test relies on, whatever the parent left: a background job (`nohup make test &`) starts us
# with SIGINT ignored, and Python then installs no KeyboardInterrupt handler, so the raised SIGINT would do nothing
signal.signal(signal.SIGINT, signal.default_int_handler)
api.plan_result = lambda *a, **k: signal.raise_signal(signal.SIGINT)  # a real SIGINT while the command works
main(sys.argv[1:])
"""


def _start_with_sigint_ignored() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as `nohup make test &` starts pytest and so its children


@pytest.mark.parametrize("started", ["foreground", "background"])
@pytest.mark.parametrize("flag", [[], ["--json"]])
def test_ctrl_c_in_a_command_says_interrupted_and_exits_130(flag, started):
    """typer turns a KeyboardInterrupt inside a command into a silent exit 130; the user reads one line. The same
    whether the test runs in a terminal or as a background job that inherited SIGINT ignored."""
    pre = _start_with_sigint_ignored if started == "background" else None
    r = subprocess.run([sys.executable, "-c", CTRL_C_IN_PLAN, "plan", *flag, "--", "vllm", "serve", "Qwen/Qwen3-8B"],
                       capture_output=True, text=True, timeout=120, preexec_fn=pre)
    assert r.returncode == 130, r.stderr
    assert r.stderr.strip() == "specbench: interrupted" and r.stdout == ""
