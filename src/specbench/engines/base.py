"""What the rest of specbench asks an engine, and the registry that finds the engines. Knows no engine by name.

Each engine is a subpackage of `specbench.engines` whose `__init__` defines
- `ENGINE`: an `Engine` (planner, log reading) when the engine is planned, and/or
- `SERVERS`: `{name: factory(version) -> ServerAdapter}` for the `engine = "..."` values a matrix may name.
The package `__init__` stays light (no heavy imports): the work is imported inside the methods, so finding the
engines costs a directory listing. Adding an engine is adding a folder; the registry is the folder listing
(after mini-sglang's `utils/registry.py`: a name -> object table, filled by the modules that own the objects).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

from specbench.errors import UserError

if TYPE_CHECKING:
    import re
    from pathlib import Path

    from rich.console import Console

    from specbench.contracts import BudgetRow, EnginePlan, PlanResult
    from specbench.contracts_inputs import LaunchTarget, PlanOptions
    from specbench.logs.candidates import Candidate, PoolChange
    from specbench.logs.facts import LogFacts
    from specbench.logs.failures import EngineFailures, Failure
    from specbench.logs.parse import EngineLines
    from specbench.logs.warnings import WarningRule


FixValue = int | float | str | None  # a changed flag's value as the user types it; None: the flag, no value named


class FixResultJson(TypedDict):
    """What a fixed launch plans to, as an engine's log-read fix emits it (the JSON form of
    contracts.py::FixResult). An engine's own further keys extend it in a TypedDict of its own."""

    status: str
    error: str | None
    kv_tokens: int | None
    max_running_requests: int | None


class _FixKeys(TypedDict):
    change: dict[str, FixValue]
    source: str  # "engine" (its own printed advice) | "log" (the log's numbers)
    why: str


class FixJson(_FixKeys, total=False):
    """One fix an engine reads from a log (`Engine.failure_fixes`, `Engine.log_fixes`): the JSON form of
    contracts.py::Fix, which the doctor builds from it (`Fix.from_json`); the keys in the order they are written."""

    kind: str  # a fix that is no flag change (e.g. `free_gpu`: stop what holds the GPU)
    result: FixResultJson


@dataclass(frozen=True)
class Launch:
    """What one server tuple launches: argv (never a shell string) and its environment changes."""

    argv: list[str]
    env: dict[str, str]  # variables set for this server (shown and stored)
    drop_env: tuple[str, ...] = ()  # inherited variables removed (SGLANG_ENABLE_SPEC_V2 for AR)
    notes: tuple[str, ...] = ()
    cwd: str | None = None


class ServerAdapter(Protocol):
    """How the runner drives one kind of server: launch, readiness, read-back. The attributes are read-only
    (properties here), so a frozen dataclass (engines/server_base.py::ServerBase) conforms."""

    @property
    def name(self) -> str:
        """The matrix's `engine = "..."`."""
        ...
    @property
    def plan_engine(self) -> str | None:
        """The Engine that plans its launches (None: not planned)."""
        ...
    @property
    def health_paths(self) -> tuple[str, ...]: ...
    @property
    def version(self) -> str | None: ...
    @property
    def needs_command(self) -> bool:
        """The matrix must give the base launch command."""
        ...
    @property
    def tolerate_plan_errors(self) -> bool:
        """A launch the planner cannot model still runs (its preflight says why)."""
        ...
    @property
    def neutral_flags(self) -> tuple[str, ...]:
        """Launch flags that never change what is measured (where it listens, what and where it logs, its API key,
        the name it serves under): two runs whose commands differ only in these ran the same server."""
        ...

    @property
    def launches_model(self) -> bool:
        """The matrix's `model` is what this server kind launches (the embedded engine's model folder). Where it is
        not (the launch command names the model), `model` names the model the server must serve (matrix/schema.py)."""
        ...

    def default_plan_version(self) -> str | None: ...
    def local_model_dir(self, target: LaunchTarget) -> str | None: ...
    def launch(self, target: LaunchTarget, settings: Mapping[str, object]) -> Launch:
        """The tuple's launch from its settings (matrix/expansion.py: tp, algorithm, spec params, flags, env ...)."""
        ...
    def probe(self, base_url: str, timeout_s: float, argv: Sequence[str]) -> None: ...
    def client_mode(self, argv: Sequence[str]) -> str: ...
    def read_back(self, base_url: str, log_text: str) -> Mapping[str, object]:
        """What the running server reports about itself (stored with the server as JSON)."""
        ...
    def metrics_text(self, base_url: str) -> str | None: ...
    def private_launch(self, argv: list[str], env: dict[str, str], folder: Path) -> tuple[list[str], dict[str, str]]: ...
    def count_body(self, api: str) -> dict[str, bool]:
        """Request fields that make the stream carry what the client counts its output tokens by (load/counting.py):
        vLLM `return_token_ids`; {} where the server has no such field."""
        ...
    def running_cap(self, info: Mapping[str, object], log_text: str,
                    plan: Mapping[str, object] | None) -> tuple[int | None, str | None]:
        """The requests the running server generates at once (its effective cap) and where that number comes from:
        what the server reports, its log's line, else the planner's prediction; (None, None) when unknown."""
        ...
    def cache_reset_path(self) -> str | None:
        """The route that empties the server's prefix cache (POST), None when it has none."""
        ...
    def served_models(self, info: Mapping[str, object]) -> list[str] | None:
        """The model names the running server answers to, from its read-back; None when it does not say."""
        ...
    def stand_in_measurement(self, argv: Sequence[str], settings: Mapping[str, object]) -> str | None:
        """What a cell of this launch measures that no real checkpoint of a MoE target would (a stand-in's artifact,
        e.g. dummy-weight routing), in one line; None when nothing is known. The predictor keeps such cells out of
        its calibration and its accuracy."""
        ...
    def stand_in_routing(self, argv: Sequence[str], settings: Mapping[str, object]) -> bool:
        """Whether a MoE target of this launch routes a token by its id alone (dummy weights, no expert-routing
        simulation), so that the positions of one verify share their experts; False for a real checkpoint."""
        ...


