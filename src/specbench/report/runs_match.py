"""Which cell of run B is which cell of run A (`specbench compare A.db B.db`): pure functions over the frozen
records of stored/read.py.

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

What differs between the two stores as a whole is the comparison's subject (`Matching.subject`), and the cells are
matched on everything else. A knob is a candidate when, for every label both stores ran that the knob applies to
(set on either side), it takes one value in A and one other value in B, the same change for each such label. The
subject is the candidates that apply to every shared label (the release, a flag every server got); only when there
is none is it every candidate (the drafter of the one speculative label, its step count). So in a comparison of two
releases, a label that also runs other flags in B is a different configuration: its cells stay unmatched and the
label is named (`Matching.relabelled`: "label 'eagle3' runs other flags in B: --speculative-num-steps 3 -> 5").

A model, engine or GPU that differs is never a subject: those cells do not compare, and say why.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from specbench.engines.argv import is_option, values_after
from specbench.errors import UserError
from specbench.load.axes import workload_text
from specbench.report.sections import cell_gpu, cell_model
from specbench.stored.records import CellRecord, LoadedStore, ServerRecord, label_key

KnobKind = Literal["release", "setting", "env", "flag", "command"]
SideName = Literal["A", "B"]
# server settings that are the store's bookkeeping, or matched elsewhere (label; tp: a workload axis)
BOOKKEEPING = ("label", "notes", "requested", "fix", "tp", "effective")
UNSET = "(unset)"
SWITCH = "(on)"  # a flag given without a value


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
class Change:
    """A knob's value in A and in B (None: not set there)."""

    knob: Knob
    a: str | None
    b: str | None

    @property
    def text(self) -> str:
        return f"{self.knob.text} {_shown(self.a)} -> {_shown(self.b)}"


def _shown(v: str | None) -> str:
    return UNSET if v is None else SWITCH if v == "" else v


def changes_text(changes: Sequence[Change]) -> str:
    """'engine_version 0.5.12.post1 -> 0.5.15.post1, --speculative-num-steps 3 -> 5': a setting whose change the
    command shows too, with the same values (num_steps and --speculative-num-steps), is named once, as the flag."""
    flags = {(c.a, c.b) for c in changes if c.knob.kind == "flag"}
    return ", ".join(c.text for c in changes if not (c.knob.kind == "setting" and (c.a, c.b) in flags))


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


@dataclass(frozen=True)
class Pair:
    a: Side
    b: Side


UnmatchedWhy = Literal["label", "model", "engine", "gpu", "flags", "workload", "duplicate"]


@dataclass(frozen=True)
class Unmatched:
    """A cell of one store with no counterpart in the other, and why."""

    store: SideName
    side: Side
    why: UnmatchedWhy
    text: str
    changes: tuple[Change, ...] = ()  # why == "flags": its configuration against the closest one of the other store


@dataclass(frozen=True)
class LabelChange:
    """A label both stores ran with other flags (beyond the subject): a different configuration under one name."""

    label: str
    changes: tuple[Change, ...]

    @property
    def text(self) -> str:
        return f"label '{self.label}' runs other flags in B: {changes_text(self.changes)}"


@dataclass(frozen=True)
class Matching:
    subject: tuple[Change, ...]  # what differs between the stores as a whole (the comparison's subject)
    apart: tuple[Change, ...]  # model / engine / GPU sets that differ: those cells cannot match
    pairs: tuple[Pair, ...]
    unmatched: tuple[Unmatched, ...]
    relabelled: tuple[LabelChange, ...] = field(default=())

    @property
    def subject_text(self) -> str:
        """'B differs from A in: engine_version 0.5.12.post1 -> 0.5.15.post1' (or in nothing: an A/A run)."""
        if not self.subject:
            return "B differs from A in: nothing beyond the measurement (the same setup: an A/A comparison)"
        return f"B differs from A in: {changes_text(self.subject)}"


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


# ---------------------------------------------------------------- the subject


def _values(sides: Iterable[Side], knob: Knob) -> set[str | None]:
    return {s.knobs.get(knob) for s in sides}


def subject_of(a: Sequence[Side], b: Sequence[Side]) -> tuple[Change, ...]:
    """What differs between the stores as a whole (module docstring), in knob order."""
    all_a, all_b = _by_label(a), _by_label(b)
    labels = sorted(set(all_a) & set(all_b), key=label_key)
    by_a = {lab: all_a[lab] for lab in labels}
    by_b = {lab: all_b[lab] for lab in labels}
    knobs = sorted({k for s in (*a, *b) if s.label in by_a for k, _ in s.config})
    candidates: list[tuple[Change, bool]] = []
    for knob in knobs:
        change: tuple[str | None, str | None] | None = None
        applies_everywhere, consistent = True, True
        for lab in labels:
            va, vb = _values(by_a[lab], knob), _values(by_b[lab], knob)
            if va == {None} and vb == {None}:
                applies_everywhere = False
                continue
            if len(va) != 1 or len(vb) != 1 or va == vb:
                consistent = False
                break
            this = (next(iter(va)), next(iter(vb)))
            if change is not None and this != change:
                consistent = False
                break
            change = this
        if consistent and change is not None:
            candidates.append((Change(knob, *change), applies_everywhere))
    universal = tuple(c for c, everywhere in candidates if everywhere)
    return universal or tuple(c for c, _ in candidates)


