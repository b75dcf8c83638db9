"""Diagnose one engine log: status, failure, facts, budget, explanation, fixes (from the planner).

The JSON shape is the doctor contract of docs/contracts.md (`status`, `failure`, `facts`, `explanation`,
`fixes`) plus extra keys (`budget`, `notes`, `engine`, `engine_version`, `plan`). This module assembles the
diagnosis and says what happened; its parts: the last boot read and its status (lastboot.py), the notes
(notes.py), the fixes (fixes.py) and the planner link (replan.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypedDict

from specbench.contracts import BudgetRow, Fix, PlanResult
from specbench.doctor.explain import failure_sentences, started_sentences
from specbench.doctor.fixes import diagnosis_fixes
from specbench.doctor.lastboot import boot_status, log_text, parse_all, read_log
from specbench.doctor.notes import boot_notes, run_notes
from specbench.doctor.readnotes import read_notes
from specbench.engines.base import engine
from specbench.logs.facts import LogFacts
from specbench.logs.failures import Failure
from specbench.logs.normalize import looks_binary
from specbench.logs.warnings import Cap, LogWarning


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


def boot_budget_rows(facts: LogFacts) -> list[BudgetRow]:
    """The memory budget the boot used, in the terms of the engine that wrote the log (`Engine.budget_rows`)."""
    return engine(facts.engine).budget_rows(facts)


def diagnose_text(raw: bytes | str, *, claimed_quant: str | None = None, engine_version: str | None = None,
                  gpu: str | None = None, model_config: str | None = None, draft_config: str | None = None,
                  with_fixes: bool = True) -> Diagnosis:
    """Diagnose log text. Never raises on any input (binary, empty, cut off). `model_config` names the model's
    config.json (or a bundled name) when the dumped model path is a local folder this machine does not have;
    `draft_config` the same for the speculative draft."""
    if looks_binary(raw):
        return Diagnosis("unknown", None, LogFacts(boots=0), "This is not a text log (binary content).")
    parsed = parse_all(raw)
    facts, failure, warns = parsed.facts, parsed.failure, parsed.warnings
    if model_config:
        facts = replace(facts, model_config=model_config)
    if facts.lines == 0:
        return Diagnosis("unknown", None, facts, "The log is empty.")
    if facts.engine is None and failure is None:
        from specbench.logs.foreign import foreign_engine

        other = foreign_engine(log_text(raw))
        if other is not None:
            return Diagnosis("unknown", None, facts, f"This is a {other} log, not SGLang's or vLLM's: specbench "
                             "reads only those two engines' logs, so nothing here is diagnosed or planned.")
    status = boot_status(facts, failure, warns, parsed.late_boot)
    sentences = _sentences(facts, failure, status, warns)
    notes = boot_notes(facts, claimed_quant, gpu) + run_notes(facts, failure, parsed) + read_notes(log_text(raw))
    plan, fixes, fix_notes = diagnosis_fixes(facts, failure, status, warns, with_fixes, engine_version, gpu,
                                             draft_config, log_text(raw))
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
