"""Test-wide pins, the shared engine boots, and how `make test` spreads the suite over its workers.

Layout: the tests are laid out like the code. tests/unit/<package>/ holds the tests of one package of
src/specbench (unit/core: its top-level modules such as contracts.py and userfile.py); tests/process/ the tests that
run whole `specbench` processes (runs, faults, signals, the CLI's one-line errors); tests/engine/ the tests that boot
the real local engine or need its venv (every test there is marked `engine`, below); tests/golden/ the tests over
recorded boots, public corpora and committed stores. tests/data/ holds the fixtures, tests/fuzz/ the fuzzing passes
(every test there is marked `slow` at collection, below: `make test-fast` leaves the campaigns out).
The helper modules stay here (paths.py: the repository root and tests/data; engine_boot, proc_helpers, run_helpers,
predict_stores, fake_gpus, hub_server), and this file puts this folder on sys.path so a test module in any folder
imports them by name. A module's basename is unique across the folders (pytest imports test modules by basename).

Pins: vLLM's CPU sizing depends on the machine (specbench.engines.vllm.cpu.CpuIsa: AVX512-BF16 and AMX, as torch
reports them to vLLM). The exact CPU numbers the unit tests assert are those of the machine the fixtures in
tests/data were recorded on (AMD EPYC: AVX512-BF16, no AMX), so every test plans for that machine unless it pins
another one; a pin among the command's own VAR=value words wins over this one, which is how the live engine tests
plan for the machine they run on (engine_boot.plan_words asks the engine's torch).

Engine boots (tests/engine_boot.py says how to use them): the fixtures below are the local engine configurations
the tests share (`self_draft_server`, `hybrid_server`; a server without speculative decoding is the demo run's,
test_report_demo.py), each booted once while tests ask for it,
one engine at a time. Add a configuration here rather than booting one in a test module.

Markers: `engine` (boots the real local engine, or needs its venv: every test under tests/engine/, and the few
live checks of a recorded boot elsewhere that carry the marker themselves), `models` (needs the tiny local models that
`make models` builds: skipped without them, failed under CI); everything else runs on a fresh clone
(`make test-fast`). Under pytest-xdist (`make test`: `-n 3 --dist loadgroup`) every `engine` test joins one
group (pytest_xdist_make_scheduler below), so they run one after another on one worker while the other workers run
the rest. The summary counts the
engine boots of the session (every server log under the session's temporary folder).
"""

from __future__ import annotations

import os
import re
import signal
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

# The helper modules beside this file (paths, engine_boot, proc_helpers, run_helpers, predict_stores, fake_gpus,
# hub_server) import by their bare names from a test module in any folder under tests/: pytest's default import mode
# puts only a test module's own folder on sys.path, so this folder goes there first, before the imports below.
_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import pytest

from engine_boot import BOOTS, SELF_DRAFT_TOKENS, Server, models_dir
from proc_helpers import free_port
from specbench.engines.vllm import cpu as vllm_cpu
from specbench.engines.vllm import local as vl

# Signals as a user's terminal sends them: a suite started in the background of a non-interactive shell (`make test
# &`) inherits SIGINT and SIGQUIT ignored, under `nohup` SIGHUP too, and an ignored signal stays ignored across exec:
# Python then installs no KeyboardInterrupt handler, here nor in any `specbench` process a test starts, and a hangup
# or quit never ends a child. The tests that press Ctrl-C on a run saw it do nothing (a resumed run went on to exit
# 0), and the ones that end a runner by SIGHUP / SIGQUIT waited for it in vain. A handler set here is reset to the
# default in every child at exec: Ctrl-C becomes KeyboardInterrupt again here, and SIGHUP / SIGQUIT get a handler
# that does nothing, so this process still outlives its terminal as `nohup` asked while each child has the default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
for _sig in (signal.SIGHUP, signal.SIGQUIT):
    if signal.getsignal(_sig) is signal.SIG_IGN:
        signal.signal(_sig, lambda *_: None)

SHARED_SERVERS = ("self_draft_server", "hybrid_server")
ENGINE_GROUP = "engine"  # the xdist group of every `engine` test


