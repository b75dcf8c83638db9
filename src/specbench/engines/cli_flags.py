"""Every flag an engine release accepts, read from the lists in `engines/<engine>/cli_flags/<release>.txt` (each
written from the engine's own parser by a script under tools/engine/), and argparse's rule for reading a flag:
an exact option, else a unique prefix of one (`allow_abbrev`, Python's argparse::_parse_optional), else unknown.
Knows no engine: the engine package passes its folder. `BaseKnob` is the row every engine's flag table (`knobs.py`)
extends: a plan-shaping argument, its spellings, type, dump key and matrix axis; `set_server_axes` sets a tuple's
server axes by those knobs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from specbench.errors import FlagError


@dataclass(frozen=True)
class BaseKnob:
    """One argument that shapes the memory plan, as an engine's flag table (`knobs.py`) lists it."""

    field: str  # the engine's Args attribute
    flags: tuple[str, ...]  # spellings, canonical first
    type: Callable[[str], Any] | None  # None: a switch (store_true)
    dump_key: str | None = None  # the name in the engine's own argument dump (None: same as field)
    axis: str | None = None  # the matrix axis a fix of this knob sets (None: set as a flag)

    @property
    def flag(self) -> str:
        return self.flags[0]

    @property
    def is_switch(self) -> bool:
        return self.type is None

    @property
    def key(self) -> str:
        """The knob's name in the engine's argument dump."""
        return self.dump_key or self.field


# The matrix's server axes every engine's launch sets (`[server]` tp and the memory axes), in the order they are
# appended to the launch command; each engine names its flag for them in its knob table (`axis`).
SERVER_AXES = ("tp", "mem_fraction_static", "max_running_requests", "context_length")


def set_server_axes(argv: list[str], settings: Mapping[str, Any], knobs: Iterable[BaseKnob],
                    set_flag: Callable[[list[str], str, Any], list[str]]) -> list[str]:
    """argv with a server tuple's SERVER_AXES set through the engine's `set_flag`, each by the canonical flag of the
    knob whose `axis` it is: `tp` always (an int), the others where the tuple gives them."""
    flag = {k.axis: k.flag for k in knobs if k.axis in SERVER_AXES}
    argv = set_flag(argv, flag["tp"], int(settings["tp"]))
    for axis in SERVER_AXES[1:]:
        if settings.get(axis) is not None:
            argv = set_flag(argv, flag[axis], settings[axis])
    return argv


@dataclass(frozen=True)
class FlagList:
    release: str  # the release the list was written from
    kinds: dict[str, str]  # flag -> "switch" | "value" | "optional" | "list"

    def resolve(self, flag: str) -> str | None:
        """The option argparse would take `flag` for; None when the release has no such option.

        A prefix that fits several options is the engine's own start-up error (argparse: "ambiguous option")."""
        if flag in self.kinds:
            return flag
        if not flag.startswith("--") or len(flag) < 3:
            return None
        cands = sorted(f for f in self.kinds if f.startswith(flag))
        if len(cands) > 1:
            raise FlagError(f"ambiguous option: {flag} could match {', '.join(cands[:6])}"
                            + (" ..." if len(cands) > 6 else "") + f" (the engine's parser, release {self.release})")
        return cands[0] if cands else None

    def takes_value(self, flag: str) -> bool:
        return self.kinds.get(flag, "value") != "switch"


def _release(name: str) -> Version | None:
    try:
        return Version(name)
    except InvalidVersion:
        return None


@cache
def _lists(folder: str) -> tuple[tuple[Version, Path], ...]:
    found = [(v, p) for p in Path(folder).glob("*.txt") if (v := _release(p.stem)) is not None]
    return tuple(sorted(found))


@cache
def _read(path: Path, release: str) -> FlagList:
    kinds: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            flag, _, kind = line.partition(" ")
            kinds[flag] = kind.strip() or "value"
    return FlagList(release, kinds)


def flag_list(folder: Path, release: str | None) -> FlagList:
    """The list of the newest release at or below `release` (the oldest list for older releases; the newest when
    `release` is None or unreadable)."""
    lists = _lists(str(folder))
    if not lists:
        raise FileNotFoundError(f"no flag lists in {folder}")
    want = _release(release) if release else None
    chosen = lists[-1]
    if want is not None:
        older = [item for item in lists if item[0] <= Version(want.base_version)]
        chosen = older[-1] if older else lists[0]
    return _read(chosen[1], str(chosen[0]))


def unknown_flags_warning(engine: str, release: str, unknown: tuple[str, ...]) -> str | None:
    """The plan's warning for flags the release's parser does not have (it would refuse to start)."""
    if not unknown:
        return None
    return (f"unknown to {engine} {release} (its parser would stop with 'unrecognized arguments'; not planned): "
            + " ".join(unknown))


def unknown_flags_failure(engine: str, folder: Path, release: str | None, unknown: tuple[str, ...]) -> str | None:
    """The verdict's error for flags the release's parser does not have: argparse exits before anything loads
    ("unrecognized arguments"), so the server does not start. A flag no known release has is a typo, named with the
    nearest flag of that release; a flag another release has is named with the releases that have it, and is a
    failure only when the release was given (without one the newest is assumed, and the plan keeps the warning). A
    release outside the span of the flag lists (older than the oldest, newer than the newest) cannot be checked:
    the warning stands alone."""
    import difflib

    words = [w.split()[0].split("=", 1)[0] for w in unknown if w.startswith("-")]
    lists = _lists(str(folder))
    if not words or not lists:
        return None
    want = _release(release) if release else None
    if want is not None and not lists[0][0] <= Version(want.base_version) <= lists[-1][0]:
        return None
    flags = flag_list(folder, release)
    typos, elsewhere = [], []
    for w in words:
        where = [str(v) for v, p in lists if w in _read(p, str(v)).kinds]
        if where:
            span = where[0] if len(where) == 1 else f"{where[0]} to {where[-1]}"
            elsewhere.append(f"{w} (a flag of {engine} {span}, not of {flags.release})")
            continue
        near = difflib.get_close_matches(w, list(flags.kinds), n=1, cutoff=0.75)
        typos.append(f"{w} (did you mean {near[0]}?)" if near else
                     f"{w} (in no {engine} release specbench has read; another release's: pass --engine-version)")
    if not typos and (release is None or not elsewhere):
        return None
    return (f"{engine} {flags.release}'s argument parser exits before anything loads: unrecognized arguments: "
            + ", ".join(typos + elsewhere))


def fail_on_unknown(out: MutableMapping[str, object], failure: str | None) -> None:
    """Make a plan's verdict the parser's exit: status fails, the error and the reason say it, and no fix is offered
    that keeps the unknown flag (the fix is to spell it as the release does)."""
    if not failure:
        return
    out["status"], out["error"] = "fails", failure
    out["reason"] = f"{failure}. Without it: {out.get('reason') or ''}".rstrip()
    out["fixes"] = []
