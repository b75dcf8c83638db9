"""vLLM: its flags once (`knobs.py`, read by `args.py`), planned (`plan.py`, `sizing.py`, `gpu.py`, `cpu.py`), its
logs read (`loglines.py`, `budget.py`, `explain.py`), its servers driven (`launch.py`), and its CPU build embedded as
the default engine (`local.py`). Light: the work is imported inside the methods."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

_IMAGE = re.compile(r"(^|/)vllm(-openai[\w.-]*)?(:|$)")  # vllm/vllm-openai[-cpu|-rocm]:<tag>, rocm/vllm:<tag>


def is_vllm_command(argv: Sequence[str]) -> bool:
    """`vllm` among the first four words after the leading VAR=value ones (`vllm serve`, `python -m vllm...`):
    here, not in args.py, so that recognising a command imports no flag table."""
    from specbench.engines.argv import is_env_word

    words = [w for w in argv if not is_env_word(w)][:4]
    return "vllm" in " ".join(words).lower()


class VllmEngine:
    name = "vllm"
    is_default = False

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

    def plan(self, argv: list[str], opts: Any) -> tuple[dict[str, Any], list[Any]]:
        from specbench.engines.vllm.plan import plan_vllm_command

        return plan_vllm_command(argv, opts), []

    def render_plan(self, result: Any, con: Any) -> None:
        from specbench.engines.vllm.render import render_plan

        render_plan(result, con)

    def version_from_log(self, lines: Sequence[str]) -> str | None:
        return None  # the vLLM line parser reads its version line itself (loglines.py)

    def release_from_args(self, facts: Any) -> str | None:
        return None

    def log_plan_argv(self, facts: Any, text: str | None) -> list[str]:
        """The engine's own dump with its env (the CPU KV space ...), so a CPU log is planned on the CPU rules."""
        from specbench.engines.vllm.knobs import PLAN_KEYS
        from specbench.engines.vllm.plan import argv_from_vllm_log
        from specbench.logs.serverargs import argv_from_dump

        argv = argv_from_vllm_log(text) if text else None
        if argv:
            return argv
        args = facts.server_args
        model = args.get("model") or args.get("model_tag") or "model"
        return argv_from_dump(["vllm", "serve", str(model)], args, PLAN_KEYS)

    def log_non_kv_gib(self, facts: Any) -> float | None:
        """The planner's non-KV (`--non-kv-gib`: everything in the budget besides the weights and K, engines/vllm/
        gpu.py) from a log: R - weights - K where the log prints all three (v1/worker/gpu_worker.py::
        determine_available_memory@0.32.0: K = R - non-KV, the weights inside non-KV), else the log's own non-KV
        sum (facts.vllm_non_kv_gib: consumed + peak, or weights + non-torch + peak) less the weights it holds."""
        R, W, K = getattr(facts, "budget_gib", None), facts.weights_gib, facts.available_kv_gib
        if None not in (R, W, K):
            return round(R - W - K, 3)
        total = facts.vllm_non_kv_gib()
        if total is None or W is None:
            return None
        return round(total - W, 3)

    def budget_rows(self, facts: Any) -> list[Any]:
        from specbench.engines.vllm.budget import rows

        return rows(facts)

    def fix_axis(self, key: str) -> str | None:
        """The matrix axis a fix of this vLLM argument sets (engines/vllm/knobs.py)."""
        from specbench.engines.vllm.knobs import fix_axis

        return fix_axis(key)

    def started_headline(self, facts: Any) -> str:
        from specbench.engines.vllm.explain import started_headline

        return started_headline(facts)

    def started_caps(self, facts: Any) -> list[str]:
        return []

    def started_notes(self, facts: Any) -> list[str]:
        return []

    def failure_sentences(self, facts: Any, failure: Any) -> list[str]:
        from specbench.engines.vllm.explain import failure_sentences

        return failure_sentences(facts, failure)

    def log_notes(self, facts: Any) -> list[str]:
        return []

    def failure_fixes(self, facts: Any, failure: Any) -> list[dict[str, Any]]:
        from specbench.engines.vllm.logfixes import failure_fixes

        return failure_fixes(facts, failure)

    def log_fixes(self, facts: Any, kind: str) -> list[dict[str, Any]]:
        return []


    def diff_pool_change(self, left: Any, right: Any) -> Any:
        from specbench.engines.vllm.logdiff import pool_change

        return pool_change(left, right)

    def diff_candidate(self, left: Any, right: Any, key: str, va: Any, vb: Any) -> Any:
        from specbench.engines.vllm.logdiff import candidate

        return candidate(left, right, key, va, vb)

    def diff_failure_sentence(self, side: str, facts: Any, kind: str | None) -> str | None:
        from specbench.engines.vllm.logdiff import failure_sentence

        return failure_sentence(side, facts, kind)


def _server(version: str | None) -> Any:
    from specbench.engines.vllm.launch import VllmServer

    return VllmServer(version)


def _local(version: str | None) -> Any:
    from specbench.engines.vllm.launch import LocalServer

    return LocalServer(version)


ENGINE = VllmEngine()
SERVERS = {"vllm": _server, "local": _local}
