"""`specbench plan [OPTIONS] -- <the real launch command>`."""

from __future__ import annotations

import json
from typing import Any, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from specbench.errors import UserError
from specbench.plan.api import PlanOptions, env_gpu_default, plan_command_full


def register(app: typer.Typer) -> None:
    app.command(
        "plan",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
        help="Predict what the engine allocates for a launch command, whether it starts, and the nearest working "
             "configurations. Usage: specbench plan [OPTIONS] -- python -m sglang.launch_server --model-path ...",
    )(plan_cmd)


def plan_cmd(
    ctx: typer.Context,
    model_config: Optional[str] = typer.Option(None, "--model-config", help="config.json to use instead of resolving --model-path"),
    draft_config: Optional[str] = typer.Option(None, "--draft-config", help="config.json of the draft model"),
    gpu: Optional[str] = typer.Option(None, "--gpu", help="GPU name from the catalog (default H200, or $SPECBENCH_GPU)"),
    gpu_mem_gib: Optional[float] = typer.Option(None, "--gpu-mem-gib", help="GPU total memory in GiB instead of --gpu"),
    engine: Optional[str] = typer.Option(None, "--engine", help="sglang or vllm (default: recognised from the command)"),
    engine_version: Optional[str] = typer.Option(None, "--engine-version", help="rule set, e.g. 0.5.12 (default: newest)"),
    avail_before_load_gib: Optional[float] = typer.Option(None, "--avail-before-load-gib", help="measured free GiB before weights"),
    weights_gib: Optional[float] = typer.Option(None, "--weights-gib", help="measured target weights GiB per GPU"),
    draft_weights_gib: Optional[float] = typer.Option(None, "--draft-weights-gib", help="measured draft weights GiB per GPU"),
    non_kv_gib: Optional[float] = typer.Option(None, "--non-kv-gib", help="vLLM: measured non-KV memory GiB"),
    from_log: Optional[str] = typer.Option(None, "--from-log", help="take measured values (and the command) from an engine log"),
    as_json: bool = typer.Option(False, "--json", help="print the JSON contract"),
    no_fixes: bool = typer.Option(False, "--no-fixes", help="skip the nearest-working-configuration search"),
    list_models: bool = typer.Option(False, "--list-models", help="list the bundled model configs"),
) -> None:
    if list_models:
        from specbench.specs.resolve import bundled_names
        for n in bundled_names():
            typer.echo(n.replace("__", "/", 1))
        return
    argv = list(ctx.args)
    if from_log:
        try:
            from specbench.logs.doctor import facts_for_plan
        except ModuleNotFoundError:
            raise UserError("--from-log needs the log reader (specbench.logs), which is not installed") from None
        facts = facts_for_plan(from_log)
        if not argv:
            argv = list(facts.get("argv") or [])
        avail_before_load_gib = avail_before_load_gib if avail_before_load_gib is not None else facts.get("avail_before_load_gib")
        weights_gib = weights_gib if weights_gib is not None else facts.get("weights_gib")
        draft_weights_gib = draft_weights_gib if draft_weights_gib is not None else facts.get("draft_weights_gib")
        engine_version = engine_version or facts.get("engine_version")
        model_config = model_config or facts.get("model_config")
        non_kv_gib = non_kv_gib if non_kv_gib is not None else facts.get("non_kv_gib")
    if not argv:
        raise UserError("give the launch command after `--`, e.g. specbench plan -- python -m sglang.launch_server "
                        "--model-path Qwen/Qwen3.6-27B --tp 1")
    opts = PlanOptions(model_config=model_config, draft_config=draft_config, gpu=gpu or (None if gpu_mem_gib else env_gpu_default()),
                       gpu_mem_gib=gpu_mem_gib, engine=engine, engine_version=engine_version,
                       avail_before_load_gib=avail_before_load_gib, weights_gib=weights_gib,
                       draft_weights_gib=draft_weights_gib, non_kv_gib=non_kv_gib, fixes=not no_fixes)
    result, _rows = plan_command_full(argv, opts)
    if as_json:
        typer.echo(json.dumps(result, indent=2, default=str))
    else:
        render_plan(result, Console())
    raise typer.Exit(0)


def _g(x: Any, nd: int = 2) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{nd}f}"
    return f"{x:,}" if isinstance(x, int) else str(x)


def render_plan(r: dict, con: Console) -> None:
    if r.get("engine") == "vllm":
        render_vllm_plan(r, con)
        return
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


def render_vllm_plan(r: dict, con: Console) -> None:
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


def _print_fixes(r: dict, con: Console) -> None:
    """The nearest working configurations of a failing plan (any engine), nearest first."""
    fixes = r.get("fixes") or []
    if not fixes or r["status"] == "ok":
        return
    con.print("[bold]nearest fixes:[/]")
    for f in fixes[:6]:
        ch = " ".join(f"{k} {v}" for k, v in f["change"].items())
        res = f["result"]
        slots = res.get("max_mamba_cache_size")
        con.print(f"  {ch}: starts, {_g(res.get('kv_tokens'))} KV tokens, "
                  f"max_running_requests={res.get('max_running_requests')}"
                  + (f", {slots} Mamba slots" if slots is not None else ""), highlight=False)
