"""cli.py's plain coercion of str/int/float/bool options gives what typer's own pydantic adapter gives.

The same values go through both runtime params of real typer options (int, float, str, bool, list[str]): the
converted value, or the error message, must match; then the real CLI turns a bad number into one error line.
"""

import json
import os
import subprocess
import sys

import pytest
import typer
from typer import _coercion
from typer.main import get_command

import specbench.cli  # noqa: F401 - installs the plain coercion

PLAN = ["--", "python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", "--tp", "1"]
VALUES = ["1", "-1", "0", "007", " 5 ", "1_000", "1__0", "_1", "1.5", "-0.0", ".5", "5.", "+3", "1e3", "1E-3", "1e400",
          "nan", "NaN", "inf", "-inf", "Infinity", "0x10", "abc", "", " ", "1,5", "１２", "٣", "五", "true", "no",
          "--5", "-", "\t5\n", "1_000.5_5", "1e1_0", "0_0", "1_", "infinityx", "nan(1)", "1j", "-nan", "+inf"]

LISTS = [(), ("a",), ("a", "b b", "１２"), ["x"], ("1", 2), (b"x",), ("1.5", "nan")]


def _probe_command():
    probe = typer.Typer(add_completion=False)

    @probe.command()
    def cmd(i: int | None = typer.Option(None, "--i"), f: float | None = typer.Option(None, "--f"),
            s: str | None = typer.Option(None, "--s"), b: bool = typer.Option(False, "--b"),
            r: float | None = typer.Option(None, "--r", min=0), names: list[str] | None = typer.Option(None, "--n"),
            nums: list[float] | None = typer.Option(None, "--x")) -> None:
        pass

    return get_command(probe)


def _outcome(runtime, value, param, ctx):
    try:
        got = runtime.coerce(value, param=param, ctx=ctx)
    except typer.BadParameter as exc:
        return "error", exc.format_message()
    return type(got).__name__, repr(got)


def test_the_plain_coercion_agrees_with_typers_adapter():
    cmd = _probe_command()
    ctx = cmd.make_context("cmd", [])
    plain_kinds = set()
    for param in cmd.params:
        param._runtime_param = None
        used = param.get_runtime_param()
        ref = _coercion.build_runtime_param(param.type_descriptor)
        if type(used).__name__ == "_PlainRuntimeParam":
            plain_kinds.add(param.name)
        for value in [*VALUES, *LISTS, True, False, None]:
            assert _outcome(used, value, param, ctx) == _outcome(ref, value, param, ctx), (param.name, value)
    # the plain path serves the plain annotations; a ranged option keeps typer's own
    assert plain_kinds == {"i", "f", "s", "b", "names"}


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "specbench", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "200"})


def test_a_number_option_that_is_no_number_is_one_error_naming_it():
    r = _cli("plan", "--gpu-mem-gib", "abc", *PLAN)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    said = [ln for ln in r.stderr.splitlines() if "Invalid value" in ln]
    assert len(said) == 1 and "'--gpu-mem-gib'" in said[0] and "valid number" in said[0], r.stderr


@pytest.mark.parametrize("value, gib", [("80", 80.0), (" 96.5 ", 96.5), ("1_00", 100.0)])
def test_a_number_option_is_read_as_a_float(value, gib):
    r = _cli("plan", "--json", "--gpu-mem-gib", value, *PLAN)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["gpu_total_gib"] == gib and out["gpu"] == f"custom {gib:g} GiB", out
