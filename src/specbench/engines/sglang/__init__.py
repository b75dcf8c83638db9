"""SGLang: planned (`api.py`, `plan.py`, `formulas.py`, `pools.py`, `fixes.py`), its logs read (`loglines.py`,
`logrules.py`, `budget.py`, `explain.py`) and its servers driven (`launch.py`). Light: the work is imported
inside the methods."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

from specbench.engines.base import EngineModules, FixJson, LogParts, LogTables, PlanParts, ServerAdapter

if TYPE_CHECKING:
    from specbench.contracts import EnginePlan
    from specbench.contracts_inputs import PlanOptions
    from specbench.logs.facts import LogFacts

_ENTRY_POINTS = ("sglang.launch_server", "sglang/launch_server", "sglang.launch_server.py")
_IMAGE = re.compile(r"(^|/)(sglang|sgl-dev)(:|$)")  # lmsysorg/sglang:<tag>, rocm/sgl-dev:<tag>


class SglangEngine(EngineModules):
    name = "sglang"
    is_default = True  # a command no engine recognises is read with SGLang's flags (the historical behaviour)

    @staticmethod
    @lru_cache(maxsize=1)
    def plan_parts() -> PlanParts:
        from specbench.engines.sglang import knobs, render

        return PlanParts(render.render_plan, knobs.fix_axis)

    @staticmethod
    @lru_cache(maxsize=1)
    def log_parts() -> LogParts:
        from specbench.engines.sglang import budget, caps, explain, failures, logdiff, logfixes, loglines

        return LogParts(budget.rows, explain.started_headline, explain.failure_sentences, logfixes.failure_fixes,
                        logdiff.pool_change, logdiff.candidate, logdiff.failure_sentence,
                        LogTables(loglines.LINES, loglines.LATE_BOOT, failures.FAILURES, tuple(caps.WARNINGS)))

    def recognise(self, argv: Sequence[str]) -> int:
        words = [w.lower() for w in argv]
        if any(w.endswith(_ENTRY_POINTS) for w in words) or any(
                a.endswith("sglang") and b == "serve" for a, b in zip(words, words[1:])):
            return 2
        return 1 if any(w.split("=", 1)[0] == "--model-path" for w in words) else 0

    def image_argv(self, image: str, args: Sequence[str], entrypoint: str | None) -> list[str] | None:
        """The words an SGLang image runs: lmsysorg/sglang has no ENTRYPOINT (docker/Dockerfile of
        sgl-project/sglang), so the words after the image are the command itself."""
        if not _IMAGE.search(image.lower()):
            return None
        words = ([entrypoint] if entrypoint else []) + list(args)
        return words if self.recognise(words) else None

    def plan(self, argv: list[str], opts: PlanOptions) -> EnginePlan:
        from specbench.engines.sglang.api import plan_sglang_command

        return plan_sglang_command(argv, opts)

    def version_from_log(self, lines: Sequence[str]) -> str | None:
        from specbench.engines.sglang.loglines import version_from_log

        return version_from_log(lines)

    def release_from_args(self, facts: LogFacts) -> str | None:
        """A dump with the <= 0.5.13 argument names is planned on the 0.5.12 rules."""
        from specbench.engines.sglang import logrules

        return "0.5.12" if logrules.dump_predates_0514(facts.server_args) else None

    def log_plan_argv(self, facts: LogFacts, text: str | None) -> list[str]:
        from specbench.engines.sglang.knobs import PLAN_KEYS
        from specbench.logs.serverargs import argv_from_dump

        return argv_from_dump(["python", "-m", "sglang.launch_server"], facts.server_args, PLAN_KEYS)

    def started_caps(self, facts: LogFacts) -> list[str]:
        from specbench.engines.sglang.explain import started_caps

        return started_caps(facts)

    def started_notes(self, facts: LogFacts) -> list[str]:
        from specbench.engines.sglang.explain import started_notes

        return started_notes(facts)

    def log_notes(self, facts: LogFacts) -> list[str]:
        from specbench.engines.sglang.logrules import log_notes

        return log_notes(facts)

    def log_fixes(self, facts: LogFacts, kind: str) -> list[FixJson]:
        from specbench.engines.sglang.logrules import log_derived_fixes

        try:
            return list(log_derived_fixes(facts, kind))
        except (AttributeError, ValueError, TypeError, ZeroDivisionError):
            return []


def _server(version: str | None) -> ServerAdapter:
    from specbench.engines.sglang.launch import SglangServer

    return SglangServer(version)


ENGINE = SglangEngine()
SERVERS = {"sglang": _server}
