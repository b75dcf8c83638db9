"""`specbench plan --from-log LOG [-- CMD]`: plan a launch with the memory a real boot measured.

Without CMD the log's own launch is re-planned (rebuilt from the engine's argument dump by the doctor's re-plan
path, doctor/replan.py::facts_for_plan). With CMD, a what-if: the new command is planned with the log's measured
values carried over to it. A measured value holds for the launch that measured it; each is moved to CMD by the
planner's own difference between the two launches, so what the log measured stays and only what CMD changes is
modelled:

    weights per GPU      W_cmd = W_log x est_cmd / est_log      (a TP change splits the same checkpoint)
    free at start        F_cmd = F_log + (est_cmd - est_log)   (CUDA context, NCCL buffers per TP)
    vLLM non-KV          N_cmd = N_log + (est_cmd - est_log)   (activation peak, CUDA graphs, non-torch)

where est_* are the planner's estimates for each launch with nothing measured (plan keys `weights_gib`,
`draft_weights_gib`, `avail_before_load_gib` / `budget.free_at_start_gib_estimate`, `budget.non_kv_gib`). When
the log has no argument dump (or its launch cannot be planned), the values are applied to CMD as measured and the
plan says so. Options given on the command line (`--weights-gib`, ...) win over the log's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, TypedDict

from specbench.contracts import PlanResult
from specbench.contracts_inputs import PlanOptions
from specbench.doctor.lastboot import parse_raw, read_log
from specbench.doctor.replan import PlanFacts, facts_for_plan, infer_version
from specbench.engines.base import engine
from specbench.engines.command import read_command
from specbench.errors import UserError
from specbench.plan.api import plan_result

# option -> (plan key, the key inside `budget` when the top level has none, how it moves: "ratio" | "delta")
MEASURED: dict[str, tuple[str, str | None, str]] = {
    "weights_gib": ("weights_gib", None, "ratio"),
    "draft_weights_gib": ("draft_weights_gib", None, "ratio"),
    "avail_before_load_gib": ("avail_before_load_gib", "free_at_start_gib_estimate", "delta"),
    "non_kv_gib": ("non_kv_gib_estimate", "non_kv_gib", "delta"),
}


class FromLog(TypedDict):
    """The plan key `from_log` (docs/contracts.md): the log, which launch, the values measured and applied."""
    log: str
    command: str  # "the log's own launch" | "CMD"
    measured: dict[str, float]
    applied: dict[str, float]
    notes: list[str]


@dataclass(frozen=True)
class WhatIf:
    argv: list[str]
    opts: PlanOptions
    record: FromLog


def _estimate(plan: PlanResult, option: str) -> float | None:
    """A measured option's estimate in a plan: its field, else the engine's key (`extra`, top level or in its
    `budget`), as `plan --json` prints them."""
    key, budget_key, _ = MEASURED[option]
    val = getattr(plan, key) if key in PlanResult.shared_keys() else plan.extra.get(key)
    if val is None and budget_key is not None:
        budget = plan.extra.get("budget")
        val = budget.get(budget_key) if isinstance(budget, Mapping) else None
    return float(val) if isinstance(val, (int, float)) else None


def _log_values(facts: PlanFacts) -> dict[str, float | None]:
    """The MEASURED options as the log gives them."""
    return {"weights_gib": facts["weights_gib"], "draft_weights_gib": facts["draft_weights_gib"],
            "avail_before_load_gib": facts["avail_before_load_gib"], "non_kv_gib": facts["non_kv_gib"]}


def _with(opts: PlanOptions, values: dict[str, float]) -> PlanOptions:
    """`opts` with the measured options in `values` set (the others left as they are)."""
    return replace(opts, weights_gib=values.get("weights_gib", opts.weights_gib),
                   draft_weights_gib=values.get("draft_weights_gib", opts.draft_weights_gib),
                   avail_before_load_gib=values.get("avail_before_load_gib", opts.avail_before_load_gib),
                   non_kv_gib=values.get("non_kv_gib", opts.non_kv_gib))


def _bare(opts: PlanOptions) -> PlanOptions:
    """`opts` with nothing measured and no fixes: the planner's own estimates."""
    return replace(opts, weights_gib=None, draft_weights_gib=None, avail_before_load_gib=None, non_kv_gib=None,
                   fixes=False)


def _moved(option: str, measured: float, est_log: float | None, est_cmd: float | None) -> tuple[float, str]:
    how = MEASURED[option][2]
    if est_log is None or est_cmd is None or (how == "ratio" and est_log <= 0):
        return measured, f"{option} {measured:g} as measured (no estimate to move it by)"
    if how == "ratio":
        val = measured * est_cmd / est_log
        return round(val, 4), f"{option} {measured:g} x {est_cmd:g}/{est_log:g} (the planner's CMD/log estimates)"
    val = measured + est_cmd - est_log
    return round(val, 4), f"{option} {measured:g} {'+' if est_cmd >= est_log else '-'} {abs(est_cmd - est_log):.3f} " \
                          f"(the planner's CMD - log estimates)"


