"""Shared helpers for the tests that boot the real local engine (vLLM's CPU build).

Start and stop go through `specbench.matrix.lifecycle.ServerProcess` (own process group, log to a file,
SIGTERM then SIGKILL of the group), the same code the runner uses, instead of a Popen/killpg copy per test module.
"""

from __future__ import annotations

import functools
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from proc_helpers import free_port  # noqa: F401  (re-exported for the engine tests)
from specbench.engines.vllm import cpu as vllm_cpu
from specbench.engines.vllm import local as vl
from specbench.matrix.lifecycle import ServerProcess


def engine_venv_or_skip() -> Path:
    """The engine venv; skip without it, except under CI, where `make test` must have installed it."""
    venv = vl.engine_venv()
    if not vl.engine_installed(venv):
        msg = f"vLLM CPU engine venv not installed at {venv} (make engine)"
        if os.environ.get("CI"):
            pytest.fail(msg + " - under CI the engine must be installed")
        pytest.skip(msg)
    return venv


def models_dir(tmp_path_factory: pytest.TempPathFactory, names: tuple[str, ...] | None = None) -> Path:
    """$SPECBENCH_MODELS (as `make test` sets it) or a fresh folder; the tiny models built there if missing."""
    from specbench.models_gen import build_all

    env_dir = os.environ.get("SPECBENCH_MODELS")
    folder = Path(env_dir) if env_dir else tmp_path_factory.mktemp("models")
    build_all(folder, names=names) if names else build_all(folder)  # keeps complete, up-to-date folders
    return folder


@functools.cache
def _engine_cpu(python: str, env: tuple[tuple[str, str], ...]) -> tuple[bool, bool]:
    code = "import torch.cpu as c; print(int(c._is_avx512_bf16_supported()), int(c._is_amx_tile_supported()))"
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, env=dict(env), check=True).stdout
    bf16, amx = out.split()
    return bf16 == "1", amx == "1"


def engine_cpu(cmd: vl.LaunchCommand) -> tuple[bool, bool]:
    """(AVX512-BF16, AMX) as the engine's own torch answers vLLM (vllm/platforms/cpu.py::CpuPlatform.
    check_and_update_config@0.32.0 asks torch.cpu._is_avx512_bf16_supported / _is_amx_tile_supported), under the
    environment the engine gets: the machine this test runs on."""
    python = str(Path(cmd.argv[0]).with_name("python")) if "/bin/" in cmd.argv[0] else "python"
    return _engine_cpu(python, tuple(sorted(cmd.env.items())))


def plan_words(cmd: vl.LaunchCommand) -> list[str]:
    """The launch as a user would paste it: the variables specbench set, then the argv; led by the CPU pins of
    the machine the engine runs on (engine_cpu), so the plan is of this machine, whatever the tests pin."""
    bf16, amx = engine_cpu(cmd)
    pins = [f"{vllm_cpu.AVX512_BF16_ENV}={int(bf16)}", f"{vllm_cpu.AMX_ENV}={int(amx)}"]
    return pins + [f"{k}={v}" for k, v in sorted(cmd.env_overrides.items())] + list(cmd.argv)


@contextmanager
def running(cfg: vl.LocalServerConfig, venv: Path, log_path: Path) -> Iterator[ServerProcess]:
    """Start the engine for `cfg`; always stop its whole process group on the way out."""
    cmd = vl.launch_command(cfg, venv)
    proc = ServerProcess(list(cmd.argv), dict(cmd.env), log_path).start()
    try:
        yield proc
    finally:
        proc.stop(grace_s=30)


def wait_ready(proc: ServerProcess, cfg: vl.LocalServerConfig, timeout_s: float = 300) -> vl.ReadyInfo:
    """Health, then one real generation; a test failure carrying the whole log when it never gets there."""
    try:
        return vl.wait_until_ready(cfg.base_url, cfg.served_name, timeout_s=timeout_s, is_alive=proc.alive)
    except vl.EngineNotReady as exc:
        pytest.fail(f"{exc}\n--- whole server log ---\n{proc.log_text()}")


def wait_for(proc: ServerProcess, done: Callable[[str], bool], timeout_s: float = 300) -> str:
    """Poll the log until `done(log)` or the process exits or `timeout_s` passes; the log text then."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.alive():
        if done(proc.log_text()):
            break
        time.sleep(1)
    return proc.log_text()
