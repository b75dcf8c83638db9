"""Which cell of run B is which cell of run A (`specbench compare A.db B.db`): pure functions over the frozen
records of stored/read.py.

A cell is seen as a `Side` (report/runs_side.py): its label, the identity nothing may change (model, engine, GPU),
its workload and its configuration, a set of knobs with their values. The store's own ids are never part of a cell's
identity.

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

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from specbench.report.runs_side import Knob, Side, side_of
from specbench.stored.records import LoadedStore, label_key

SideName = Literal["A", "B"]
UNSET = "(unset)"
SWITCH = "(on)"  # a flag given without a value


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
