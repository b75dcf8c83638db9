"""Shared helpers for the tests that boot the real local engine (vLLM's CPU build).

Start and stop go through `specbench.matrix.lifecycle.ServerProcess` (own process group, log to a file,
SIGTERM then SIGKILL of the group), the same code the runner uses, instead of a Popen/killpg copy per test module.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from specbench.engines.vllm import local as vl
from specbench.matrix.lifecycle import ServerProcess
from proc_helpers import free_port  # noqa: F401  (re-exported for the engine tests)


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


def plan_words(cmd: vl.LaunchCommand) -> list[str]:
    """The launch as a user would paste it: the variables specbench set, then the argv."""
    return [f"{k}={v}" for k, v in sorted(cmd.env_overrides.items())] + list(cmd.argv)


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
