"""`specbench doctor LOG --json` read back as values (docs/contracts.md, "doctor"): the failure, the start-up
warnings with their fixes, and the whole diagnosis, whose `plan` is the planner's contracts.py::PlanResult and whose
`budget` rows are contracts.py::BudgetRow. The doctor writes this JSON (doctor/doctor.py::Diagnosis.to_json); these
types are how a reader (a test, a script over stored diagnoses) gets it back typed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from specbench.contracts import BudgetRow, Fix, PlanResult, _frozen, _plain


@dataclass(frozen=True)
class FailureSummary:
    """`doctor --json` `failure`: a stable kind and the engine's own error text."""

    kind: str
    message: str
    wrapper: str | None = None  # the wrapper line the process printed after the cause (absent when none)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> FailureSummary:
        return cls(d["kind"], d["message"], d.get("wrapper"))

    def to_json(self) -> dict[str, Any]:
        out = {"kind": self.kind, "message": self.message}
        if self.wrapper is not None:
            out["wrapper"] = self.wrapper
        return out


@dataclass(frozen=True)
class StartupWarning:
    """A cap, reduction, reset or override the engine logged while it started, in the engine's own words, with
    the fixes that lift it (`doctor --json` `warnings`; logs/warnings.py). A fix here is
    `{"change": {flag: value | null}, "source": "engine" | "log" | "planner", "why": str[, "result": {...}]}`."""

    kind: str
    message: str
    fixes: tuple[Mapping[str, Any], ...] = ()
    line: int | None = None  # 1-based physical line of the log
    cap: bool = False  # the engine serves less than was asked (False: a note)
    # what was lowered: {"value", "flag", "asked", "to", "why"} (logs/warnings.py::Cap), None for a note;
    # `has_capped` False: the key is absent (an older document)
    capped: Mapping[str, Any] | None = None
    has_capped: bool = field(default=False, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> StartupWarning:
        capped = d.get("capped")
        return cls(d["kind"], d["message"], tuple(_frozen(f) for f in d["fixes"]), d.get("line"), bool(d.get("cap")),
                   _frozen(capped) if capped is not None else None, "capped" in d)

    def to_json(self) -> dict[str, Any]:
        out = {"kind": self.kind, "message": self.message, "fixes": [_plain(f) for f in self.fixes],
               "line": self.line, "cap": self.cap}
        if self.has_capped or self.capped is not None:
            out["capped"] = _plain(self.capped)
        return out


@dataclass(frozen=True)
class DiagnosisSummary:
    """`specbench doctor LOG --json` (doctor/doctor.py::Diagnosis.to_json). `facts` stays a mapping: its keys are the
    fields of logs/facts.py::LogFacts (documented in docs/contracts.md)."""

    status: str  # "started" | "failed" | "unknown"
    failure: FailureSummary | None
    facts: Mapping[str, Any]
    explanation: str
    fixes: tuple[Fix, ...]
    engine: str | None
    engine_version: str | None
    budget: tuple[BudgetRow, ...]
    notes: tuple[str, ...]
    plan: PlanResult | None  # the planner's result for the logged launch, with the log's measured numbers
    warnings: tuple[StartupWarning, ...] | None = None  # None: the key is absent
    capped: bool | None = None  # started, with a warning that caps what it serves; None: the key is absent

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> DiagnosisSummary:
        return cls(
            status=d["status"],
            failure=FailureSummary.from_json(d["failure"]) if d["failure"] is not None else None,
            facts=_frozen(d["facts"]),
            explanation=d["explanation"],
            fixes=tuple(Fix.from_json(f) for f in d["fixes"]),
            engine=d["engine"],
            engine_version=d["engine_version"],
            budget=tuple(BudgetRow.from_json(r) for r in d["budget"]),
            notes=tuple(d["notes"]),
            plan=PlanResult.from_json(d["plan"]) if d["plan"] is not None else None,
            warnings=tuple(StartupWarning.from_json(w) for w in d["warnings"]) if "warnings" in d else None,
            capped=d.get("capped"),
        )

    def to_json(self) -> dict[str, Any]:
        out = {f.name: _plain(getattr(self, f.name)) for f in fields(self)}
        for key in ("warnings", "capped"):
            if out[key] is None:
                del out[key]
        return out
