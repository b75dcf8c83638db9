"""The memory budget one boot used, as table rows (GiB, one GPU, the lowest rank in the log). Pure.

SGLang order (managers/scheduler.py::Scheduler.init_model_worker@0.5.23, `KVCacheConfigurator._profile_available_bytes`
in mem_cache/kv_cache_configurator.py@0.5.23): free before load B -> target weights -> [draft weights, 0.5.14+]
-> rest A -> slack B·(1-f) kept free by mem_fraction_static -> Mamba state pool -> KV pool -> [draft weights and draft
KV, <= 0.5.13] -> CUDA graphs -> free at the end. vLLM: total x utilization = budget -> weights, non-torch,
activation peak -> KV.
"""

from __future__ import annotations

from specbench.contracts import BudgetRow  # the row type lives with the other JSON contracts; re-exported
from specbench.logs.facts import LogFacts

__all__ = ["BudgetRow", "budget_rows", "round_gib"]


def round_gib(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


def budget_rows(f: LogFacts) -> list[BudgetRow]:
    """The rows of the engine that wrote the log (its own budget terms)."""
    from specbench.engines.base import engine

    return engine(f.engine).budget_rows(f)
