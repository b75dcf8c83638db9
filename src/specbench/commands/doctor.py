"""`specbench doctor LOG [--json]` and `specbench doctor --diff WORKING.log FAILING.log [--json]`."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Optional

import typer

from specbench.errors import UserError
from specbench.redact import redact_obj

if TYPE_CHECKING:
    from rich.console import Console

    from specbench.contracts import Fix
    from specbench.doctor.diff import LogDiff
    from specbench.doctor.doctor import Diagnosis

# The log reader and rich are imported inside the functions: `specbench --help` and the other commands do not pay
# for them, and `doctor --json` does not load rich's tables.


def register(app: typer.Typer) -> None:
    app.command(
        "doctor",
        help="Read a real SGLang / vLLM log: name the failure, show the memory budget, explain the cause and propose "
             "fixes. With --diff, compare a working log with a failing one.",
    )(doctor_cmd)


def doctor_cmd(
    logs: list[str] = typer.Argument(..., help="LOG, or WORKING.log FAILING.log with --diff"),
    diff_mode: bool = typer.Option(False, "--diff", help="compare two logs (left = working, right = failing)"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object (the contract)"),
    claimed_quant: Optional[str] = typer.Option(None, "--claimed-quant",
                                                help="the quantization you believe you run (nvfp4, fp8, bf16 ...): "
                                                     "flags weights that do not match"),
    engine_version: Optional[str] = typer.Option(None, "--engine-version",
                                                 help="rule set for the fixes (default: printed or inferred)"),
    model_config: Optional[str] = typer.Option(None, "--model-config",
                                               help="config.json (or bundled name) of the model, when the log's "
                                                    "model path is a folder this machine does not have"),
    draft_config: Optional[str] = typer.Option(None, "--draft-config",
                                               help="config.json (or bundled name) of the speculative draft"),
    gpu: Optional[str] = typer.Option(None, "--gpu", help="GPU name for the planner's fixes (default H200, or $SPECBENCH_GPU)"),
    no_fixes: bool = typer.Option(False, "--no-fixes", help="skip the planner"),
) -> None:
    from specbench.doctor.diff import diff
    from specbench.doctor.doctor import DoctorOptions, diagnose_file

    opts = DoctorOptions(claimed_quant=claimed_quant, engine_version=engine_version, gpu=gpu,
                         model_config=model_config, draft_config=draft_config, with_fixes=not no_fixes)
    if diff_mode:
        if len(logs) != 2:
            raise UserError(f"--diff takes exactly two logs (working, failing), got {len(logs)}")
        result = diff(diagnose_file(logs[0], opts), diagnose_file(logs[1], opts))
        if as_json:
            typer.echo(json.dumps(redact_obj(result.to_json()), indent=2, default=str))
        else:
            from rich.console import Console

            render_diff(result, logs, Console())
        return
    if len(logs) != 1:
        raise UserError(f"doctor takes one log (or two with --diff), got {len(logs)}")
    d = diagnose_file(logs[0], opts)
    if as_json:
        typer.echo(json.dumps(redact_obj(d.to_json()), indent=2, default=str))  # a log's echoed keys masked
    else:
        from rich.console import Console

        render_diagnosis(d, logs[0], Console())


def _g(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.2f}"
    if isinstance(x, int):
        return f"{x:,}"
    return str(x)


_STATUS = {"started": "[green]started[/]", "failed": "[red]failed[/]", "unknown": "[yellow]unknown[/]"}


def render_diagnosis(d: Diagnosis, path: str, console: Console) -> None:
    from rich.markup import escape
    from rich.table import Table

    f = d.facts
    status = "[yellow]started, but capped[/]" if d.capped else _STATUS.get(d.status, d.status)
    head = f"{escape(path)}: {status}"
    if f.engine:
        head += f"  ({f.engine}{' ' + f.engine_version if f.engine_version else ''})"
    console.print(head)
    if d.failure:
        console.print(f"[bold]failure[/]: {d.failure.kind}: {escape(d.failure.message)}")
        if d.failure.wrapper:
            console.print(f"  (reported by the wrapper: {escape(d.failure.wrapper)})")
    for w in d.warnings:
        console.print(f"[yellow]{'cap' if w.cap else 'warning'}[/]: {w.kind}: {escape(w.message)}")
        for fx in w.fixes[:3]:
            change = " ".join(f"{k}" + ("" if v is None else f" {v}") for k, v in (fx.get("change") or {}).items())
            console.print(f"    fix ({fx.get('source')}): {escape(change)} - {escape(str(fx.get('why', '')))}")
    if d.budget:
        where = "one CPU node" if f.device == "cpu" else "one GPU"
        t = Table(title=f"memory budget (GiB, {where})", title_justify="left")
        t.add_column("what")
        t.add_column("GiB", justify="right")
        t.add_column("from the log", overflow="fold")
        for r in d.budget:
            t.add_row(escape(r.label), _g(r.gib), escape(r.source))
        console.print(t)
    console.print(escape(d.explanation))
    for n in d.notes:
        console.print(f"[yellow]note[/]: {escape(n)}")
    if d.fixes:
        title = ("fixes" if d.status == "failed" else "to lift the cap" if d.capped else "nearby configurations") + \
            " (the failure's own numbers first, then the planner's with the log's measured numbers)"
        _print_fixes(d.fixes[:8], title, console)


def _print_fixes(fixes: tuple[Fix, ...], title: str, console: Console) -> None:
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    t.add_column("change", overflow="fold")
    for col in ("status", "running requests", "KV tokens", "Mamba slots"):
        t.add_column(col, justify="right", no_wrap=True, min_width=9)
    whys = []
    for fix in fixes:
        res = fix.result
        # a fix with no flag to change (the host killed the process, another process holds the GPU) says what to do
        change = " ".join(f"{k}" + ("" if v is None else f" {v}") for k, v in fix.change.items()) \
            or str(fix.extra.get("kind") or "")
        planned = (res.status, res.max_running_requests, res.kv_tokens, res.extra.get("max_mamba_cache_size")) \
            if res is not None else (None,) * 4  # a cap's own fix: nothing planned
        t.add_row(escape(change), *(_g(v) for v in planned))
        if fix.extra.get("why"):
            whys.append(f"  {escape(change)}: {escape(str(fix.extra['why']))}")
    console.print(t)
    for line in whys:
        console.print(line)


def render_diff(r: LogDiff, paths: list[str], console: Console) -> None:
    from rich.markup import escape
    from rich.table import Table

    from specbench.logs.serverargs import to_flag

    lf, rf = r.left.facts, r.right.facts
    t = Table(title="budgets side by side (GiB, one GPU)", title_justify="left")
    t.add_column("what")
    t.add_column(escape(paths[0]), justify="right")
    t.add_column(escape(paths[1]), justify="right")
    left = {row.key: row for row in r.left.budget}
    right = {row.key: row for row in r.right.budget}
    keys = list(left) + [k for k in right if k not in left]
    for k in keys:
        label = (left.get(k) or right[k]).label.split(" (")[0]
        t.add_row(escape(label), _g(left[k].gib if k in left else None), _g(right[k].gib if k in right else None))
    t.add_row("status", _STATUS.get(r.left.status, r.left.status), _STATUS.get(r.right.status, r.right.status))
    for key in ("max_mamba_cache_size", "kv_tokens", "max_running_requests", "context_len"):
        t.add_row(key, _g(getattr(lf, key)), _g(getattr(rf, key)))
    console.print(t)
    if r.arg_changes:
        a = Table(title="server arguments that differ", title_justify="left")
        a.add_column("argument")
        a.add_column(escape(paths[0]))
        a.add_column(escape(paths[1]))
        for k, (va, vb) in r.arg_changes.items():
            a.add_row(to_flag(k), escape(str(va)), escape(str(vb)))
        console.print(a)
    console.print(escape(r.explanation))
    failing = r.right if r.right.status == "failed" else r.left if r.left.status == "failed" else None
    if failing is not None and failing.fixes:
        side = paths[1] if failing is r.right else paths[0]
        _print_fixes(failing.fixes[:4], f"fixes for {escape(side)} (planner, with its measured numbers)", console)