class Engine(Protocol):
    """An engine that specbench plans and whose logs it reads."""

    name: str  # "sglang", "vllm": the planner contract's `engine`
    is_default: bool  # plans a command that no engine recognises (the historical default)

    def recognise(self, argv: Sequence[str]) -> int:
        """How surely argv launches this engine: 0 not at all, 1 by its flags, 2 by its entry point."""
        ...

    def image_argv(self, image: str, args: Sequence[str], entrypoint: str | None) -> list[str] | None:
        """The engine's argv when a container `image` (with `args` after it and its `--entrypoint`) is one of this
        engine's images, else None (engines/command.py reads `docker run IMAGE ...` through it)."""
        ...

    def plan(self, argv: list[str], opts: PlanOptions) -> EnginePlan: ...
    def render_plan(self, result: PlanResult, con: Console) -> None: ...
    def fix_axis(self, key: str) -> str | None:
        """The matrix axis a planner fix's changed argument sets (None: set it as a plain flag)."""
        ...

    # -- reading a log of this engine
    def version_from_log(self, lines: Sequence[str]) -> str | None: ...
    def release_from_args(self, facts: LogFacts) -> str | None: ...
    def log_plan_argv(self, facts: LogFacts, text: str | None) -> list[str]: ...
    def log_non_kv_gib(self, facts: LogFacts) -> float | None: ...
    def budget_rows(self, facts: LogFacts) -> list[BudgetRow]: ...
    def started_headline(self, facts: LogFacts) -> str: ...
    def started_caps(self, facts: LogFacts) -> list[str]:
        """Sentences for what the engine lowered below what was asked (each names the asked value and the new one)."""
        ...
    def started_notes(self, facts: LogFacts) -> list[str]: ...
    def failure_sentences(self, facts: LogFacts, failure: Failure) -> list[str]:
        """The engine's words for a failure kind it prints ([] for a kind it does not own)."""
        ...
    def log_notes(self, facts: LogFacts) -> list[str]:
        """Notes on what the log measured that the engine's own rules check (e.g. a KV dtype the sizes disagree with)."""
        ...
    def failure_fixes(self, facts: LogFacts, failure: Failure) -> list[FixJson]:
        """The fixes the failure's own printed numbers give (before the planner's); [] when it printed none."""
        ...
    def log_fixes(self, facts: LogFacts, kind: str) -> list[FixJson]:
        """Fixes from the log's own numbers when the planner cannot run (no model config): [] when it has none."""
        ...

    # -- two logs of this engine side by side (`specbench doctor --diff`)
    def diff_pool_change(self, left: LogFacts, right: LogFacts) -> PoolChange: ...
    def diff_candidate(self, left: LogFacts, right: LogFacts, key: str, va: Any, vb: Any) -> Candidate | None:
        """A changed argument of this engine and the pool change it predicts; None when its pools do not depend on it."""
        ...
    def diff_failure_sentence(self, side: str, facts: LogFacts, kind: str | None) -> str | None: ...

    def log_tables(self) -> LogTables:
        """What the doctor reads this engine's logs with (doctor/reading.py)."""
        ...


@dataclass(frozen=True)
class LogTables:
    """One engine's log-reading data: its line formats, the line that marks its last start-up steps, its failure
    table and its warning rules (the doctor merges every engine's: doctor/reading.py)."""

    lines: EngineLines
    late_boot: re.Pattern[str]
    failures: EngineFailures
    warnings: tuple[WarningRule, ...]


@dataclass(frozen=True)
class PlanParts:
    """The engine functions a plan is shown and fixed with (its render.py and knobs.py)."""

    render_plan: Callable[[PlanResult, Console], None]
    fix_axis: Callable[[str], str | None]


