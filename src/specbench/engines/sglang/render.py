"""SGLang's plan as a person reads it: the memory budget, the verdict, the nearest fixes per TP (rich). Its own keys
(docs/contracts.md, "emitted by: sglang") come through the `PlanResult`'s `extra`."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from specbench.contracts import PlanResult
from specbench.contracts_per_tp import SglangTpRow
from specbench.planfmt import fmt, memory_table, print_alternatives, print_headline, print_ignored, print_outcome


def render_plan(p: PlanResult, con: Console) -> None:
    x = p.extra
    print_headline(p, con, kind=True)
    if p.draft_model:
        algo = x.get("spec_algorithm")
        how = f"{algo}, {x.get('draft_tokens')} draft tokens" if algo else "speculation not planned: see the error"
        con.print(escape(f"draft: {p.draft_model} ({how})"), highlight=False)
    t = memory_table("memory plan (GiB per GPU)")
    t.add_row("free before weights (B)", fmt(x.get("avail_before_load_gib")), x.get("avail_before_load_source", ""))
    t.add_row("target weights", fmt(p.weights_gib),
              f"{x.get('weights_source')}; estimate for {x.get('weights_quant_label')}: "
              f"{fmt(x.get('weights_estimate_gib'))}")
    if p.draft_weights_gib:
        t.add_row("draft weights", fmt(p.draft_weights_gib),
                  f"{x.get('draft_weights_source')}; loaded "
                  f"{'before' if x.get('draft_loaded_before_sizing') else 'after'} pool sizing")
    if x.get("draft_kv_weight_copy_gib"):
        t.add_row("drafter K/V weight copy", fmt(x.get("draft_kv_weight_copy_gib")),
                  "DFLASH's fused K/V helper copies the drafter's K/V rows before the pools are sized")
    t.add_row("runtime slack B·(1−f)", fmt(x.get("slack_gib")), f"mem_fraction_static={p.mem_fraction_static}"
              + (" (engine default)" if x.get("mem_fraction_defaulted") else ""))
    t.add_row("rest for pools (R)", fmt(x.get("rest_gib")), "free at sizing − slack")
    if p.max_mamba_cache_size is not None:
        t.add_row("Mamba state (conv+ssm)", fmt((p.conv_state_gib or 0) + (p.ssm_state_gib or 0)),
                  f"{p.max_mamba_cache_size} slots x {(x.get('mamba_per_slot_bytes') or 0) / 2**20:.1f} MiB, "
                  f"{x.get('mamba_ratio')} per request, strategy {x.get('mamba_strategy')}")
    if x.get("spec_scratch_gib"):
        t.add_row("speculative Mamba scratch", fmt(x.get("spec_scratch_gib")),
                  f"{x.get('spec_scratch_requests')} requests x {x.get('draft_tokens')} draft tokens x per-slot state")
    draft_k = x.get("draft_k_size_gib")
    t.add_row("KV cache", fmt((p.k_size_gib or 0) + (p.v_size_gib or 0) + 2 * (draft_k or 0)),
              f"{fmt(p.kv_tokens)} tokens x {x.get('kv_cell_bytes')} B ({x.get('kv_dtype')}"
              + (", incl. draft KV" if draft_k else "") + ")")
    t.add_row("CUDA-graph reserve (engine heuristic)", fmt(x.get("graph_reserve_gib")),
              f"decode max bs {x.get('cuda_graph_max_bs')}, chunked prefill {x.get('chunked_prefill_size')}")
    con.print(t)
    if p.log_lines:
        con.print("[dim]as the engine would log it:[/]")
        for line in p.log_lines:
            con.print(f"  [dim]{escape(line)}[/]", highlight=False, soft_wrap=True)
    print_outcome(p, con, f"max_running_requests={p.max_running_requests}, KV tokens={fmt(p.kv_tokens)}")
    for n in x.get("notes") or []:
        con.print(f"[dim]note: {escape(str(n))}[/]", highlight=False, soft_wrap=True)
    print_ignored(p, con)
    print_alternatives(p, SglangTpRow.COLUMNS, con)  # SglangTpRow: from_json picks the row type by engine