@pytest.fixture(autouse=True)
def _pin_the_fixtures_cpu(monkeypatch):
    monkeypatch.setenv(vllm_cpu.AVX512_BF16_ENV, "1")
    monkeypatch.setenv(vllm_cpu.AMX_ENV, "0")
    # plans resolve models from the bundled configs, never from a Hub the test machine may reach (specs/hub.py);
    # the Hub tests (test_plan_hub.py) lift this for their stand-in server on 127.0.0.1
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


# ------------------------------------------------------------------------------------------ shared engine boots


@pytest.fixture(scope="session")
def engine_models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny models: $SPECBENCH_MODELS (as `make test` sets it) or a fresh folder, built there if missing."""
    return models_dir(tmp_path_factory).resolve()


@pytest.fixture
def self_draft_server(engine_models: Path, tmp_path_factory: pytest.TempPathFactory) -> Server:
    """tiny-target drafting for itself (draft_model, k = 3: every draft token is accepted), 2,048-token context,
    4 sequences, the default 1 GiB of KV space."""
    target = str(engine_models / "tiny-target")
    return BOOTS.server("self-draft", lambda: vl.LocalServerConfig(
        model=target, port=free_port(), max_model_len=2048, max_num_seqs=4,
        speculative=vl.DraftModelSpec.self_draft(target, SELF_DRAFT_TOKENS)), tmp_path_factory)


@pytest.fixture
def hybrid_server(engine_models: Path, tmp_path_factory: pytest.TempPathFactory) -> Server:
    """tiny-hybrid (Qwen3-Next: Gated DeltaNet + gated full attention + MoE), 2,048-token context, 2 sequences,
    1 GiB of KV space."""
    return BOOTS.server("hybrid", lambda: vl.LocalServerConfig(
        model=str(engine_models / "tiny-hybrid"), port=free_port(), max_model_len=2048, max_num_seqs=2,
        kv_cache_space_gib=1), tmp_path_factory)


@pytest.fixture(scope="session", autouse=True)
def _stop_the_shared_engine() -> Iterator[None]:
    yield
    BOOTS.stop()


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A `models` test without the tiny models skips; an `engine` test that boots its own engine gets the machine
    to itself (the shared engine stops first)."""
    if item.get_closest_marker("models"):
        local_models_or_skip()
    if item.get_closest_marker("engine") and not set(SHARED_SERVERS) & set(getattr(item, "fixturenames", ())):
        BOOTS.stop()


# ------------------------------------------------------------------------------------------ markers, workers


def local_models_or_skip() -> Path:
    """The tiny local models (`make models`): skip without them, except under CI, where `make test` builds them."""
    from specbench.engines.vllm.launch import models_dir as local_models

    folder = local_models()
    if not (folder / "tiny-target" / "config.json").is_file():
        msg = f"tiny models not built at {folder}: run `make models`"
        if os.environ.get("CI"):
            pytest.fail(msg + " - under CI `make test` builds them")
        pytest.skip(msg)
    return folder


# `--dist loadgroup` with the `engine` tests as one group. xdist 3.8 groups by renaming a test's nodeid, which
# pytest 9.2 ignores (a nodeid is read-only there), so the grouping is done here: each worker writes the nodeids of
# the `engine` tests it collected to a file the controller named, and the controller's scheduler (xdist's
# LoadScopeScheduling, whose default reordering sends the largest unit first) makes them one unit of work; the
# other tests go by module.
ENGINE_TESTS_FILE = "SPECBENCH_ENGINE_TESTS_FILE"


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput") and config.getoption("dist", "no") == "loadgroup":
        folder = Path(tempfile.mkdtemp(prefix="specbench-engine-tests-"))
        os.environ[ENGINE_TESTS_FILE] = str(folder / "nodeids")  # the workers inherit it


# The tiers are markers on the tests themselves (pyproject.toml [tool.pytest.ini_options] markers), never name lists:
# `slow` (a whole `specbench run` or a process fault per test: `make test-fast` leaves them out), `busy` (signal and
# lifecycle tests `make test` runs once, in its busy pass with every core busy: `-m "busy and not engine"`; its main
# pass runs `-m "not busy or engine"`), `engine` (one worker, one boot at a time: below).
SLOW_SCOPES_SUFFIX = "-slow"


