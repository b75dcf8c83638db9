"""SGLang's plan as a person reads it: the memory budget, the verdict, the nearest fixes per TP (rich).

Reads the plan as a `specbench.contracts.PlanResult`: the keys both engines emit as fields, SGLang's own keys
(docs/contracts.md, "emitted by: sglang") through `extra`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from specbench.contracts import PlanResult, SglangTpRow
from specbench.planfmt import as_plan
from specbench.planfmt import fmt as _g
from specbench.planfmt import print_fixes as _print_fixes


def render_plan(r: PlanResult | Mapping[str, Any], con: Console) -> None:
    p = as_plan(r)
    x = p.extra
    ok = p.status == "ok"
    con.print(f"[bold]{escape(str(p.model))}[/] ({p.model_kind}) on {escape(str(p.gpu))} x TP{p.tp} — "
              f"{p.engine} {escape(str(p.engine_version))} rules ({p.era})", highlight=False)
    if p.draft_model:
        algo = x.get("spec_algorithm")
        how = f"{algo}, {x.get('draft_tokens')} draft tokens" if algo else "speculation not planned: see the error"
        con.print(escape(f"draft: {p.draft_model} ({how})"), highlight=False)
    t = Table(title="memory plan (GiB per GPU)", show_header=True)
    t.add_column("item")
    t.add_column("GiB", justify="right")
    t.add_column("where it comes from")
    t.add_row("free before weights (B)", _g(x.get("avail_before_load_gib")), x.get("avail_before_load_source", ""))
    t.add_row("target weights", _g(p.weights_gib),
              f"{x.get('weights_source')}; estimate for {x.get('weights_quant_label')}: "
              f"{_g(x.get('weights_estimate_gib'))}")
    if p.draft_weights_gib:
        t.add_row("draft weights", _g(p.draft_weights_gib),
                  f"{x.get('draft_weights_source')}; loaded "
                  f"{'before' if x.get('draft_loaded_before_sizing') else 'after'} pool sizing")
    t.add_row("runtime slack B·(1−f)", _g(x.get("slack_gib")), f"mem_fraction_static={p.mem_fraction_static}"
              + (" (engine default)" if x.get("mem_fraction_defaulted") else ""))
    t.add_row("rest for pools (R)", _g(x.get("rest_gib")), "free at sizing − slack")
    if p.max_mamba_cache_size is not None:
        t.add_row("Mamba state (conv+ssm)", _g((p.conv_state_gib or 0) + (p.ssm_state_gib or 0)),
                  f"{p.max_mamba_cache_size} slots x {(x.get('mamba_per_slot_bytes') or 0) / 2**20:.1f} MiB, "
                  f"{x.get('mamba_ratio')} per request, strategy {x.get('mamba_strategy')}")
    if x.get("spec_scratch_gib"):
        t.add_row("speculative Mamba scratch", _g(x.get("spec_scratch_gib")),
                  f"{x.get('spec_scratch_requests')} requests x {x.get('draft_tokens')} draft tokens x per-slot state")
    draft_k = x.get("draft_k_size_gib")
    t.add_row("KV cache", _g((p.k_size_gib or 0) + (p.v_size_gib or 0) + 2 * (draft_k or 0)),
              f"{_g(p.kv_tokens)} tokens x {x.get('kv_cell_bytes')} B ({x.get('kv_dtype')}"
              + (", incl. draft KV" if draft_k else "") + ")")
    t.add_row("CUDA-graph reserve (engine heuristic)", _g(x.get("graph_reserve_gib")),
              f"decode max bs {x.get('cuda_graph_max_bs')}, chunked prefill {x.get('chunked_prefill_size')}")
    con.print(t)
    if p.log_lines:
        con.print("[dim]as the engine would log it:[/]")
        for line in p.log_lines:
            con.print(f"  [dim]{escape(line)}[/]", highlight=False, soft_wrap=True)
    verdict = "[bold green]STARTS[/]" if ok else "[bold red]FAILS[/]"
    con.print(f"{verdict}: max_running_requests={p.max_running_requests}, KV tokens={_g(p.kv_tokens)}")
    if p.error:
        con.print(f"[red]{escape(str(p.error))}[/]", highlight=False, soft_wrap=True)
    con.print(escape(str(p.reason)), highlight=False, soft_wrap=True)
    for w in p.warnings:
        con.print(f"[yellow]warning:[/] {escape(str(w))}", highlight=False, soft_wrap=True)
    for n in x.get("notes") or []:
        con.print(f"[dim]note: {escape(str(n))}[/]", highlight=False, soft_wrap=True)
    if p.ignored_flags:
        con.print(f"[dim]ignored (no effect on memory): {escape(' '.join(p.ignored_flags))}[/]", highlight=False)
    rows = p.per_tp or ()  # SglangTpRow: from_json picks the row type by engine
    if rows:
        t = Table(title="nearest working configurations per TP size")
        for c in ("TP", "as requested", *(head for _, head in SglangTpRow.COLUMNS)):
            t.add_column(c, justify="right")
        for row in rows:
            if row.error:
                t.add_row(str(row.tp), "n/a", row.error, "", "", "")
                continue
            t.add_row(str(row.tp), row.status_as_requested or "-",
                      *(_g(getattr(row, key)) for key, _ in SglangTpRow.COLUMNS))
        con.print(t)
    _print_fixes(p, con)
