"""`specbench plan` for SGLang: a pasted launch command -> the plan contract (docs/contracts.md) as a `PlanResult`,
with the numbers the planner words into the concurrency keys."""

from __future__ import annotations

import dataclasses
from typing import Any

from specbench.contracts import ConcurrencyInputs, EnginePlan, PlanResult
from specbench.contracts_inputs import PlanOptions
from specbench.engines.cli_flags import fail_on_unknown, unknown_flags_failure, unknown_flags_warning
from specbench.engines.sglang import registry
from specbench.engines.sglang.args import SglangArgs, parse_sglang_argv
from specbench.engines.sglang.fixes import Solver, TpRow, fixes_from_rows
from specbench.engines.sglang.formulas import NEWEST_SGLANG
from specbench.engines.sglang.knobs import FLAG_LISTS
from specbench.engines.sglang.plan import plan_sglang
from specbench.engines.sglang.plan_stages import Measured
from specbench.errors import UserError
from specbench.specs.estimate_error import estimate_error_keys
from specbench.specs.gpu import gpu_for
from specbench.specs.model_types import ModelSpec
from specbench.specs.resolve import load_spec_for


def plan_sglang_command(args_list: list[str], opts: PlanOptions) -> EnginePlan:
    args = parse_sglang_argv(args_list, opts.engine_version)
    if not args.model_path and not opts.model_config:
        raise UserError("the launch command has no --model-path (or pass --model-config PATH)")
    version = opts.engine_version or NEWEST_SGLANG
    args, unmodelled = _without_unmodelled_spec(args, version)
    m = load_spec_for(opts.model_config, args.model_path, "the model", "--model-config")
    assert m is not None
    draft, drafter_note = None, None
    if args.spec_algorithm and args.spec_algorithm not in ("NGRAM",):
        dp = args.speculative_draft_model_path
        if _drafts_with_own_layers(args, m) and opts.draft_config:
            # a matrix's [plan] draft_config names the drafter of its other servers (e.g. DFlash beside MTP)
            drafter_note = (f"the draft config {opts.draft_config} is not used: {args.spec_algorithm} without "
                            "--speculative-draft-model-path drafts with the target's own MTP layers")
        elif opts.draft_config or (dp and dp != args.model_path):
            draft, drafter_note = _load_draft(opts, dp, args.model_path, args.spec_algorithm)
    gpu = gpu_for(opts.gpu, opts.gpu_mem_gib)
    measured = Measured(opts.avail_before_load_gib, opts.weights_gib, opts.draft_weights_gib)
    for name, v in (("--avail-before-load-gib", opts.avail_before_load_gib), ("--weights-gib", opts.weights_gib),
                    ("--draft-weights-gib", opts.draft_weights_gib)):
        if v is not None and v < 0:
            raise UserError(f"{name} must not be negative, got {v}")
    plan = plan_sglang(args, m, draft, gpu, version, measured)
    out = plan.contract()
    out["model"] = m.name
    out["model_kind"] = m.kind_label
    out["draft_model"] = draft.name if draft else None
    out.update(estimate_error_keys(m, draft, plan.weights_source, plan.draft_weights_source,
                                   plan.draft_weights_gib))
    out["reason"] = plan_reason(plan)
    if unmodelled:
        out["warnings"] = [unmodelled, *_listed(out.get("warnings"))]
    if drafter_note:
        out["notes"] = [*_listed(out.get("notes")), drafter_note]
    out["unknown_flags"] = list(args.unknown)
    out["dp"], out["pp"] = args.dp, args.pp  # the launch's GPUs: tp x pp, DP replicas inside the TP group or not
    warning = unknown_flags_warning("SGLang", args.release or version, args.unknown)
    if warning:
        out["warnings"] = [*_listed(out.get("warnings")), warning]
    rows: list[TpRow] = []
    if opts.fixes:
        solver = Solver(args, m, draft, gpu, version, measured)
        rows = solver.table(opts.tp_sizes)
        out["fixes"] = fixes_from_rows(args, rows, solver)
        out["per_tp"] = [{"tp": r.tp, "error": r.error, "max_running_requests": r.max_running_requests,
                          "min_mem_fraction_static": r.min_mem_fraction, "max_context_length": r.max_context,
                          "max_draft_tokens": r.max_draft_tokens,
                          "status_as_requested": r.plan_at_request.status if r.plan_at_request else None}
                         for r in rows]
    else:
        out["fixes"] = []
    # the memory plan above is what it would be without them; the server itself never gets there
    fail_on_unknown(out, unknown_flags_failure("SGLang", FLAG_LISTS, opts.engine_version,
                                               args.unknown))
    return EnginePlan(PlanResult.from_json(out), _concurrency(plan))


def _drafts_with_own_layers(args: SglangArgs, m: ModelSpec) -> bool:
    """NEXTN or EAGLE with no separate checkpoint (the engine logs NEXTN as EAGLE with no draft path; some targets get
    the target's own path) on a target that has MTP layers: the engine drafts with them
    (arg_groups/speculative_hook.py::_handle_eagle_family@0.5.15.post1; the MTP boot of
    tests/data/h100-hybrid-sglang-0.5.15.post1 loaded Qwen3_5ForCausalLMMTP with speculative_draft_model_path=None)."""
    dp = args.speculative_draft_model_path
    return m.mtp_layers > 0 and args.spec_algorithm in ("NEXTN", "EAGLE") and (not dp or dp == args.model_path)


def _listed(v: object) -> list[object]:
    """A list key of the plan contract (`warnings`, `notes`) as it stands; [] where it is empty or absent."""
    return v if isinstance(v, list) else []


