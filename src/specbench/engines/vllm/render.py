"""vLLM's plan as a person reads it: its own budget rows, the verdict, vLLM's knobs per TP (rich)."""

from __future__ import annotations

from typing import Any, Mapping

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from specbench.planfmt import fmt as _g
from specbench.planfmt import print_fixes as _print_fixes


def render_plan(r: Mapping[str, Any], con: Console) -> None:
    """vLLM's plan: its own budget rows (specbench.engines.vllm.plan.budget_rows) and vLLM's knobs per TP."""
    ok = r["status"] == "ok"
    con.print(f"[bold]{r.get('model')}[/] on {r.get('gpu', r.get('device'))} x TP{r.get('tp')} — "
              f"vllm {r['engine_version']} rules ({r.get('era', '')})", highlight=False)
    t = Table(title="memory plan (GiB per worker)")
    t.add_column("item")
    t.add_column("GiB", justify="right")
    t.add_column("where it comes from")
    for item, gib, src in r.get("budget_rows") or []:
        t.add_row(str(item), _g(gib), str(src))
    con.print(t)
    for line in r.get("log_lines") or []:
        con.print(f"  [dim]{escape(str(line))}[/]", highlight=False, soft_wrap=True)
    verdict = "[bold green]STARTS[/]" if ok else "[bold red]FAILS[/]"
    con.print(f"{verdict}: KV tokens={_g(r.get('kv_tokens'))}, max concurrency={_g(r.get('max_concurrency'))}, "
              f"max_running_requests={r.get('max_running_requests')}")
    if r.get("error"):
        con.print(f"[red]{escape(r['error'])}[/]", highlight=False, soft_wrap=True)
    if r.get("reason") and r.get("reason") != r.get("error"):
        con.print(r["reason"], highlight=False, soft_wrap=True)
    for w in r.get("warnings") or []:
        con.print(f"[yellow]warning:[/] {escape(str(w))}", highlight=False, soft_wrap=True)
    if r.get("ignored_flags"):
        con.print(f"[dim]ignored (no effect on memory): {' '.join(r['ignored_flags'])}[/]", highlight=False)
    rows = r.get("per_tp") or []
    if rows:
        cpu = r.get("device") == "cpu"
        t = Table(title="nearest working configurations per TP size")
        for c in ("TP", "as requested", "max --max-num-seqs", "max --max-model-len",
                  "min VLLM_CPU_KVCACHE_SPACE GiB" if cpu else "min --gpu-memory-utilization"):
            t.add_column(c, justify="right")
        for row in rows:
            if row.get("error"):
                t.add_row(str(row["tp"]), "n/a", escape(str(row["error"])), "", "")
                continue
            t.add_row(str(row["tp"]), row.get("status_as_requested") or "-", _g(row.get("max_num_seqs")),
                      _g(row.get("max_model_len")),
                      _g(row.get("min_cpu_kvcache_space_gib") if cpu else row.get("min_gpu_memory_utilization")))
        con.print(t)
    _print_fixes(r, con)
