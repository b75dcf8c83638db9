"""A cell of a store as `specbench compare A.db B.db` sees it (report/runs_match.py pairs them): pure functions over
the frozen records of stored/read.py.

A cell is seen as a `Side`: its label, the identity nothing may change (model, engine, GPU: report/sections.py),
its workload (TP, concurrency, and the baseline key's client axes: load/speedup.py::baseline_key) and its
configuration, a set of knobs with their values:
- `engine_version`: the store's meta `engine_version` (the engine release);
- each server setting of `servers.settings_json` (matrix/expansion.py ServerTuple.settings, effective after any
  auto-fix) but the bookkeeping keys (`label`, `notes`, `requested`, `fix`) and `tp` (a workload axis); its `env` one
  knob per variable; its `flags` only when the server has no stored command (the command carries them);
- each flag of the launch command (`servers.command_json`), the words before the first flag (`command`) and any
  positional word after it (`command args`), leaving out the model (matched on its own) and the flags that never
  change a result: where the server listens, its API key, what and where it logs (the engine's
  `ServerAdapter.neutral_flags`, engines/base.py).
The store's own ids (server and cell ids, log paths, plans, read-backs) are never part of a cell's identity.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

from specbench.engines.argv import is_option, values_after
from specbench.errors import UserError
from specbench.load.axes import workload_text
from specbench.report.sections import cell_gpu, cell_model
from specbench.stored.records import CellRecord, LoadedStore, ServerRecord

KnobKind = Literal["release", "setting", "env", "flag", "command"]
# server settings that are the store's bookkeeping, or matched elsewhere (label; tp: a workload axis)
BOOKKEEPING = ("label", "notes", "requested", "fix", "tp", "effective")


@dataclass(frozen=True, order=True)
class Knob:
    """One thing of a server's configuration: the release, a setting, an environment variable, a launch flag."""

    kind: KnobKind
    name: str

    @property
    def text(self) -> str:
        if self.kind == "env":
            return f"env {self.name}"
        return self.name



@dataclass(frozen=True)
class Side:
    """One cell as the comparison sees it."""

    cell: CellRecord
    label: str
    model: str | None
    engine: str | None
    gpu: str | None
    workload: tuple[Any, ...]  # load/speedup.py::baseline_key: TP, concurrency, client axes
    config: tuple[tuple[Knob, str], ...]  # sorted by knob

    @cached_property
    def knobs(self) -> dict[Knob, str]:
        return dict(self.config)

    @property
    def hard(self) -> tuple[str | None, str | None, str | None]:
        return (self.model, self.engine, self.gpu)

    @cached_property
    def load_text(self) -> str:
        """The client axes: 'in=512 out=128 data=random' (load/axes.py::workload_text)."""
        return workload_text(self.cell.client)

    @property
    def workload_text(self) -> str:
        """'TP 1, c=16, in=512 out=128 data=random'."""
        c = self.cell
        parts = [f"TP {c.tp if c.tp is not None else '?'}", f"c={c.concurrency if c.concurrency is not None else '?'}"]
        return ", ".join(parts + ([self.load_text] if self.load_text else []))


# ---------------------------------------------------------------- a cell's identity


def _value(v: Any) -> str:
    """A setting's value as text: strings as they are, anything else as compact JSON (true, 0.85, [1, 2])."""
    return v if isinstance(v, str) else json.dumps(v, sort_keys=True)


def command_knobs(argv: Sequence[str], neutral: Iterable[str], model: str | None) -> dict[Knob, str]:
    """The launch command's knobs: the program words (`python3 -m sglang.launch_server`, `vllm serve`), each flag's
    value ('' for a switch), positional words; the neutral flags and the model left out. A flag takes the next word
    unless it is an option (argparse's rule for a flag of unknown kind, engines/argv.py::values_after): both stores
    are read by the same rule."""
    skip = set(neutral)
    out: dict[Knob, str] = {}
    words = list(argv)
    i = 0
    program: list[str] = []
    while i < len(words) and (not is_option(words[i]) or (words[i] == "-m" and program)):
        if words[i] == "-m" and i + 1 < len(words):  # `python3 -m sglang.launch_server`: the program's own words
            program += words[i:i + 2]
            i += 2
            continue
        if words[i] != model:
            program.append(words[i])
        i += 1
    if program:
        out[Knob("command", "command")] = " ".join(program)
    rest: list[str] = []
    while i < len(words):
        word = words[i]
        if not is_option(word):
            if word != model:
                rest.append(word)
            i += 1
            continue
        head, eq, tail = word.partition("=")
        if eq:
            value, i = tail, i + 1
        else:
            n = values_after(words, i, None)
            value, i = " ".join(words[i + 1:i + 1 + n]), i + 1 + n
        if head in skip or (model is not None and value == model):
            continue
        out[Knob("flag", head)] = value
    if rest:
        out[Knob("command", "command args")] = " ".join(rest)
    return out


def settings_knobs(settings: Mapping[str, Any], has_command: bool) -> dict[Knob, str]:
    """A server's settings as knobs (module docstring)."""
    out: dict[Knob, str] = {}
    for key, v in settings.items():
        if key in BOOKKEEPING or v is None or (key == "flags" and has_command):
            continue
        if key == "env" and isinstance(v, Mapping):
            out.update({Knob("env", str(name)): _value(x) for name, x in v.items()})
            continue
        out[Knob("setting", str(key))] = _value(v)
    return out


def _neutral(store: LoadedStore, engine: str | None) -> tuple[str, ...]:
    """The engine's result-neutral flags (engines/base.py::ServerAdapter.neutral_flags), asked once per store."""
    key = ("neutral_flags", engine)
    if key not in store.memo:
        from specbench.engines.base import server_adapter
        from specbench.engines.server_base import NEUTRAL_FLAGS

        try:
            store.memo[key] = tuple(server_adapter(engine or "openai", store.engine_version).neutral_flags)
        except UserError:  # an engine this specbench does not know: the flags every server kind shares
            store.memo[key] = NEUTRAL_FLAGS
    found = store.memo[key]
    return tuple(str(f) for f in found) if isinstance(found, tuple) else ()


def _config(store: LoadedStore, server: ServerRecord | None, cell: CellRecord, engine: str | None,
            model: str | None) -> tuple[tuple[Knob, str], ...]:
    if server is not None:
        settings: Mapping[str, Any] = server.settings
        command = server.command
    else:  # no server row (a damaged store): the settings the cell kept, without the read-back
        settings, command = cell.server, ()
    knobs = settings_knobs(settings, bool(command))
    knobs.update(command_knobs(command, _neutral(store, engine), model))
    if store.engine_version:
        knobs[Knob("release", "engine_version")] = store.engine_version
    return tuple(sorted(knobs.items()))


def side_of(store: LoadedStore, cell: CellRecord) -> Side:
    """A cell's label, identity, workload and configuration knobs (read once per server: LoadedStore.memo)."""
    server: ServerRecord | None = store.server(cell.server_id)
    engine = (server.engine if server is not None and server.engine else None) or store.engine
    model = cell_model(store, cell)
    key = ("compare_config", cell.server_id, model) if server is not None else None
    if key is None:
        config = _config(store, server, cell, engine, model)
    else:
        found = store.memo.get(key)
        if not isinstance(found, tuple):
            found = store.memo[key] = _config(store, server, cell, engine, model)
        config = found
    return Side(cell=cell, label=cell.label, model=model, engine=engine, gpu=cell_gpu(store, cell),
                workload=cell.baseline_key, config=config)