@dataclass(frozen=True)
class LogParts:
    """The engine functions a log is explained and compared with (budget.py, explain.py, logfixes.py, logdiff.py)
    and its tables."""

    budget_rows: Callable[[LogFacts], list[BudgetRow]]
    started_headline: Callable[[LogFacts], str]
    failure_sentences: Callable[[LogFacts, Failure], list[str]]
    failure_fixes: Callable[[LogFacts, Failure], list[FixJson]]
    pool_change: Callable[[LogFacts, LogFacts], PoolChange]
    candidate: Callable[[LogFacts, LogFacts, str, Any, Any], Candidate | None]
    failure_sentence: Callable[[str, LogFacts, str | None], str | None]
    tables: LogTables


@lru_cache(maxsize=1)
def _packages() -> tuple[Any, ...]:
    import specbench.engines as root

    mods = []
    for info in sorted(pkgutil.iter_modules(root.__path__), key=lambda i: i.name):
        if info.ispkg:
            mods.append(importlib.import_module(f"{root.__name__}.{info.name}"))
    return tuple(mods)


def engines() -> dict[str, Engine]:
    """Every planned engine by name."""
    return {m.ENGINE.name: m.ENGINE for m in _packages() if getattr(m, "ENGINE", None) is not None}


def engine(name: str | None) -> Engine:
    """The engine of that name (case-insensitive); None gives the default one. UserError names the known ones."""
    table = engines()
    if name is None:
        return next(e for e in table.values() if e.is_default)
    found = table.get(name.lower())
    if found is None:
        raise UserError(f"unknown engine {name!r} ({' or '.join(sorted(table))})")
    return found


def engine_for_command(argv: Sequence[str]) -> Engine:
    """The engine that recognises argv most surely; the default engine when none does."""
    scored = sorted(((e.recognise(argv), e.name, e) for e in engines().values()), key=lambda t: (-t[0], t[1]))
    best = scored[0]
    return best[2] if best[0] > 0 else engine(None)


def servers() -> dict[str, Callable[[str | None], ServerAdapter]]:
    """Every server kind a matrix may name (`engine = "..."`) -> its adapter factory."""
    out: dict[str, Callable[[str | None], ServerAdapter]] = {}
    for m in _packages():
        out.update(getattr(m, "SERVERS", {}) or {})
    return out


def server_adapter(name: str, version: str | None) -> ServerAdapter:
    table = servers()
    if name not in table:
        raise UserError(f"unknown engine {name!r} (one of {', '.join(sorted(table))})")
    return table[name](version)


class EngineModules:
    """The `Engine` methods that every engine answers the same way: through the typed parts its own factories build
    on first use (`plan_parts()`, `log_parts()`: the imports sit inside them, so the engine's `__init__` stays
    light; mini-sglang's registry of typed objects). An engine overrides what it answers otherwise; the ones it has
    nothing to say for answer empty (no caps, no notes, no log-derived fixes)."""

    name: str

    def plan_parts(self) -> PlanParts:
        raise NotImplementedError

    def log_parts(self) -> LogParts:
        raise NotImplementedError

    def render_plan(self, result: PlanResult, con: Console) -> None:
        """The plan as a person reads it, in the words of the engine's `render.render_plan`."""
        self.plan_parts().render_plan(result, con)

    def fix_axis(self, key: str) -> str | None:
        """The matrix axis a fix of this engine's argument sets (its knobs.py)."""
        return self.plan_parts().fix_axis(key)

    def log_tables(self) -> LogTables:
        return self.log_parts().tables

    def version_from_log(self, lines: Sequence[str]) -> str | None:
        return None

    def release_from_args(self, facts: LogFacts) -> str | None:
        return None

    def log_non_kv_gib(self, facts: LogFacts) -> float | None:
        return None

    def budget_rows(self, facts: LogFacts) -> list[BudgetRow]:
        return self.log_parts().budget_rows(facts)

    def started_headline(self, facts: LogFacts) -> str:
        return self.log_parts().started_headline(facts)

    def started_caps(self, facts: LogFacts) -> list[str]:
        return []

    def started_notes(self, facts: LogFacts) -> list[str]:
        return []

    def failure_sentences(self, facts: LogFacts, failure: Failure) -> list[str]:
        return self.log_parts().failure_sentences(facts, failure)

    def log_notes(self, facts: LogFacts) -> list[str]:
        return []

    def failure_fixes(self, facts: LogFacts, failure: Failure) -> list[FixJson]:
        return self.log_parts().failure_fixes(facts, failure)

    def log_fixes(self, facts: LogFacts, kind: str) -> list[FixJson]:
        return []

    def diff_pool_change(self, left: LogFacts, right: LogFacts) -> PoolChange:
        return self.log_parts().pool_change(left, right)

    def diff_candidate(self, left: LogFacts, right: LogFacts, key: str, va: Any, vb: Any) -> Candidate | None:
        return self.log_parts().candidate(left, right, key, va, vb)

    def diff_failure_sentence(self, side: str, facts: LogFacts, kind: str | None) -> str | None:
        return self.log_parts().failure_sentence(side, facts, kind)
