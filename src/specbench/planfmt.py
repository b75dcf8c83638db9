"""Pieces every engine's plan renderer shares: number formatting, reading the plan, the memory table, the verdict,
the warnings, the ignored flags, the per-TP table and the nearest-fixes list (rich). A renderer reads the plan as a `specbench.contracts.PlanResult`:
the keys both engines emit as fields, an engine's own keys through `extra`."""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from specbench.contracts import PlanResult
from specbench.contracts_per_tp import TpRow


def fmt(x: Any, nd: int = 2) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{nd}f}"
    return f"{x:,}" if isinstance(x, int) else str(x)


def print_fixes(p: PlanResult, con: Console) -> None:
    """The nearest working configurations of a failing plan (any engine), nearest first."""
    if not p.fixes or p.status == "ok":
        return
    con.print("[bold]nearest fixes:[/]")
    for f in p.fixes[:6]:
        ch = " ".join(f"{k} {v}" for k, v in f.change.items())
        res = f.result
        if res is None:  # only the doctor's cap fixes have none; a plan's fixes are all planned
            con.print(f"  {escape(ch)}", highlight=False)
            continue
        slots = res.extra.get("max_mamba_cache_size")
        con.print(f"  {escape(ch)}: starts, {fmt(res.kv_tokens)} KV tokens, "
                  f"max_running_requests={res.max_running_requests}"
                  + (f", {slots} Mamba slots" if slots is not None else ""), highlight=False)


def _layout(p: PlanResult) -> str:
    """TP, and DP / PP where the launch has them (a -dp=8 launch is not "x TP1")."""
    return f"TP{p.tp}" + (f" x DP{p.dp}" if p.dp > 1 else "") + (f" x PP{p.pp}" if p.pp > 1 else "")


def print_headline(p: PlanResult, con: Console, *, kind: bool) -> None:
    """What was planned: the model (with its kind when `kind`), the GPU and TP, the engine's rule set."""
    what = f" ({p.model_kind})" if kind else ""
    con.print(f"[bold]{escape(str(p.model))}[/]{what} on {escape(str(p.gpu))} x {_layout(p)} — "
              f"{p.engine} {escape(str(p.engine_version))} rules ({p.era})", highlight=False)


def verdict(p: PlanResult) -> str:
    return "[bold green]STARTS[/]" if p.status == "ok" else "[bold red]FAILS[/]"


def print_outcome(p: PlanResult, con: Console, counts: str) -> None:
    """STARTS / FAILS with the engine's own counts (`counts`, rich markup), the plan's error in red, its reason
    where it says more than the error, and its warnings."""
    con.print(f"{verdict(p)}: {counts}")
    if p.error:
        con.print(f"[red]{escape(str(p.error))}[/]", highlight=False, soft_wrap=True)
    if p.reason and p.reason != p.error:
        con.print(escape(str(p.reason)), highlight=False, soft_wrap=True)
    print_warnings(p, con)


def print_ignored(p: PlanResult, con: Console, said: AbstractSet[str] = frozenset()) -> None:
    """The flags the plan read and ignored (no effect on memory), less those the renderer already named (`said`)."""
    ignored = [w for w in p.ignored_flags if w not in said]
    if ignored:
        con.print(f"[dim]ignored (no effect on memory): {escape(' '.join(ignored))}[/]", highlight=False)


def print_alternatives(p: PlanResult, columns: Sequence[tuple[str, str]], con: Console) -> None:
    """What else would start: the nearest configuration per TP (`columns`: the engine's row fields), then the
    nearest fixes of a failing plan."""
    print_per_tp(p.per_tp or (), columns, con)
    print_fixes(p, con)


def memory_table(title: str) -> Table:
    """The plan's memory budget: one row per item, its GiB and where the number comes from."""
    t = Table(title=title, show_header=True)
    t.add_column("item")
    t.add_column("GiB", justify="right")
    t.add_column("where it comes from")
    return t


def print_warnings(p: PlanResult, con: Console) -> None:
    for w in p.warnings:
        con.print(f"[yellow]warning:[/] {escape(str(w))}", highlight=False, soft_wrap=True)


def print_per_tp(rows: Sequence[TpRow], columns: Sequence[tuple[str, str]], con: Console) -> None:
    """The nearest working configuration at each TP size: `columns` are the row's (field, heading) pairs."""
    if not rows:
        return
    t = Table(title="nearest working configurations per TP size")
    for c in ("TP", "as requested", *(head for _, head in columns)):
        t.add_column(c, justify="right")
    for row in rows:
        if row.error:
            t.add_row(str(row.tp), "n/a", escape(str(row.error)), *([""] * (len(columns) - 1)))
            continue
        t.add_row(str(row.tp), row.status_as_requested or "-", *(fmt(getattr(row, key)) for key, _ in columns))
    con.print(t)
