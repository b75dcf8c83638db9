"""vLLM's plan as a person reads it: its own budget rows, the verdict, vLLM's knobs per TP (rich). Its own keys
(docs/contracts.md, "emitted by: vllm") come through the `PlanResult`'s `extra`."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from specbench.contracts import PlanResult
from specbench.contracts_per_tp import VllmTpRow
from specbench.planfmt import fmt, memory_table, print_alternatives, print_headline, print_ignored, print_outcome


def render_plan(p: PlanResult, con: Console) -> None:
    """vLLM's plan: its own budget rows (specbench.engines.vllm.contract.plan_budget_rows) and vLLM's knobs per TP."""
    x = p.extra
    print_headline(p, con, kind=False)
    t = memory_table("memory plan (GiB per worker)")
    for item, gib, src in x.get("budget_rows") or []:
        t.add_row(str(item), fmt(gib), str(src))
    con.print(t)
    for line in p.log_lines:
        con.print(f"  [dim]{escape(str(line))}[/]", highlight=False, soft_wrap=True)
    print_outcome(p, con, f"KV tokens={fmt(p.kv_tokens)}, max concurrency={fmt(x.get('max_concurrency'))}, "
                          f"max_running_requests={p.max_running_requests}")
    not_modelled = [str(line) for line in x.get("not_modelled") or ()]
    for line in not_modelled:  # real flags whose memory effect the rules leave out: said, never passed as harmless
        con.print(f"[yellow]not modelled:[/] {escape(line)}", highlight=False, soft_wrap=True)
    print_ignored(p, con, said={line.split(": ", 1)[0] for line in not_modelled})
    columns = VllmTpRow.CPU_COLUMNS if x.get("device") == "cpu" else VllmTpRow.COLUMNS
    print_alternatives(p, columns, con)  # VllmTpRow: from_json picks the row type by engine