GPU_TOTAL_TOLERANCE = 0.03  # the same board reads within ~1 % across drivers; 3 % is another board


def _same_gpu(opts: PlanOptions, log_total: Any, measured: dict[str, float],
              gpu_given: bool) -> tuple[PlanOptions, str | None]:
    """Free memory measured on one GPU never moves onto another: without --gpu the plan is on the log's GPU (its
    total, as the log says it); a --gpu of another total is refused with both totals."""
    from specbench.specs.gpu import gpu_for

    if not isinstance(log_total, (int, float)) or log_total <= 0 or not measured:
        return opts, None
    if not gpu_given:
        return (replace(opts, gpu=None, gpu_mem_gib=float(log_total)),
                f"planned on the log's GPU: {log_total:.2f} GiB total, as the log says")
    total = gpu_for(opts.gpu, opts.gpu_mem_gib).total_gib
    if abs(total - log_total) > GPU_TOTAL_TOLERANCE * log_total:
        where = f"--gpu-mem-gib {opts.gpu_mem_gib:g}" if opts.gpu_mem_gib else f"--gpu {opts.gpu}"
        raise UserError(f"the log's GPU has {log_total:.2f} GiB in all and {where} has {total:.2f} GiB: the free "
                        "memory it measured does not move to another GPU; drop the GPU option to plan on the log's "
                        "GPU, or plan CMD without --from-log")
    return opts, None


# the weights a log measured against CMD's own estimate at CMD's launch: outside this band it is not a boot of
# CMD's checkpoint (a quantized variant weighs 0.25-0.6x its BF16 model; the estimate is good to a few %)
WEIGHTS_BAND = (0.7, 1.4)


def _shape(source: str | None) -> tuple[Any, ...] | None:
    """What tells two checkpoints apart: class, widths, depth, vocabulary, quantization (None: does not resolve)."""
    from specbench.specs.resolve import load_model_spec

    if not source:
        return None
    try:
        m = load_model_spec(source)
    except (UserError, ValueError, OSError):
        return None
    return (m.architecture, m.hidden_size, m.num_layers, m.vocab_size, m.num_kv_heads, m.quant.method)


def _same_launch_kind(facts: PlanFacts, cmd: list[str]) -> None:
    """A log measures one engine: its numbers (and its release) never move to another engine's launch."""
    log_engine = facts.get("engine")
    cmd_engine = read_command(cmd).engine.name
    if log_engine and cmd_engine and log_engine != cmd_engine:
        raise UserError(f"the log is {log_engine}'s and CMD launches {cmd_engine}: memory one engine measured does not "
                        f"move to the other (nor its release); plan CMD without --from-log, or give a {cmd_engine} log")


def _same_model(facts: PlanFacts, est_cmd: PlanResult, cmd_config: str | None) -> bool:
    """Measured weights and memory hold for the checkpoint that was loaded: CMD must load the same one. Refused
    naming both when the log's model resolves to other shapes than CMD's; True when both resolve (and agree),
    False when the log's model cannot be read here (then its weights decide: `_weights_match`)."""
    log_model, cmd_model = facts.get("model"), est_cmd.model
    log_shape = _shape(facts.get("model_config"))
    cmd_shape = _shape(cmd_config or cmd_model or None)
    if log_shape is None or cmd_shape is None:
        return False
    if log_shape != cmd_shape:
        raise UserError(f"the log measured {log_model} and CMD launches {cmd_model}, another checkpoint "
                        f"({log_shape[0]} {log_shape[1]} wide x {log_shape[2]} layers, "
                        f"{log_shape[5] or 'unquantized'}, against {cmd_shape[0]} {cmd_shape[1]} x {cmd_shape[2]}, "
                        f"{cmd_shape[5] or 'unquantized'}): its weights and memory do not move; plan CMD without "
                        "--from-log, or give a log of CMD's model")
    return True


def _weights_match(facts: PlanFacts, measured: dict[str, float], est: float | None, cmd_model: object) -> str:
    """A log whose model cannot be read here: its measured weights against the planner's estimate for the same
    launch (the log's own, planned with CMD's model; or CMD's when the log has no argument dump)."""
    w = measured.get("weights_gib")
    named = f"the log's {facts['model']}" if facts.get("model") else "the log's model (not named)"
    if w is not None and est is not None and est > 0:
        ratio = w / est
        if not WEIGHTS_BAND[0] <= ratio <= WEIGHTS_BAND[1]:
            raise UserError(f"{named} loaded {w:.2f} GiB of weights per GPU, {ratio:.2f}x what CMD's {cmd_model} "
                            f"weighs by its config at the log's launch ({est:.2f} GiB): not a boot of CMD's model; "
                            "plan CMD without --from-log, or give a log of CMD's model")
    said = f" ({facts['model_class']})" if facts.get("model_class") else ""
    return f"{named}{said} is taken as CMD's {cmd_model}: its measured weights match CMD's config"


