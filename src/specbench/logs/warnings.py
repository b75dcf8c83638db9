"""Caps, resets, reductions, overrides and near-misses the engines log at start-up, as `warnings`. Pure, never raises.

Each engine lists its own lines in `specbench.engines.<name>.loglines.WARNINGS` (a tuple of `WarningRule`); the
doctor collects them from the engine folders and passes them here, so this module names no engine. A warning is
`{"kind", "message", "fixes", "line", "cap", "capped"}`: `message` is the engine's own record (prefixes stripped, a
record wrapped over several physical lines joined back), `fixes` what to change (`{"change": {flag: value}, "source":
"engine" | "log" | "planner", "why": ...}`; value None where the engine names the flag but no value).

A cap is a limit the engine imposed on what the user asked for: a rule is a cap only through its `cap_of`, which
reads from the line (and the facts) which asked value was lowered, to what, and why (`Cap`); `cap` is True exactly
when that gave a `Cap` with the lowered value. Routine lines (a block size aligned, a page padded, layers added to a
KV group) have no `cap_of` and are notes. A log that started with a cap is "started, but capped".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypedDict

from specbench.logs.facts import LogFacts
from specbench.logs.normalize import Line


class WarningFix(TypedDict):
    """One fix a warning rule reads from its log line (doctor --json `warnings[].fixes[]`): the flags to change (a
    None value: the line names the direction, not the value), where it comes from (`engine`: the engine's own
    advice; `log`: the numbers of the line) and why."""

    change: dict[str, object]
    source: str
    why: str


FixFn = Callable[["re.Match[str]", str, LogFacts], list[WarningFix]]


class CapJson(TypedDict):
    """A warning's `capped` in doctor --json (Cap.to_dict)."""
    value: str
    flag: str
    asked: object  # as the log says it (None: not printed)
    to: float | int
    why: str


@dataclass(frozen=True)
class Cap:
    """What the engine lowered: `value` (the setting, as the engine names it), the `flag` that asks for it, the
    `asked` value (None when the log does not print it: the engine's default or an argument not dumped), the value
    it was lowered `to`, and `why` (the engine's reason, with its numbers)."""

    value: str
    flag: str
    to: float | int
    why: str
    asked: object = None

    def to_dict(self) -> CapJson:
        return {"value": self.value, "flag": self.flag, "asked": self.asked, "to": self.to, "why": self.why}


class WarningJson(TypedDict):
    """One warning in doctor --json (LogWarning.to_dict; diagnosis_contract.py::StartupWarning reads it back)."""
    kind: str
    message: str
    fixes: list[WarningFix]
    line: int
    cap: bool
    capped: CapJson | None


CapFn = Callable[["re.Match[str]", LogFacts], "Cap | None"]


@dataclass(frozen=True)
class WarningRule:
    kind: str
    pattern: re.Pattern[str]
    cap_of: CapFn | None = None  # a cap only when this names the lowered value (None: a note)
    fixes: FixFn | None = None
    kind_fn: Callable[[re.Match[str]], str] | None = None  # a kind that depends on the numbers (e.g. negative)
    when: Callable[[re.Match[str], LogFacts], bool] | None = None  # only when this holds (e.g. concurrency < 1)
    key: str = ""  # cheap substring every matching line contains (skips the regex on most lines)


@dataclass(frozen=True)
class LogWarning:
    kind: str
    message: str
    line: int
    fixes: tuple[WarningFix, ...] = field(default_factory=tuple)
    capped: Cap | None = None

    @property
    def cap(self) -> bool:
        """True when the engine serves less than asked: the warning names the lowered value."""
        return self.capped is not None

    def to_dict(self) -> WarningJson:
        return {"kind": self.kind, "message": self.message, "fixes": list(self.fixes), "line": self.line,
                "cap": self.cap, "capped": self.capped.to_dict() if self.capped else None}


_FLAG = re.compile(r"(--[a-z][a-z0-9\-]+)(?:(?: to |[ =])(?!or\b|and\b|to\b)([0-9][\w.]*|[a-z][\w.]*\d[\w.]*|bfloat16|float16|"
                   r"auto|true|false))?")


def engine_flags(text: str, why: str) -> list[WarningFix]:
    """The flags the engine's own suggestion names (`To raise it: increase --x or --y, or ... --z bfloat16`)."""
    out: list[WarningFix] = []
    seen = set()
    for m in _FLAG.finditer(text):
        flag = m.group(1)
        if flag in seen:
            continue
        seen.add(flag)
        out.append({"change": {flag: _flag_value(m.group(2))}, "source": "engine", "why": why})
    return out


def _flag_value(text: str | None) -> object:
    """The value a suggestion names: an int, a float, else the word (None: the flag alone)."""
    val = text.rstrip(".") if text else None
    if val and val.isdigit():
        return int(val)
    if val and re.fullmatch(r"\d+\.\d+", val):
        return float(val)
    return val


def reached_late_boot(lines: list[Line], patterns: Sequence[re.Pattern[str]]) -> bool:
    """True when any rank logged one of the engines' last start-up steps (`loglines.LATE_BOOT`)."""
    return any(p.search(ln.text) for ln in lines for p in patterns)


def _joined(lines: list[Line], idx: int) -> str:
    """The record at idx with its wrapped continuation lines (a paste that broke one record over several lines)."""
    text = lines[idx].text.strip()
    for nxt in lines[idx + 1: idx + 5]:
        if text.endswith((".", "!", ":")) or nxt.rank is not None or nxt.no == lines[idx].no:
            break
        t = nxt.text.strip()
        if not t or not (t[0].islower() or t[0] in "(-"):
            break
        text += " " + t
    return text


def find_warnings(lines: list[Line], facts: LogFacts, rules: Sequence[WarningRule]) -> list[LogWarning]:
    """Every warning of the engines' tables in the boot, the first of each kind (other ranks repeat them)."""
    seen: set[str] = set()
    out: list[LogWarning] = []
    for idx, line in enumerate(lines):
        for rule in rules:
            if rule.key and rule.key not in line.text:
                continue
            m = rule.pattern.search(line.text)
            text = _joined(lines, idx)
            if m is None and len(text) > len(line.text.strip()):
                m = rule.pattern.search(text)  # a record wrapped over lines (a paste): its numbers on the next one
            if m is None:
                continue
            try:
                m = rule.pattern.search(text) or m
                if rule.when is not None and not rule.when(m, facts):
                    continue
                kind = rule.kind_fn(m) if rule.kind_fn else rule.kind
                if kind in seen:
                    continue
                fixes = tuple(rule.fixes(m, text, facts)) if rule.fixes else ()
                capped = rule.cap_of(m, facts) if rule.cap_of else None
            except (ValueError, TypeError, ZeroDivisionError, IndexError, AttributeError):
                continue
            seen.add(kind)
            out.append(LogWarning(kind, text[:1000], line.no, fixes, capped))
    return out
