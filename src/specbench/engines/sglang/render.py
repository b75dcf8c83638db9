"""SGLang's plan as a person reads it: the memory budget, the verdict, the nearest fixes per TP (rich)."""

from __future__ import annotations

from typing import Any, Mapping

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from specbench.planfmt import fmt as _g
from specbench.planfmt import print_fixes as _print_fixes


def render_plan(r: Mapping[str, Any], con: Console) -> None:
    ok = r["status"] == "ok"
    con.print(f"[bold]{r.get('model')}[/] ({r.get('model_kind')}) on {r.get('gpu')} x TP{r.get('tp')} — "
              f"{r['engine']} {r['engine_version']} rules ({r.get('era', '')})")
    if r.get("draft_model"):
        con.print(f"draft: {r['draft_model']} ({r.get('spec_algorithm')}, {r.get('draft_tokens')} draft tokens)")
    t = Table(title="memory plan (GiB per GPU)", show_header=True)
    t.add_column("item")
    t.add_column("GiB", justify="right")
    t.add_column("where it comes from")
    t.add_row("free before weights (B)", _g(r.get("avail_before_load_gib")), r.get("avail_before_load_source", ""))
    t.add_row("target weights", _g(r.get("weights_gib")),
              f"{r.get('weights_source')}; estimate for {r.get('weights_quant_label')}: {_g(r.get('weights_estimate_gib'))}")
    if r.get("draft_weights_gib"):
        t.add_row("draft weights", _g(r.get("draft_weights_gib")),
                  f"{r.get('draft_weights_source')}; loaded {'before' if r.get('draft_loaded_before_sizing') else 'after'} pool sizing")
    t.add_row("runtime slack B·(1−f)", _g(r.get("slack_gib")), f"mem_fraction_static={r.get('mem_fraction_static')}"
              + (" (engine default)" if r.get("mem_fraction_defaulted") else ""))
    t.add_row("rest for pools (R)", _g(r.get("rest_gib")), "free at sizing − slack")
    if r.get("max_mamba_cache_size") is not None:
        t.add_row("Mamba state (conv+ssm)", _g((r.get("conv_state_gib") or 0) + (r.get("ssm_state_gib") or 0)),
                  f"{r['max_mamba_cache_size']} slots x {(r.get('mamba_per_slot_bytes') or 0) / 2**20:.1f} MiB, "
                  f"{r.get('mamba_ratio')} per request, strategy {r.get('mamba_strategy')}")
    if r.get("spec_scratch_gib"):
        t.add_row("speculative Mamba scratch", _g(r.get("spec_scratch_gib")),
                  f"{r.get('spec_scratch_requests')} requests x {r.get('draft_tokens')} draft tokens x per-slot state")
    t.add_row("KV cache", _g((r.get("k_size_gib") or 0) + (r.get("v_size_gib") or 0) + 2 * (r.get("draft_k_size_gib") or 0)),
              f"{_g(r.get('kv_tokens'))} tokens x {r.get('kv_cell_bytes')} B ({r.get('kv_dtype')}"
              + (", incl. draft KV" if r.get("draft_k_size_gib") else "") + ")")
    t.add_row("CUDA-graph reserve (engine heuristic)", _g(r.get("graph_reserve_gib")),
              f"decode max bs {r.get('cuda_graph_max_bs')}, chunked prefill {r.get('chunked_prefill_size')}")
    con.print(t)
    if r.get("log_lines"):
        con.print("[dim]as the engine would log it:[/]")
        for line in r["log_lines"]:
            con.print(f"  [dim]{escape(line)}[/]", highlight=False, soft_wrap=True)
    verdict = "[bold green]STARTS[/]" if ok else "[bold red]FAILS[/]"
    con.print(f"{verdict}: max_running_requests={r.get('max_running_requests')}, KV tokens={_g(r.get('kv_tokens'))}")
    if r.get("error"):
        con.print(f"[red]{r['error']}[/]", highlight=False, soft_wrap=True)
    con.print(r.get("reason", ""), highlight=False, soft_wrap=True)
    for w in r.get("warnings") or []:
        con.print(f"[yellow]warning:[/] {w}", highlight=False, soft_wrap=True)
    for n in r.get("notes") or []:
        con.print(f"[dim]note: {n}[/]", highlight=False, soft_wrap=True)
    if r.get("ignored_flags"):
        con.print(f"[dim]ignored (no effect on memory): {' '.join(r['ignored_flags'])}[/]", highlight=False)
    rows = r.get("per_tp") or []
    if rows:
        t = Table(title="nearest working configurations per TP size")
        for c in ("TP", "as requested", "max --max-running-requests", "min --mem-fraction-static",
                  "max --context-length", "max draft tokens"):
            t.add_column(c, justify="right")
        for row in rows:
            if row["error"]:
                t.add_row(str(row["tp"]), "n/a", row["error"], "", "", "")
                continue
            t.add_row(str(row["tp"]), row["status_as_requested"] or "-", _g(row["max_running_requests"]),
                      _g(row["min_mem_fraction_static"]), _g(row["max_context_length"]), _g(row["max_draft_tokens"]))
        con.print(t)
    _print_fixes(r, con)
