"""Diagnose one engine log: status, failure, facts, budget, explanation, fixes (from the planner).

The JSON shape is the doctor contract of docs/contracts.md (`status`, `failure`, `facts`, `explanation`,
`fixes`) plus extra keys (`budget`, `notes`, `engine`, `engine_version`, `plan`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypedDict

from specbench.contracts import BudgetRow, Fix, PlanOptions, PlanResult
from specbench.doctor import reading
from specbench.doctor.checks import claimed_quant, weight_check
from specbench.doctor.explain import failure_sentences, started_sentences
from specbench.doctor.hostfixes import host_fixes
from specbench.doctor.readnotes import read_notes
from specbench.engines.base import engine
from specbench.errors import UserError
from specbench.logs.facts import LogFacts
from specbench.logs.failures import Failure, stop_index
from specbench.logs.launch_model import facts_model_source, model_source
from specbench.logs.normalize import decode, looks_binary, normalize
from specbench.logs.reader import read_log_bounded
from specbench.logs.serverargs import ArgValue
from specbench.logs.warnings import Cap, LogWarning
from specbench.plan.api import env_gpu_default, plan_result
from specbench.specs.gpu import find_gpu


class DiagnosisJson(TypedDict):
    """`specbench doctor LOG --json` (docs/contracts.md; read back by diagnosis_contract.py::DiagnosisSummary). The nested
    objects are the JSON forms their own types write: Failure.to_dict, LogFacts.to_dict, Fix.to_json,
    BudgetRow.to_dict, PlanResult.to_json, LogWarning.to_dict."""
    status: str  # "started" | "failed" | "unknown"
    failure: dict[str, str] | None
    facts: Mapping[str, object]
    explanation: str
    fixes: list[Mapping[str, object]]
    engine: str | None
    engine_version: str | None
    budget: list[dict[str, object]]
    notes: list[str]
    plan: Mapping[str, object] | None
    warnings: list[Mapping[str, object]]
    capped: bool


@dataclass(frozen=True)
class Diagnosis:
    status: str  # "started" | "failed" | "unknown"
    failure: Failure | None
    facts: LogFacts
    explanation: str
    budget: tuple[BudgetRow, ...] = ()
    fixes: tuple[Fix, ...] = ()
    notes: tuple[str, ...] = ()
    plan: PlanResult | None = None  # the planner's own result for the logged launch, when available
    warnings: tuple[LogWarning, ...] = ()

    @property
    def capped(self) -> bool:
        """Started, but the engine serves less than asked (a cap / reduction / override warning)."""
        return self.status == "started" and any(w.cap for w in self.warnings)

    def to_json(self) -> DiagnosisJson:
        return {
            "status": self.status,
            "failure": self.failure.to_dict() if self.failure else None,
            "facts": self.facts.to_dict(),
            "explanation": self.explanation,
            "fixes": [f.to_json() for f in self.fixes],
            "engine": self.facts.engine,
            "engine_version": self.facts.engine_version,
            "budget": [r.to_dict() for r in self.budget],
            "notes": list(self.notes),
            "plan": self.plan.to_json() if self.plan is not None else None,
            "warnings": [w.to_dict() for w in self.warnings],
            "capped": self.capped,
        }


# ------------------------------------------------------------------------------------------------ reading input
def read_log(path: str | Path) -> bytes:
    """The log's bytes, bounded (logs/reader.py: regular files only, a size cap, cut long lines, head + tail, and the
    middle's failure, boot and readiness lines);
    UserError (one line) for a missing file, a folder, a FIFO/device, an unreadable or too large file."""
    return read_log_bounded(path, reading.log_reader().search_words())


def boot_budget_rows(facts: LogFacts) -> list[BudgetRow]:
    """The memory budget the boot used, in the terms of the engine that wrote the log (`Engine.budget_rows`)."""
    return engine(facts.engine).budget_rows(facts)


# ------------------------------------------------------------------------------------------------ planner link
def argv_from_log(facts: LogFacts, text: str | None = None) -> list[str]:
    """The launch to re-plan, rebuilt by the engine that wrote the log from its own argument dump."""
    return engine(facts.engine).log_plan_argv(facts, text)


def _text(raw: bytes | str) -> str:
    return raw if isinstance(raw, str) else raw.decode("utf-8", errors="replace")


class PlanFacts(TypedDict):
    """What a log gives a re-plan (`facts_for_plan`, whatif.py::measured_from_log); None where it does not say."""
    argv: list[str] | None  # the launch rebuilt from the argument dump (None: the log has none)
    engine: str | None
    engine_version: str | None
    avail_before_load_gib: float | None
    weights_gib: float | None
    draft_weights_gib: float | None
    non_kv_gib: float | None  # vLLM
    model_config: str | None
    model: ArgValue  # the dumped model path, as the dump spells it
    model_class: str | None
    gpu_total_gib: float | None


def facts_for_plan(path: str | Path) -> PlanFacts:
    """Measured overrides and the rebuilt launch argv for `specbench plan --from-log FILE`:
    `{"argv": [...], "engine": ..., "engine_version": ..., "avail_before_load_gib": ..., "weights_gib": ...,
    "draft_weights_gib": ..., "non_kv_gib": ... (vLLM), "model_config": <a config source that resolves for the
    dumped model path, or None>}` (None where the log does not say). UserError when the file is unusable."""
    raw = read_log(path)
    if looks_binary(raw):
        raise UserError(f"{path}: not a text log")
    facts = parse_raw(raw)[0]
    if not facts.server_args:
        raise UserError(f"{path}: the log has no argument dump (server_args=ServerArgs(...) / non-default args), "
                        "so the launch cannot be rebuilt; pass the launch command after -- instead")
    return {
        "argv": argv_from_log(facts, _text(raw)),
        "engine": facts.engine,
        "engine_version": infer_version(facts),
        "avail_before_load_gib": facts.avail_before_load_gib,
        "weights_gib": facts.weights_gib,
        "draft_weights_gib": facts.draft_weights_gib,
        "non_kv_gib": engine(facts.engine).log_non_kv_gib(facts),
        "model_config": facts_model_source(facts),
        "model": facts.server_args.get("model_path") or facts.server_args.get("model"),
        "model_class": facts.model_class,
        "gpu_total_gib": facts.total_gpu_memory_gib if facts.device != "cpu" else None,
    }


def infer_version(facts: LogFacts) -> str | None:
    """The printed version, else the release the engine infers from the log (e.g. SGLang's argument names)."""
    return facts.engine_version or engine(facts.engine).release_from_args(facts)


def planner_result(facts: LogFacts, engine_version: str | None, gpu: str | None = None,
                   draft_config: str | None = None, text: str | None = None) -> tuple[PlanResult | None, str | None]:
    """Call the planner with the log's measured numbers; (result, None) or (None, why not)."""
    if not facts.server_args:
        return None, "no argument dump in the log, so no launch to re-plan"
    opts = PlanOptions(
        model_config=facts_model_source(facts),
        draft_config=draft_config or model_source(
            {"model_path": facts.server_args.get("speculative_draft_model_path")}),
        gpu=gpu or env_gpu_default(),
        engine=facts.engine,
        engine_version=engine_version or infer_version(facts),
        avail_before_load_gib=facts.avail_before_load_gib,
        weights_gib=facts.weights_gib,
        draft_weights_gib=facts.draft_weights_gib,
        non_kv_gib=engine(facts.engine).log_non_kv_gib(facts),
        fixes=True,
    )
    try:
        return plan_result(argv_from_log(facts, text), opts), None
    except UserError as exc:
        return None, f"the planner cannot plan this launch: {exc}"
    except Exception as exc:  # noqa: BLE001 - a planner bug must not hide the diagnosis; it is named, not swallowed
        return None, f"the planner failed ({type(exc).__name__}: {exc}); please report it"


# ------------------------------------------------------------------------------------------------ diagnosis
def parse_raw(raw: bytes | str) -> tuple[LogFacts, Failure | None]:
    """Facts and failure of the last boot in the text. Never raises."""
    parsed = _parse_all(raw)
    return parsed.facts, parsed.failure


@dataclass(frozen=True)
class _Parsed:
    facts: LogFacts
    failure: Failure | None
    survived: tuple[str, ...]  # exception lines the engine printed before it went on to serve
    stopped: bool  # a deliberate stop (SIGTERM) is in the boot
    warnings: tuple[LogWarning, ...] = ()
    late_boot: bool = False  # a record of the last start-up steps (graph capture, KV allocated) on any rank


def _parse_all(raw: bytes | str) -> _Parsed:
    reader = reading.log_reader()
    boots = reader.boots(normalize(decode(raw)))
    if not boots:
        return _Parsed(LogFacts(boots=0), None, (), False)
    lines = boots[-1]
    facts, failure = reader.facts(lines, boots=len(boots)), reader.failure(lines)
    if failure is not None and failure.kind == "max_running_requests_zero" and facts.max_running_requests is None:
        facts = replace(facts, max_running_requests=0)  # the assertion's own statement: the engine ended at 0
    warns = tuple(reader.warnings_in(lines, facts))
    return _Parsed(facts, failure, tuple(reader.survived_errors(lines)), stop_index(lines) is not None, warns,
                   reader.reached_late_boot(lines))


def _status(facts: LogFacts, failure: Failure | None, warnings: tuple[LogWarning, ...] = (),
            late_boot: bool = False) -> str:
    """failed: a boot failure; started: the engine said it serves, served, or got past KV sizing to the last start-up
    steps (CUDA-graph capture, vLLM's KV cache size / block lines) with no error, or printed a cap (caps are printed
    once the limits are resolved); unknown otherwise."""
    if failure is not None and failure.boot_failure:
        return "failed"
    if facts.ready or facts.accept_lengths or facts.gen_throughputs or facts.running_requests:
        return "started"
    if failure is not None:  # a request-level refusal implies the server was up
        return "started"
    if late_boot or facts.graphs:
        return "started"
    if any(w.cap for w in warnings):
        return "started"
    return "unknown"


# CUDA context + NCCL/cuBLAS workspaces resident before the first weight: about 0.5-1.5 GiB on one GPU. More than this
# already in use at `Load weight begin` means another process (or a previous server still exiting) holds memory.
OTHER_PROCESS_THRESHOLD_GIB = 3.0


def _gpu_total_gib(gpu: str | None) -> float | None:
    if not gpu:
        return None
    try:
        return float(find_gpu(gpu).total_gib)
    except (UserError, AttributeError):
        return None


def _notes(facts: LogFacts, claim: str | None, gpu: str | None = None) -> list[str]:
    notes: list[str] = []
    # the GPU's size: the catalog's for --gpu, else what the engine printed beside the free memory (vLLM's
    # "Free memory on device (F/T GiB) on startup", vllm/v1/worker/utils.py::request_memory@0.32.0)
    total = _gpu_total_gib(gpu) or facts.total_gpu_memory_gib
    if total is not None and facts.avail_before_load_gib is not None:
        used = total - facts.avail_before_load_gib
        if used > OTHER_PROCESS_THRESHOLD_GIB:
            notes.append(f"{used:.2f} GiB of the {total:.2f} GiB {gpu or 'GPU'} were already in use before the weights "
                         f"loaded (free {facts.avail_before_load_gib:.2f} GiB): another process, or a previous server "
                         "not yet gone. Check that GPU memory is free before the next launch.")
    if facts.boots > 1:
        notes.append(f"The file holds {facts.boots} boots; this diagnosis is of the last one.")
    if len(facts.ranks) > 1:
        notes.append(f"Ranks {', '.join(map(str, facts.ranks))} are interleaved; numbers are rank {facts.ranks[0]}'s.")
    check = weight_check(facts, claimed_quant(facts, claim))
    if check is not None and not check.consistent:
        notes.append(
            f"Inconsistent weights: the target weighs {check.measured_gib:.2f} GiB on this GPU, but a "
            f"{check.claimed} checkpoint of this model would weigh about {check.expected_gib:.2f} GiB "
            f"(bf16 would be {check.dense_gib:.2f} GiB). The engine did not load the weights you think it did.")
    notes += engine(facts.engine).log_notes(facts)
    if facts.weights_gib is not None and facts.avail_after_load_gib is not None \
            and facts.avail_before_load_gib is not None:
        gap = facts.avail_before_load_gib - facts.avail_after_load_gib - facts.weights_gib
        if abs(gap) > 0.05:
            notes.append(f"Load weight lines disagree by {gap:.2f} GiB (begin − end − usage).")
    return notes


def diagnose_text(raw: bytes | str, *, claimed_quant: str | None = None, engine_version: str | None = None,
                  gpu: str | None = None, model_config: str | None = None, draft_config: str | None = None,
                  with_fixes: bool = True) -> Diagnosis:
    """Diagnose log text. Never raises on any input (binary, empty, cut off). `model_config` names the model's
    config.json (or a bundled name) when the dumped model path is a local folder this machine does not have;
    `draft_config` the same for the speculative draft."""
    if looks_binary(raw):
        return Diagnosis("unknown", None, LogFacts(boots=0), "This is not a text log (binary content).")
    parsed = _parse_all(raw)
    facts, failure, warns = parsed.facts, parsed.failure, parsed.warnings
    if model_config:
        facts = replace(facts, model_config=model_config)
    if facts.lines == 0:
        return Diagnosis("unknown", None, facts, "The log is empty.")
    if facts.engine is None and failure is None:
        from specbench.logs.foreign import foreign_engine

        other = foreign_engine(_text(raw))
        if other is not None:
            return Diagnosis("unknown", None, facts, f"This is a {other} log, not SGLang's or vLLM's: specbench "
                             "reads only those two engines' logs, so nothing here is diagnosed or planned.")
    status = _status(facts, failure, warns, parsed.late_boot)
    sentences = _sentences(facts, failure, status, warns)
    notes = _notes(facts, claimed_quant, gpu) + _run_notes(facts, failure, parsed) + read_notes(_text(raw))
    plan, fixes, fix_notes = _fixes(facts, failure, status, warns, with_fixes, engine_version, gpu, draft_config,
                                    _text(raw))
    rows = boot_budget_rows(facts)
    budget = tuple(rows) if any(r.gib is not None for r in rows) else ()  # no table of dashes
    return Diagnosis(status, failure, facts, " ".join(sentences), budget, fixes, tuple(notes + fix_notes), plan,
                     warnings=warns)


def _sentences(facts: LogFacts, failure: Failure | None, status: str, warns: tuple[LogWarning, ...]) -> list[str]:
    """What happened, in the engine's words first: the failure and why, or the start and what it capped."""
    out: list[str] = []
    if failure is not None:
        head = "The engine stopped during start-up" if failure.boot_failure else "The engine was running but"
        msg = failure.message.rstrip()
        out.append(f"{head}: {msg}" + ("" if msg.endswith((".", "!", "?")) else "."))
        out += failure_sentences(facts, failure)
    caps = [w.capped for w in warns if w.capped is not None]
    if status == "started":  # a capped start is not "fine": the cap sentence below says what it lowered
        out += [s.replace("Started fine", "Started", 1) if caps else s for s in started_sentences(facts)]
    if status == "started" and caps:
        out.append("Started, but capped: " + "; ".join(_cap_words(c) for c in caps[:4]) + ".")
    if status == "unknown":
        out.append("The log shows neither a finished start-up nor a failure (cut off, or still starting)."
                   + _what_it_shows(facts))
    return out


def _cap_words(c: Cap) -> str:
    asked = f"the asked {c.asked}" if c.asked is not None else "the asked value (not in the log)"
    return f"{c.value} lowered from {asked} to {c.to} ({c.flag}): {c.why}"


def _what_it_shows(facts: LogFacts) -> str:
    rows = [r for r in boot_budget_rows(facts) if r.gib is not None]
    if not rows and facts.kv_tokens is None:
        return ""
    parts = [f"{r.label} {r.gib:.2f} GiB" for r in rows[:6]]
    if facts.kv_tokens is not None:
        parts.append(f"{facts.kv_tokens:,} KV tokens")
    return " What it shows: " + ", ".join(parts) + "."


def _run_notes(facts: LogFacts, failure: Failure | None, parsed: _Parsed) -> list[str]:
    notes: list[str] = []
    if parsed.survived:
        survived = parsed.survived
        notes.append("Errors the engine printed and survived (it went on to serve): " + "; ".join(survived[:3])
                     + (f" (+{len(survived) - 3} more)" if len(survived) > 3 else ""))
    if facts.ready and failure is None and parsed.stopped:
        notes.append("The server was stopped on purpose afterwards (SIGTERM); the exits that follow are that stop.")
    return notes


def _fixes(facts: LogFacts, failure: Failure | None, status: str, warns: tuple[LogWarning, ...], with_fixes: bool,
           engine_version: str | None, gpu: str | None, draft_config: str | None,
           text: str) -> tuple[PlanResult | None, tuple[Fix, ...], list[str]]:
    """(the planner's result, the fixes, notes). A failure's own numbers give the first fixes (the engine's
    `failure_fixes`, the host's); the planner's nearest configurations follow; with neither, the engine's model-free
    `log_fixes`. A healthy start gets none: the planner's nearby configurations serve less than it already does."""
    notes: list[str] = []
    plan: PlanResult | None = None
    planned: list[Fix] = []
    why: str | None = None
    if with_fixes and facts.engine is not None:
        plan, why = planner_result(facts, engine_version, gpu, draft_config, text)
        if plan is not None:
            planned = list(plan.fixes)
            notes += _plan_vs_log(plan, facts)
    src = facts_model_source(facts)
    path = facts.server_args.get("model_path") or facts.server_args.get("model")
    if src and isinstance(path, str) and src != path and not facts.model_config:
        notes.append(f"The model path {path} is not on this machine; its config was resolved by name to the bundled "
                     f"{src}, as `specbench plan` does.")
    if not with_fixes or (failure is None and not any(w.cap for w in warns)):
        return plan, (), notes + ([f"No fixes: {why}."] if why and failure is not None else [])
    # a failure's own numbers; for a capped start, the cap's own fix (the value that lifts it) before the planner's
    own = [Fix.from_json(fx) for fx in (_failure_fixes(facts, failure) if failure is not None else [
        fx for w in warns if w.cap for fx in w.fixes if any(v is not None for v in (fx.get("change") or {}).values())])]
    fixes = _dedupe(own + planned)
    if not fixes and failure is not None and facts.engine is not None:
        fixes = [Fix.from_json(fx) for fx in _log_fixes(facts, failure.kind)]
        if fixes:
            notes.append("Fixes are log-derived: no model config resolved, so they come from the log's own numbers "
                         "(pool sizes, free memory, weights), not from the planner.")
            why = None
    if why and not own:
        notes.append(f"No fixes: {why}.")
    return plan, tuple(fixes), notes


def _failure_fixes(facts: LogFacts, failure: Failure) -> Sequence[Mapping[str, object]]:
    """The failure's own numbers: the host's kill, else the engine's message (`Engine.failure_fixes`)."""
    return host_fixes(failure) or engine(facts.engine).failure_fixes(facts, failure)


def _dedupe(fixes: list[Fix]) -> list[Fix]:
    """The first fix for each change (the failure's own before the planner's for the same flag and value)."""
    seen: set[str] = set()
    out = []
    for fx in fixes:
        key = repr(sorted(fx.change.items())) + str(fx.extra.get("kind"))
        if key not in seen:
            seen.add(key)
            out.append(fx)
    return out


def _log_fixes(facts: LogFacts, kind: str) -> Sequence[Mapping[str, object]]:
    """The engine's own fixes from the log's numbers (`Engine.log_fixes`), for when the planner cannot run."""
    return engine(facts.engine).log_fixes(facts, kind) if facts.engine is not None else []


def _plan_vs_log(plan: PlanResult, facts: LogFacts) -> list[str]:
    """Calibration: where the planner's prediction for the logged launch differs from what the log measured."""
    out = []
    for key in ("kv_tokens", "max_mamba_cache_size", "max_running_requests"):
        want, got = getattr(plan, key), getattr(facts, key)
        if not isinstance(want, (int, float)) or not isinstance(got, (int, float)) or want == got:
            continue
        if key == "kv_tokens" and abs(want - got) <= 0.01 * max(abs(got), 1):
            continue  # within 1 %: the planner's model of resident memory, not a different rule
        out.append(f"Planner ({plan.engine_version}) predicts {key}={want}, the log has {got}.")
    return out


@dataclass(frozen=True)
class DoctorOptions:
    """What `specbench doctor` is told besides the log (its command-line options, typed)."""

    claimed_quant: str | None = None
    engine_version: str | None = None
    gpu: str | None = None
    model_config: str | None = None
    draft_config: str | None = None
    with_fixes: bool = True


def diagnose_file(path: str | Path, options: DoctorOptions | None = None, *, with_fixes: bool = True) -> Diagnosis:
    """diagnose_text of a log file (`with_fixes` alone when no options are given)."""
    o = options if options is not None else DoctorOptions(with_fixes=with_fixes)
    return diagnose_text(read_log(path), claimed_quant=o.claimed_quant, engine_version=o.engine_version, gpu=o.gpu,
                         model_config=o.model_config, draft_config=o.draft_config, with_fixes=o.with_fixes)
