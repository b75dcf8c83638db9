"""Pieces every engine's plan renderer shares: number formatting and the nearest-fixes list (rich)."""

from __future__ import annotations

from typing import Any, Mapping

from rich.console import Console


def fmt(x: Any, nd: int = 2) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{nd}f}"
    return f"{x:,}" if isinstance(x, int) else str(x)


def print_fixes(r: Mapping[str, Any], con: Console) -> None:
    """The nearest working configurations of a failing plan (any engine), nearest first."""
    fixes = r.get("fixes") or []
    if not fixes or r["status"] == "ok":
        return
    con.print("[bold]nearest fixes:[/]")
    for f in fixes[:6]:
        ch = " ".join(f"{k} {v}" for k, v in f["change"].items())
        res = f["result"]
        slots = res.get("max_mamba_cache_size")
        con.print(f"  {ch}: starts, {fmt(res.get('kv_tokens'))} KV tokens, "
                  f"max_running_requests={res.get('max_running_requests')}"
                  + (f", {slots} Mamba slots" if slots is not None else ""), highlight=False)