# ---------------------------------------------------------------- matching


def _key(s: Side, subject: frozenset[Knob], seen: dict[int, tuple[Any, ...]]) -> tuple[Any, ...]:
    """What a pair must share; the configuration without the subject is built once per configuration (`seen`, by
    the id of the config tuple: the sides of one server share it, side_of)."""
    rest = seen.get(id(s.config))
    if rest is None:
        rest = seen[id(s.config)] = tuple((k, v) for k, v in s.config if k not in subject)
    return (s.label, s.hard, s.workload, rest)


def _diff(mine: Side, other: Side, subject: frozenset[Knob], mine_is_a: bool) -> tuple[Change, ...]:
    """The knobs (beyond the subject) where two sides differ, as A -> B changes."""
    km, ko = mine.knobs, other.knobs
    out = []
    for knob in sorted((set(km) | set(ko)) - subject):
        if km.get(knob) != ko.get(knob):
            a, b = (km.get(knob), ko.get(knob)) if mine_is_a else (ko.get(knob), km.get(knob))
            out.append(Change(knob, a, b))
    return tuple(out)


def _why(me: Side, store: SideName, by_label: Mapping[str, Sequence[Side]], subject: frozenset[Knob]) -> Unmatched:
    """Why a cell of `store` has no counterpart among the other store's cells (`by_label`: those, by label)."""
    there = "B" if store == "A" else "A"
    same = list(by_label.get(me.label, ()))
    if not same:
        return Unmatched(store, me, "label", f"no counterpart: label '{me.label}' is not in {there}")
    for i, what in enumerate(("model", "engine", "gpu")):
        kept = [o for o in same if o.hard[i] == me.hard[i]]
        if not kept:
            seen = ", ".join(sorted({str(o.hard[i]) for o in same}))
            return Unmatched(store, me, what,  # type: ignore[arg-type]
                             f"other {what.upper() if what == 'gpu' else what}: label '{me.label}' ran "
                             f"{seen} in {there}, {me.hard[i]} here")
        same = kept
    here = [o for o in same if o.workload == me.workload]
    if not here and any(not _diff(me, o, subject, True) for o in same):
        return Unmatched(store, me, "workload", f"no counterpart at this workload in {there} ({me.workload_text})")
    pool = here or same
    closest = min(pool, key=lambda o: len(_diff(me, o, subject, store == "A")))
    changes = _diff(me, closest, subject, store == "A")
    if not changes:
        return Unmatched(store, me, "duplicate", f"another cell of this configuration and workload in {store} "
                                                 f"is the one compared")
    return Unmatched(store, me, "flags", f"other flags: label '{me.label}' runs other flags in B: "
                                         f"{changes_text(changes)}", changes)


def _relabelled(unmatched: Sequence[Unmatched]) -> tuple[LabelChange, ...]:
    out: dict[str, list[Change]] = {}
    for u in unmatched:
        if u.why == "flags":
            got = out.setdefault(u.side.label, [])
            got.extend(c for c in u.changes if c not in got)
    return tuple(LabelChange(lab, tuple(sorted(cs, key=lambda c: c.knob))) for lab, cs in
                 sorted(out.items(), key=lambda kv: label_key(kv[0])))


def _apart(a: Sequence[Side], b: Sequence[Side]) -> tuple[Change, ...]:
    """The identities that differ as sets between the stores (model, engine, GPU)."""
    out = []
    for i, name in enumerate(("model", "engine", "GPU")):
        va = sorted({str(s.hard[i]) for s in a})
        vb = sorted({str(s.hard[i]) for s in b})
        if va and vb and va != vb:
            out.append(Change(Knob("setting", name), ", ".join(va), ", ".join(vb)))
    return tuple(out)


def _by_label(sides: Sequence[Side]) -> dict[str, list[Side]]:
    out: dict[str, list[Side]] = {}
    for s in sides:
        out.setdefault(s.label, []).append(s)
    return out


def match(a_store: LoadedStore, b_store: LoadedStore) -> Matching:
    """Pair the cells of B with those of A (module docstring)."""
    a = [side_of(a_store, c) for c in a_store.cells]  # in the store's order (stored/records.py::cell_sort_key)
    b = [side_of(b_store, c) for c in b_store.cells]
    subject = subject_of(a, b)
    skip = frozenset(c.knob for c in subject)
    seen: dict[int, tuple[Any, ...]] = {}  # the sides (and so their config tuples) live as long as `seen`
    free_b: dict[tuple[Any, ...], list[Side]] = {}
    for s in b:
        free_b.setdefault(_key(s, skip, seen), []).append(s)
    pairs: list[Pair] = []
    lone_a: list[Side] = []
    for s in a:
        got = free_b.get(_key(s, skip, seen))
        if got:
            pairs.append(Pair(s, got.pop(0)))
        else:
            lone_a.append(s)
    lone_b = {id(s) for group in free_b.values() for s in group}
    a_by, b_by = _by_label(a), _by_label(b)
    unmatched = ([_why(s, "A", b_by, skip) for s in lone_a]
                 + [_why(s, "B", a_by, skip) for s in b if id(s) in lone_b])
    return Matching(subject=subject, apart=_apart(a, b), pairs=tuple(pairs), unmatched=tuple(unmatched),
                    relabelled=_relabelled(unmatched))
