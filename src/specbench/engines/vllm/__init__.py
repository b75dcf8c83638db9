"""vLLM: its flags once (`knobs.py`, read by `args.py`), planned (`plan.py`, `gpu.py`, `cpu.py` on the KV-cache sizing
as pure functions: `common.py` releases and dtypes, `pages.py` pages per layer, `pool.py` groups, per-request charge,
the pool and its checks, `layout.py` what the engine resolves from the model; sources are vLLM 0.32.0 files cited as
`file::function`, the version boundaries (`common.py::VLLM_RULE_SETS`) read from the wheels of every release 0.10.2
.. 0.33.0), its logs read (`loglines.py`, `budget.py`, `explain.py`), its servers driven (`launch.py`), and its CPU
build embedded as the default engine (`local.py`). Light: the work is imported inside the methods."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

from specbench.engines.base import EngineModules, LogParts, LogTables, PlanParts, ServerAdapter

if TYPE_CHECKING:
    from specbench.contracts import EnginePlan
    from specbench.contracts_inputs import PlanOptions
    from specbench.logs.facts import LogFacts

_IMAGE = re.compile(r"(^|/)vllm(-openai[\w.-]*)?(:|$)")  # vllm/vllm-openai[-cpu|-rocm]:<tag>, rocm/vllm:<tag>


def is_vllm_command(argv: Sequence[str]) -> bool:
    """`vllm` among the first four words after the leading VAR=value ones (`vllm serve`, `python -m vllm...`):
    here, not in args.py, so that recognising a command imports no flag table."""
    from specbench.engines.argv import is_env_word

    words = [w for w in argv if not is_env_word(w)][:4]
    return "vllm" in " ".join(words).lower()


class VllmEngine(EngineModules):
    name = "vllm"
    is_default = False

    @staticmethod
    @lru_cache(maxsize=1)
    def plan_parts() -> PlanParts:
        from specbench.engines.vllm import knobs, render

        return PlanParts(render.render_plan, knobs.fix_axis)

    @staticmethod
    @lru_cache(maxsize=1)
    def log_parts() -> LogParts:
        from specbench.engines.vllm import budget, caps, explain, failures, logdiff, logfixes, loglines

        return LogParts(budget.rows, explain.started_headline, explain.failure_sentences, logfixes.failure_fixes,
                        logdiff.pool_change, logdiff.candidate, logdiff.failure_sentence,
                        LogTables(loglines.LINES, loglines.LATE_BOOT, failures.FAILURES, tuple(caps.WARNINGS)))

    def recognise(self, argv: Sequence[str]) -> int:
        return 2 if is_vllm_command(argv) else 0

    def image_argv(self, image: str, args: Sequence[str], entrypoint: str | None) -> list[str] | None:
        """The words a vLLM image runs: vllm/vllm-openai (and -cpu, -rocm) have ENTRYPOINT ["vllm", "serve"]
        (docker/Dockerfile of vllm-project/vllm, `vllm-openai` stage), so `IMAGE MODEL ...` or `IMAGE --model X`
        are `vllm serve` arguments; an --entrypoint replaces it."""
        if not _IMAGE.search(image.lower()):
            return None
        if entrypoint:
            return [entrypoint, *args]
        if args and self.recognise(args):  # the command spelled out again after the image
            return list(args)
        return ["vllm", "serve", *args]

    def plan(self, argv: list[str], opts: PlanOptions) -> EnginePlan:
        from specbench.engines.vllm.plan import plan_vllm_command

        return plan_vllm_command(argv, opts)

    def log_plan_argv(self, facts: LogFacts, text: str | None) -> list[str]:
        """The engine's own dump with its env (the CPU KV space ...), so a CPU log is planned on the CPU rules."""
        from specbench.engines.vllm.fromlog import argv_from_vllm_log
        from specbench.engines.vllm.knobs import PLAN_KEYS
        from specbench.logs.serverargs import argv_from_dump

        argv = argv_from_vllm_log(text) if text else None
        if argv:
            return argv
        args = facts.server_args
        model = args.get("model") or args.get("model_tag") or "model"
        return argv_from_dump(["vllm", "serve", str(model)], args, PLAN_KEYS)

    def log_non_kv_gib(self, facts: LogFacts) -> float | None:
        """The planner's non-KV (`--non-kv-gib`: everything in the budget besides the weights and K, engines/vllm/
        gpu.py) from a log: R - weights - K where the log prints all three (v1/worker/gpu_worker.py::
        determine_available_memory@0.32.0: K = R - non-KV, the weights inside non-KV), else the log's own non-KV
        sum (facts.vllm_non_kv_gib: consumed + peak, or weights + non-torch + peak) less the weights it holds."""
        R, W, K = getattr(facts, "budget_gib", None), facts.weights_gib, facts.available_kv_gib
        if R is not None and W is not None and K is not None:
            return round(R - W - K, 3)
        total = facts.vllm_non_kv_gib()
        if total is None or W is None:
            return None
        return round(total - W, 3)


def _server(version: str | None) -> ServerAdapter:
    from specbench.engines.vllm.launch import VllmServer

    return VllmServer(version)


def _local(version: str | None) -> ServerAdapter:
    from specbench.engines.vllm.launch import LocalServer

    return LocalServer(version)


ENGINE = VllmEngine()
SERVERS = {"vllm": _server, "local": _local}