def _load_draft(opts: PlanOptions, path: str | None, target: str | None, algo: str) -> tuple[Any, str | None]:
    """The drafter's spec; when its config is out of reach, the bundled SpecForge template of that algorithm for the
    launch's target (specs/standin.py::template_for_target), said in a note."""
    try:
        return load_spec_for(opts.draft_config, path, "the draft model", "--draft-config"), None
    except UserError:
        if opts.draft_config or not target or not path:
            raise
        from specbench.specs.resolve import _bundled_match, bundled_dir, bundled_names, load_model_spec
        from specbench.specs.standin import template_for_target

        tpl = template_for_target(target, algo, {n: bundled_dir() / f"{n}.json" for n in bundled_names()},
                                  _bundled_match)
        if tpl is None:
            raise
        label = tpl.stem.replace("__", "/", 1)
        spec = load_model_spec(str(tpl), name=path)
        # a training template's max_position_embeddings is not the published drafter's: its context is not checked
        raw = {k: v for k, v in spec.raw.items() if k != "rope_scaling"} | {"max_position_embeddings": 1 << 30}
        return dataclasses.replace(spec, raw=raw), (
            f"the drafter {path} has no config here: planned on the bundled {label}, the SpecForge {algo} template "
            "for this target (its shapes, not the drafter's; its context limit is not checked); the drafter's "
            "config.json makes it exact")


def _without_unmodelled_spec(args: SglangArgs, version: str) -> tuple[SglangArgs, str | None]:
    """A speculative algorithm the release knows but specbench does not size (0.5.23: DSPARK, UNO): the rest is
    planned without it, and the plan says so (never the engine's unknown-algorithm error for a release that has it)."""
    algo = args.spec_algorithm
    if algo is None or not registry.not_modelled(algo, version):
        return args, None
    return args.with_(speculative_algorithm=None), (
        f"--speculative-algorithm {args.speculative_algorithm} (a speculative algorithm of SGLang "
        f"{registry.spec_algorithms(version).release}) is not modelled: planned without it (no drafter weights, "
        "draft KV or speculative buffers), so the real boot needs more memory than this plan shows")


def _concurrency(p) -> ConcurrencyInputs:
    """Requests at once at the asked and a typical context: each holds its tokens in the full-attention KV pool
    (`kv_tokens`, the scheduler's admission budget: managers/schedule_policy.py::PrefillAdder@0.5.15.post1), capped
    by max_running_requests (the Mamba slots are already inside that cap); the warning when the asked
    max_running_requests cannot all hold the context at once."""
    ok = p.status == "ok" and p.kv_tokens > 0
    # handed to the planner, which words them (plan/api.py; engines sit below plan/concurrency.py)
    return ConcurrencyInputs("SGLang", p.max_running_requests if ok else None, p.context_len,
                             (lambda ctx: p.kv_tokens // ctx) if ok else None, p.requested_max_running_requests,
                             p.kv_tokens)


def plan_reason(p) -> str:
    """One paragraph in plain words: why the plan starts or fails."""
    if p.status == "ok":
        s = (f"Starts: {p.kv_tokens:,} KV tokens and max_running_requests={p.max_running_requests}")
        if p.max_mamba_cache_size is not None:
            s += f", {p.max_mamba_cache_size} Mamba state slots ({p.mamba_ratio} per request)"
        return s + "."
    if p.error_kind == "max_running_request_zero" and p.mamba_per_slot_bytes is None:
        return (f"max_running_requests={p.requested_max_running_requests} divided over the data-parallel attention "
                f"ranks (or the KV pool of {p.kv_tokens:,} tokens) leaves 0 requests per rank.")
    if p.error_kind == "max_running_request_zero" and not p.spec_scratch_requests:
        return (f"The Mamba pool holds {p.max_mamba_cache_size} slots and each request needs {p.mamba_ratio}, "
                f"so max_running_requests rounds to 0.")
    if p.error_kind == "max_running_request_zero":
        return (f"The speculative intermediate-state reservation ({p.spec_scratch_requests} requests x "
                f"{p.draft_tokens} draft tokens x {p.mamba_per_slot_bytes / 2**20:.1f} MiB = "
                f"{p.spec_scratch_gib:.2f} GiB) is taken from the {p.rest_gib:.2f} GiB left after weights and slack "
                f"before the Mamba/KV split (SGLang <= 0.5.12), leaving only {p.max_mamba_cache_size} Mamba slots; "
                f"each request needs {p.mamba_ratio}, so max_running_requests rounds to 0.")
    if p.error_kind == "mamba_state_too_small":
        return (f"After weights ({p.weights_gib:.2f} GiB{f' + draft {p.draft_weights_gib:.2f} GiB' if p.draft_weights_gib else ''}) "
                f"and the runtime slack, {p.rest_gib:.2f} GiB remain; the Mamba share holds "
                f"{p.max_mamba_cache_size} slots, fewer than the {p.mamba_ratio} one request needs"
                + (f" together with its {p.draft_tokens}-token speculative scratch" if p.draft_tokens else "") + ".")
    if p.error_kind == "weights_leave_no_memory":
        return (f"Weights ({p.weights_gib:.2f} GiB + draft {p.draft_weights_gib:.2f} GiB) leave "
                f"{p.avail_at_sizing_gib:.2f} GiB free, less than the runtime slack {p.slack_gib:.2f} GiB that "
                f"--mem-fraction-static={p.mem_fraction_static} keeps back.")
    if p.error_kind == "start_check":  # the error is the engine's own text: said once, here only why no pool is planned
        return (f"SGLang {p.engine_version} stops at start, before it sizes any pool (a configuration check), so "
                "no KV or Mamba pool is planned; the error is the engine's own text.")
    if p.error_kind == "not_enough_memory":
        return f"No memory is left for the KV cache ({p.rest_gib:.2f} GiB after weights, slack and Mamba state)."
    return p.error or "fails"


