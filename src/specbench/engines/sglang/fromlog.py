"""An SGLang log's argument dump (`server_args=ServerArgs(...)`) read as the planner reads a launch: rebuilt into
launch words (`logs/serverargs.py::argv_from_dump` over the planner's own keys, knobs.py::PLAN_KEYS) and parsed by
`args.py::parse_sglang_argv` into `SglangArgs`, so the doctor's speculative depth D and Mamba slots per request come
from the planner's formulas (`formulas.py::resolve_spec`, `formulas.py::mamba_ratio`), not from a second reading of
the raw dump."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from specbench.engines.sglang.args import SglangArgs, parse_sglang_argv
from specbench.engines.sglang.knobs import PLAN_KEYS
from specbench.errors import FlagError, UserError
from specbench.logs.serverargs import argv_from_dump


@lru_cache(maxsize=64)
def _parsed(words: tuple[str, ...]) -> SglangArgs | None:
    try:
        return parse_sglang_argv(list(words))  # the newest flag list reads both mamba-strategy spellings
    except (FlagError, UserError, ValueError, TypeError):
        return None


def args_from_dump(dump: dict[str, Any]) -> SglangArgs | None:
    """The dump as the planner's `SglangArgs`; None without a dump or when the planner cannot read it."""
    if not dump:
        return None
    return _parsed(tuple(argv_from_dump(["python", "-m", "sglang.launch_server"], dump, PLAN_KEYS)))