def measured_from_log(path: str, cmd: list[str]) -> PlanFacts:
    """The doctor's facts for a re-plan (doctor/replan.py::facts_for_plan); a log without an argument dump still
    gives its measured values (with `argv` None), since CMD says the launch, and CMD's engine reads them when the
    log's lines do not name one (a pasted excerpt)."""
    try:
        return facts_for_plan(path)
    except UserError as exc:
        if "no argument dump" not in str(exc):
            raise
    facts = parse_raw(read_log(path))[0]
    eng = engine(facts.engine) if facts.engine else read_command(cmd).engine
    return {"argv": None, "engine": facts.engine, "engine_version": infer_version(facts) if facts.engine else None,
            "avail_before_load_gib": facts.avail_before_load_gib, "weights_gib": facts.weights_gib,
            "draft_weights_gib": facts.draft_weights_gib, "non_kv_gib": eng.log_non_kv_gib(facts),
            "model_config": None, "model": None, "model_class": facts.model_class,
            "gpu_total_gib": facts.total_gpu_memory_gib if facts.device != "cpu" else None}


def _plan_log_launch(log_argv: list[str], log_opts: PlanOptions, est_cmd: PlanResult,
                     record: FromLog) -> tuple[PlanResult | None, str | None]:
    """The planner's estimates for the log's own launch; when its model path does not resolve here (a folder on
    the machine that wrote the log), with CMD's model in its place, said in the notes."""
    from specbench.specs.resolve import resolve_config_path

    try:
        return plan_result(log_argv, log_opts), None
    except UserError as exc:
        why = str(exc)
    if log_opts.model_config is None and est_cmd.model:
        try:
            cfg = str(resolve_config_path(est_cmd.model))
            out = plan_result(log_argv, replace(log_opts, model_config=cfg))
        except UserError as exc:
            return None, f"{why}; with CMD's model: {exc}"
        record["notes"].append(f"the log's model path does not resolve here; its launch is re-planned with CMD's "
                               f"model ({est_cmd.model})")
        return out, None
    return None, why


def what_if(log_path: str, cmd: list[str], opts: PlanOptions, given: set[str], gpu_given: bool = False) -> WhatIf:
    """The argv and options that plan `cmd` (the log's own launch when empty) with the log's measured values;
    `given`: the options the user set on the command line (kept as given); `gpu_given`: --gpu / --gpu-mem-gib was
    set (else the plan is on the log's own GPU, where the log says its total)."""
    if not cmd:
        facts = facts_for_plan(log_path)   # the log's own launch (UserError without an argument dump)
        argv = list(facts["argv"] or ())  # always a list here: facts_for_plan needs the argument dump
    else:
        facts = measured_from_log(log_path, cmd)
        argv = list(cmd)
        _same_launch_kind(facts, argv)
    logged = _log_values(facts)
    measured: dict[str, float] = {k: float(v) for k in MEASURED
                                  if (v := logged[k]) is not None and k not in given}
    opts, gpu_note = _same_gpu(opts, facts.get("gpu_total_gib"), measured, gpu_given)
    base = replace(opts, engine_version=opts.engine_version or facts.get("engine_version"),
                   model_config=opts.model_config or (facts.get("model_config") if not cmd else None))
    record: FromLog = {"log": log_path, "command": "the log's own launch" if not cmd else "CMD",
                              "measured": dict(measured), "applied": {}, "notes": [gpu_note] if gpu_note else []}
    if not cmd or not measured:
        record["applied"] = dict(measured)
        return WhatIf(argv, _with(base, measured), record)
    log_argv = facts.get("argv")
    est_log = None
    est_cmd = plan_result(argv, _bare(base))   # CMD itself must plan: its errors are the user's to see
    resolved_same = _same_model(facts, est_cmd, opts.model_config)
    if log_argv:
        est_log, why = _plan_log_launch(log_argv, _bare(replace(base, model_config=opts.model_config
                                                                or facts.get("model_config"))), est_cmd, record)
        if est_log is None:
            record["notes"].append(f"the log's own launch does not plan here ({why}); its values are applied to "
                                   "CMD as measured")
    else:
        record["notes"].append("the log has no argument dump, so its launch is unknown: its values are applied to CMD "
                               "as measured (same TP and batch shape assumed)")
    if not resolved_same:
        record["notes"].append(_weights_match(facts, measured, _estimate(est_log or est_cmd, "weights_gib"),
                                              est_cmd.model))
    applied: dict[str, float] = {}
    for option, value in measured.items():
        if est_log is None or est_cmd is None:
            applied[option] = value
            continue
        applied[option], note = _moved(option, value, _estimate(est_log, option), _estimate(est_cmd, option))
        record["notes"].append(note)
    record["applied"] = applied
    return WhatIf(argv, _with(base, applied), record)