ENGINE_FOLDER = Path(__file__).resolve().parent / "engine"  # every test under tests/engine/ is an `engine` test
FUZZ_FOLDER = Path(__file__).resolve().parent / "fuzz"  # every fuzzing pass is `slow`: a campaign of whole processes


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:  # before `-m` deselects (tryfirst) and before the engine group is read below
        if item.path.resolve().is_relative_to(ENGINE_FOLDER) and not item.get_closest_marker("engine"):
            item.add_marker(pytest.mark.engine)
        if item.path.resolve().is_relative_to(FUZZ_FOLDER) and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
    engine = [item.nodeid for item in items if item.get_closest_marker("engine")]
    slow = sorted({item.nodeid.split("::")[0] for item in items if item.get_closest_marker("slow")})
    for item in items:
        if item.get_closest_marker("engine"):
            item.add_marker(pytest.mark.xdist_group(ENGINE_GROUP))
    worker = getattr(config, "workerinput", {}).get("workerid")
    if worker and os.environ.get(ENGINE_TESTS_FILE):
        Path(f"{os.environ[ENGINE_TESTS_FILE]}.{worker}").write_text("\n".join(engine))
        Path(f"{os.environ[ENGINE_TESTS_FILE]}{SLOW_SCOPES_SUFFIX}.{worker}").write_text("\n".join(slow))


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    if config.getoption("dist", "no") != "loadgroup" or not os.environ.get(ENGINE_TESTS_FILE):
        return None
    from xdist.scheduler import LoadScopeScheduling

    listed = Path(os.environ[ENGINE_TESTS_FILE])

    class EngineGroupScheduling(LoadScopeScheduling):
        """Every `engine` test in one unit (one worker, one after another), every other test with its module
        (LoadScopeScheduling's own scope): a module-scoped fixture that runs a whole matrix is built once, not once
        per worker (`--durations` showed the truth, repeats and lies fixtures built twice, 9-14 s each)."""

        _engine: frozenset[str] | None = None
        _slow: frozenset[str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self._engine is None:  # the workers have all collected (and written) by the time it is asked
                self._engine = frozenset(line for f in listed.parent.glob(listed.name + ".*")
                                         for line in f.read_text().splitlines() if line)
            return ENGINE_GROUP if nodeid in self._engine else super()._split_scope(nodeid)

        def _slow_scopes(self) -> frozenset[str]:
            if self._slow is None:
                self._slow = frozenset(line for f in listed.parent.glob(listed.name + SLOW_SCOPES_SUFFIX + ".*")
                                       for line in f.read_text().splitlines() if line)
            return self._slow

        def _assign_work_unit(self, node) -> None:  # type: ignore[no-untyped-def]
            """Longest first: xdist orders the units by their number of tests, which sent the `engine` unit (20
            tests, the run's critical path) after a dozen larger modules of quick unit tests, and the slow modules
            (few tests of seconds each) last, where one of them kept a worker busy after the others had finished.
            The next unit is the `engine` one, then a slow module, then the rest in xdist's order."""
            queue = self.workqueue
            first = ENGINE_GROUP if ENGINE_GROUP in queue else \
                next((scope for scope in queue if scope in self._slow_scopes()), None)
            if first is not None:
                queue.move_to_end(first, last=False)
            super()._assign_work_unit(node)

    return EngineGroupScheduling(config, log)


_BOOT_LOG = re.compile(r"(^server\.log$|-boot\d+\.log$)")


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """How many engines this session booted: every engine log under its temporary folder (workers included)."""
    if hasattr(config, "workerinput"):
        return
    try:
        base = config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]
    except (AttributeError, OSError):
        return
    logs = [p for p in base.rglob("*.log") if _BOOT_LOG.search(p.name) and _is_vllm_log(p)]
    if logs:
        by = sorted(str(p.relative_to(base).parent) for p in logs)
        terminalreporter.write_line(f"engine boots this session: {len(logs)} ({', '.join(by)})")


def _is_vllm_log(p: Path) -> bool:
    try:
        with p.open(errors="replace") as f:
            return "vllm" in f.read(1 << 16).lower()
    except OSError:
        return False
