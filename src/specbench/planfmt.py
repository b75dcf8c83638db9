"""Pieces every engine's plan renderer shares: number formatting, reading the plan, the nearest-fixes list (rich)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.markup import escape

from specbench.contracts import PlanResult


def fmt(x: Any, nd: int = 2) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{nd}f}"
    return f"{x:,}" if isinstance(x, int) else str(x)


def as_plan(r: PlanResult | Mapping[str, Any]) -> PlanResult:
    """The plan as typed fields, whether the caller passes the contract dict or a PlanResult."""
    return r if isinstance(r, PlanResult) else PlanResult.from_json(r)


def print_fixes(p: PlanResult, con: Console) -> None:
    """The nearest working configurations of a failing plan (any engine), nearest first."""
    if not p.fixes or p.status == "ok":
        return
    con.print("[bold]nearest fixes:[/]")
    for f in p.fixes[:6]:
        ch = " ".join(f"{k} {v}" for k, v in f.change.items())
        res = f.result
        slots = res.extra.get("max_mamba_cache_size")
        con.print(f"  {escape(ch)}: starts, {fmt(res.kv_tokens)} KV tokens, "
                  f"max_running_requests={res.max_running_requests}"
                  + (f", {slots} Mamba slots" if slots is not None else ""), highlight=False)
