"""Shared helpers for the tests that boot the real local engine (vLLM's CPU build), and the session's shared boots.

A boot costs 20-80 s on a 2-core machine, so a configuration is booted once and every check runs against it:

    # tests/conftest.py names each shared configuration as a fixture (self_draft_server,
    # hybrid_server); a test that needs one of them just asks for it:
    @pytest.mark.engine
    def test_my_check(self_draft_server: Server) -> None:
        httpx.post(f"{self_draft_server.cfg.base_url}/v1/completions", ...)

    # a configuration no fixture has yet: add one to tests/conftest.py, built on BOOTS (free_port: proc_helpers.py)
    @pytest.fixture
    def my_server(engine_models: Path, tmp_path_factory) -> Server:
        return BOOTS.server("my-config", lambda: vl.LocalServerConfig(model=str(engine_models / "tiny-target"),
                            port=free_port(), max_model_len=1024), tmp_path_factory)

`BOOTS` (EngineBoots) runs one engine at a time (memory: several GB each): asking for another configuration stops
the running one, asking for the same one again reuses it, so tests of one configuration belong in one module or
in adjacent ones. A test that boots its own engine (a `specbench run`) is marked `engine` and asks for no shared
server: conftest.py stops the shared one before it starts. Every test marked `engine` runs on one xdist worker
(`make test`: `-n 3 --dist loadgroup`, conftest.py puts them in one group), so two engines never boot at once and
the other tests run on the other workers. The session's summary counts the boots (conftest.py).

Start and stop go through `specbench.matrix.lifecycle.ServerProcess` (own process group, log to a file,
SIGTERM then SIGKILL of the group), the same code the runner uses, instead of a Popen/killpg copy per test module.
"""

from __future__ import annotations

import contextlib
import functools
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

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


# ------------------------------------------------------------------------------------------ shared boots


@dataclass(frozen=True)
class Server:
    """A running local engine: its configuration, its process (log), what readiness measured."""

    cfg: vl.LocalServerConfig
    proc: ServerProcess
    ready: vl.ReadyInfo

    def log(self) -> str:
        return self.proc.log_text()


@dataclass(frozen=True)
class Boot:
    """One boot of the session: which configuration, how long until ready (None: it never got there)."""

    name: str
    seconds: float | None


class EngineBoots:
    """The session's shared engines: one running at a time, each configuration booted once while it is asked for."""

    def __init__(self) -> None:
        self.boots: list[Boot] = []
        self._name: str | None = None
        self._server: Server | None = None
        self._stack: contextlib.ExitStack | None = None
        self._failed: dict[str, str] = {}

    def server(self, name: str, make_cfg: Callable[[], vl.LocalServerConfig],
               tmp_path_factory: pytest.TempPathFactory) -> Server:
        """The running engine of configuration `name` (booted now from `make_cfg()` unless it is the one up)."""
        if name in self._failed:
            pytest.fail(f"shared engine {name!r} did not start earlier in this session:\n{self._failed[name]}")
        if self._name == name and self._server is not None and self._server.proc.alive():
            return self._server
        self.stop()
        venv = engine_venv_or_skip()
        cfg = make_cfg()
        stack = contextlib.ExitStack()
        proc = stack.enter_context(running(cfg, venv, tmp_path_factory.mktemp(name) / "server.log"))
        t0 = time.monotonic()
        try:
            ready = vl.wait_until_ready(cfg.base_url, cfg.served_name, timeout_s=300, is_alive=proc.alive)
        except vl.EngineNotReady as exc:
            self._failed[name] = f"{exc}\n--- whole server log ---\n{proc.log_text()}"
            self.boots.append(Boot(name, None))
            stack.close()
            pytest.fail(self._failed[name])
        self.boots.append(Boot(name, time.monotonic() - t0))
        self._name, self._server, self._stack = name, Server(cfg, proc, ready), stack
        return self._server

    def stop(self) -> None:
        """Stop the running engine, if any (its whole process group)."""
        stack, self._name, self._server, self._stack = self._stack, None, None, None
        if stack is not None:
            stack.close()


BOOTS = EngineBoots()
SELF_DRAFT_TOKENS = 3  # conftest.py::self_draft_server's k
