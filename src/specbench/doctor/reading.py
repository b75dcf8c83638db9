"""What the doctor reads a log with: every engine's `LogTables` (line readers, last start-up steps, failure table,
warning rules: `Engine.log_tables()`, engines/base.py), merged in the registry's order, so the data layer below
(`specbench.logs`) names no engine; and the log read with them."""

from __future__ import annotations

import re
from functools import lru_cache

from specbench.engines.base import LogTables, engines
from specbench.logs import failures as fl
from specbench.logs import parse as ps
from specbench.logs import warnings as wr
from specbench.logs.facts import LogFacts
from specbench.logs.normalize import Line


@lru_cache(maxsize=1)
def _tables() -> tuple[LogTables, ...]:
    return tuple(e.log_tables() for e in engines().values())


@lru_cache(maxsize=1)
def engine_lines() -> tuple[ps.EngineLines, ...]:
    return tuple(t.lines for t in _tables())


@lru_cache(maxsize=1)
def failure_table() -> fl.EngineFailures:
    return fl.merge([t.failures for t in _tables()])


@lru_cache(maxsize=1)
def warning_rules() -> tuple[wr.WarningRule, ...]:
    return tuple(r for t in _tables() for r in t.warnings)


@lru_cache(maxsize=1)
def late_boot_patterns() -> tuple[re.Pattern[str], ...]:
    return tuple(t.late_boot for t in _tables())


def parse_text(raw: bytes | str) -> LogFacts:
    """Whole log text -> facts of its last boot, read with every engine's line formats. Never raises."""
    return ps.parse_text(raw, engine_lines())


def split_boots(lines: list[Line]) -> list[list[Line]]:
    return ps.split_boots(lines, engine_lines())


def facts_from_lines(lines: list[Line], boots: int = 1) -> LogFacts:
    return ps.facts_from_lines(lines, engine_lines(), boots=boots)


def classify(lines: list[Line]) -> fl.Failure | None:
    return fl.classify(lines, failure_table())


def survived_errors(lines: list[Line]) -> list[str]:
    return fl.survived_errors(lines, failure_table())


def where(kind: str) -> str:
    return fl.where(kind, failure_table())


def find_warnings(lines: list[Line], facts: LogFacts) -> list[wr.LogWarning]:
    return wr.find_warnings(lines, facts, warning_rules())


def reached_late_boot(lines: list[Line]) -> bool:
    return wr.reached_late_boot(lines, late_boot_patterns())


def search_words() -> tuple[bytes, ...]:
    """What the reader keeps of a long log's middle: the failure table's anchor words (logs/reader.py)."""
    return tuple(a.encode() for a in failure_table().anchors)
