"""vLLM's plan as a person reads it: its own budget rows, the verdict, vLLM's knobs per TP (rich).

Reads the plan as a `specbench.contracts.PlanResult`: the keys both engines emit as fields, vLLM's own keys
(docs/contracts.md, "emitted by: vllm") through `extra`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from specbench.contracts import PlanResult, VllmTpRow
from specbench.planfmt import as_plan
from specbench.planfmt import fmt as _g
from specbench.planfmt import print_fixes as _print_fixes


def render_plan(r: PlanResult | Mapping[str, Any], con: Console) -> None:
    """vLLM's plan: its own budget rows (specbench.engines.vllm.plan.budget_rows) and vLLM's knobs per TP."""
    p = as_plan(r)
    x = p.extra
    ok = p.status == "ok"
    con.print(f"[bold]{escape(str(p.model))}[/] on {escape(str(p.gpu))} x TP{p.tp} — "
              f"vllm {escape(str(p.engine_version))} rules ({p.era})", highlight=False)
    t = Table(title="memory plan (GiB per worker)")
    t.add_column("item")
    t.add_column("GiB", justify="right")
    t.add_column("where it comes from")
    for item, gib, src in x.get("budget_rows") or []:
        t.add_row(str(item), _g(gib), str(src))
    con.print(t)
    for line in p.log_lines:
        con.print(f"  [dim]{escape(str(line))}[/]", highlight=False, soft_wrap=True)
    verdict = "[bold green]STARTS[/]" if ok else "[bold red]FAILS[/]"
    con.print(f"{verdict}: KV tokens={_g(p.kv_tokens)}, max concurrency={_g(x.get('max_concurrency'))}, "
              f"max_running_requests={p.max_running_requests}")
    if p.error:
        con.print(f"[red]{escape(p.error)}[/]", highlight=False, soft_wrap=True)
    if p.reason and p.reason != p.error:
        con.print(escape(str(p.reason)), highlight=False, soft_wrap=True)
    for w in p.warnings:
        con.print(f"[yellow]warning:[/] {escape(str(w))}", highlight=False, soft_wrap=True)
    not_modelled = [str(line) for line in x.get("not_modelled") or ()]
    for line in not_modelled:  # real flags whose memory effect the rules leave out: said, never passed as harmless
        con.print(f"[yellow]not modelled:[/] {escape(line)}", highlight=False, soft_wrap=True)
    said = {line.split(": ", 1)[0] for line in not_modelled}
    ignored = [w for w in p.ignored_flags if w not in said]
    if ignored:
        con.print(f"[dim]ignored (no effect on memory): {escape(' '.join(ignored))}[/]", highlight=False)
    rows = p.per_tp or ()  # VllmTpRow: from_json picks the row type by engine
    if rows:
        columns = VllmTpRow.CPU_COLUMNS if x.get("device") == "cpu" else VllmTpRow.COLUMNS
        t = Table(title="nearest working configurations per TP size")
        for c in ("TP", "as requested", *(head for _, head in columns)):
            t.add_column(c, justify="right")
        for row in rows:
            if row.error:
                t.add_row(str(row.tp), "n/a", escape(str(row.error)), "", "")
                continue
            t.add_row(str(row.tp), row.status_as_requested or "-", *(_g(getattr(row, key)) for key, _ in columns))
        con.print(t)
    _print_fixes(p, con)
