"""The memory budget one boot used, as table rows (GiB, one GPU, the lowest rank in the log). Pure.

SGLang order (research sglang-memory.md §1, §3): free before load B -> target weights -> [draft weights, 0.5.14+]
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
