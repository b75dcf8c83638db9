"""Shared pieces of the line parsers: number patterns and converters, and the accumulator one boot is folded
into before it is frozen as `LogFacts`."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from specbench.logs.facts import EngineError, GraphCapture

NUM = r"(\d+(?:\.\d+)?)"
INT = r"(\d[\d,]*)"
GB = r" ?Gi?B\b"


def to_float(s: str | None) -> float | None:
    try:
        return float(s) if s is not None else None
    except ValueError:
        return None


def to_int(s: str | None) -> int | None:
    try:
        return int(s.replace(",", "")) if s is not None else None
    except ValueError:
        return None


def find(pattern: re.Pattern[str], text: str, conv: Callable[[str | None], Any] = to_float) -> Any:
    m = pattern.search(text)
    return conv(m.group(1)) if m else None


def first_of(text: str, conv: Callable[[str | None], Any], *patterns: re.Pattern[str]) -> Any:
    for pat in patterns:
        val = find(pat, text, conv)
        if val is not None:
            return val
    return None


@dataclass
class Acc:
    """Mutable accumulator while reading one boot; frozen into LogFacts at the end."""

    v: dict[str, Any] = field(default_factory=dict)
    load_begins: int = 0
    load_ends: int = 0
    kv_lines: int = 0
    pool_ends: int = 0
    graphs: list[GraphCapture] = field(default_factory=list)
    pending_graph: dict[str, GraphCapture] = field(default_factory=dict)
    lists: dict[str, list[Any]] = field(default_factory=dict)
    errors: list[EngineError] = field(default_factory=list)
    server_args: dict[str, Any] = field(default_factory=dict)
    marks: dict[str, int] = field(default_factory=dict)  # engine name -> lines that engine's `mark` matched

    def first(self, key: str, value: Any) -> None:
        """Keep the first value seen for a key (later repeats, e.g. other ranks' copies, do not overwrite)."""
        if value is not None and key not in self.v:
            self.v[key] = value

    def push(self, key: str, value: Any) -> None:
        if value is not None:
            self.lists.setdefault(key, []).append(value)


