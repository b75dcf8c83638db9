"""`specbench plan [OPTIONS] -- <the real launch command>`."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Optional

import typer

from specbench.errors import UserError

if TYPE_CHECKING:
    from rich.console import Console

    from specbench.contracts import PlanResult

# The planner, the engines and rich are imported inside the command: `specbench --help` and the other commands
# do not pay for them.


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
    revision: Optional[str] = typer.Option(None, "--revision", help="Hub revision of the model (default: the command's --revision, else main)"),
) -> None:
    if list_models:
        from specbench.specs.resolve import bundled_names
        for n in bundled_names():
            typer.echo(n.replace("__", "/", 1))
        return
    argv = list(ctx.args)
    _no_unknown_option(ctx, argv)
    engine_version = _checked_version(engine_version)
    for field, value in (("gpu_mem_gib", gpu_mem_gib), ("avail_before_load_gib", avail_before_load_gib),
                         ("weights_gib", weights_gib), ("draft_weights_gib", draft_weights_gib),
                         ("non_kv_gib", non_kv_gib)):
        _check_gib(field, value)
    if not argv and not from_log:
        raise UserError("give the launch command after `--`, e.g. specbench plan -- python -m sglang.launch_server "
                        "--model-path Qwen/Qwen3.6-27B --tp 1")
    from specbench.contracts_inputs import PlanOptions
    from specbench.plan.api import env_gpu_default, plan_result

    opts = PlanOptions(model_config=model_config, draft_config=draft_config, gpu=gpu or (None if gpu_mem_gib else env_gpu_default()),
                       gpu_mem_gib=gpu_mem_gib, engine=engine, engine_version=engine_version,
                       avail_before_load_gib=avail_before_load_gib, weights_gib=weights_gib,
                       draft_weights_gib=draft_weights_gib, non_kv_gib=non_kv_gib, fixes=not no_fixes,
                       revision=revision)
    whatif = None
    if from_log:  # the log's measured memory, moved to CMD when one is given (doctor/whatif.py)
        from specbench.doctor.whatif import what_if

        given = {k for k, v in (("weights_gib", weights_gib), ("draft_weights_gib", draft_weights_gib),
                                ("avail_before_load_gib", avail_before_load_gib), ("non_kv_gib", non_kv_gib))
                 if v is not None}
        whatif = what_if(from_log, argv, opts, given, gpu_given=gpu is not None or gpu_mem_gib is not None)
        argv, opts = whatif.argv, whatif.opts
    result = plan_result(argv, opts)
    if whatif is not None:
        result = result.updated({"from_log": whatif.record})
    if as_json:
        from specbench.redact import learn, redact_obj

        learn(argv)  # the command's --api-key etc. are masked wherever the result echoes them (ignored_flags...)
        typer.echo(json.dumps(redact_obj(result.to_json()), indent=2, default=str))  # the JSON, at the edge
    else:
        from rich.console import Console

        # no `:name:` emoji codes: the plan prints what the user typed (paths, model ids, flags) and rich would turn a
        # `:fire:` in them into a glyph; its emoji table is also a fifth of rich's import cost
        render_plan(result, Console(emoji=False))
    raise typer.Exit(0)


def _no_unknown_option(ctx: typer.Context, argv: list[str]) -> None:
    """A launch command starts with a program (python, vllm, sglang, a path), never with an option: a leading
    option is one of specbench's own, mistyped (`--modle-config`), and is named as such with the nearest one."""
    import difflib

    if not argv or not argv[0].startswith("-"):
        return
    word = argv[0].split("=", 1)[0]
    known = [o for prm in ctx.command.params for o in getattr(prm, "opts", ()) if o.startswith("--")]
    near = difflib.get_close_matches(word, known, n=1, cutoff=0.6)
    hint = f"; did you mean {near[0]}?" if near else f" (its options: {', '.join(sorted(known))})"
    raise UserError(f"`specbench plan` has no option {word}{hint} (the launch command goes after `--`)")


# the characters of a release as written on PyPI or in a build name (0.5.15.post1, v0.32.0+cpu, 0.5.17-cu130):
# a value made of them is read by the engine's own version rules (which refuse an unreadable one, naming the
# known rule sets); anything else is refused here without being repeated
_RELEASE_TEXT = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+_-]{0,39}")


def _check_gib(field: str, value: object) -> None:
    """A memory option (or the value --from-log took from a log) within PlanOptions' bounds
    (contracts_inputs.py::plan_gib_problem, the matrix's [plan] table checks the same), else one line."""
    from specbench.contracts_inputs import plan_gib_problem

    why = plan_gib_problem(field, value)
    if why is not None:
        raise UserError(f"--{field.replace('_', '-')} {why}")


def _checked_version(text: str | None) -> str | None:
    """--engine-version as a release number, never anything else: the text is echoed in the plan's headline, so
    a value that is no release (`0.5.12; rm -rf /`) is refused without being repeated."""
    if text is None:
        return None
    if not _RELEASE_TEXT.fullmatch(text.strip()):
        raise UserError("--engine-version: not a release number (like 0.5.15.post1 or 0.32.0); give the version "
                        "the engine prints at start-up")
    return text.strip()


def render_plan(r: PlanResult, con: Console) -> None:
    """The plan in the words of the engine that made it."""
    from specbench.engines.base import engine

    engine(r.engine).render_plan(r, con)
    for label, said in (("", r.concurrency_summary), ("stand-in: ", r.model_stand_in)):  # the same for every engine
        if said:
            con.print(label + str(said), markup=False, highlight=False)
    if r.model_source:
        draft = r.draft_model_source
        con.print(f"model config: {r.model_source}" + (f"; draft: {draft}" if draft else ""), style="dim",
                  markup=False)
    for note in r.model_notes:
        con.print(f"note: {note}", style="dim", markup=False, highlight=False)
