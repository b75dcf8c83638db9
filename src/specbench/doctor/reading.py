"""What the doctor reads a log with: one `LogReader` over every engine's `LogTables` (line readers, last start-up
steps, failure table, warning rules: `Engine.log_tables()`, engines/base.py), merged in the registry's order, so the
data layer below (`specbench.logs`, whose functions take the tables as arguments) names no engine."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from specbench.engines.base import engines
from specbench.logs import failures as fl
from specbench.logs import parse as ps
from specbench.logs import warnings as wr
from specbench.logs.facts import LogFacts
from specbench.logs.normalize import Line


@dataclass(frozen=True)
class LogReader:
    """Every engine's log knowledge at once, and what the doctor asks of a log with it."""

    lines: tuple[ps.EngineLines, ...]
    failures: fl.EngineFailures
    warnings: tuple[wr.WarningRule, ...]
    late_boot: tuple[re.Pattern[str], ...]

    def facts_of_text(self, raw: bytes | str) -> LogFacts:
        """Whole log text -> facts of its last boot. Never raises."""
        return ps.parse_text(raw, self.lines)

    def boots(self, lines: list[Line]) -> list[list[Line]]:
        return ps.split_boots(lines, self.lines)

    def facts(self, lines: list[Line], boots: int = 1) -> LogFacts:
        return ps.facts_from_lines(lines, self.lines, boots=boots)

    def failure(self, lines: list[Line]) -> fl.Failure | None:
        return fl.classify(lines, self.failures)

    def survived_errors(self, lines: list[Line]) -> list[str]:
        return fl.survived_errors(lines, self.failures)

    def failure_where(self, kind: str) -> str:
        """Where in the engine a failure kind is raised (the failure table's words)."""
        return fl.where(kind, self.failures)

    def warnings_in(self, lines: list[Line], facts: LogFacts) -> list[wr.LogWarning]:
        return wr.find_warnings(lines, facts, self.warnings)

    def reached_late_boot(self, lines: list[Line]) -> bool:
        return wr.reached_late_boot(lines, self.late_boot)

    def search_words(self) -> tuple[bytes, ...]:
        """What the bounded reader keeps of a long log's middle: the failure table's anchor words (logs/reader.py)."""
        return tuple(a.encode() for a in self.failures.anchors)


@lru_cache(maxsize=1)
def log_reader() -> LogReader:
    tables = tuple(e.log_tables() for e in engines().values())
    return LogReader(tuple(t.lines for t in tables), fl.merge([t.failures for t in tables]),
                     tuple(r for t in tables for r in t.warnings), tuple(t.late_boot for t in tables))
