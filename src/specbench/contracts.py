"""The plan's JSON contract as types: what `specbench plan --json` emits (docs/contracts.md), the budget rows the
doctor reads from a log, and what an engine's plan hands the planner (the whole `doctor --json` read back:
diagnosis_contract.py; the per-TP table's rows: contracts_per_tp.py; the plain inputs the layers above hand an
engine: contracts_inputs.py).

An engine's planner assembles its keys and hands back a `PlanResult` (`Engine.plan -> EnginePlan`); the doctor
returns a `Diagnosis` (doctor/doctor.py) that holds it; the JSON is written from them at the edge (`to_json`) key for
key and value for value, and read back by `from_json`, so a consumer reads typed fields instead of `d.get("...")`.
Only the keys every engine emits are fields; an engine's own keys stay in `extra` (a read-only mapping). A plan
keeps the order its keys were emitted in (`key_order`), so `plan --json` prints them as the engine wrote them.
Pure, no I/O, no heavy imports.
"""

from __future__ import annotations

import copyreg
import math
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any

from specbench.contracts_per_tp import TP_ROW_TYPES, TpRow

GIB = 1 << 30  # bytes in a GiB: the unit of every `*_gib` key, and of every planner's byte sums (one definition)


def _frozen(d: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(d))


def _proxy(d: dict[str, Any]) -> MappingProxyType[str, Any]:
    return MappingProxyType(d)


def _reduce_proxy(m: MappingProxyType[str, Any]) -> tuple[Callable[[dict[str, Any]], MappingProxyType[str, Any]],
                                                          tuple[dict[str, Any]]]:
    return _proxy, (dict(m),)


# A plan crosses processes (matrix/packing.py spawns a worker per packed server with its Preflight): the read-only
# mappings of its `extra` / `change` pickle as the dicts they wrap, rebuilt by `_proxy` (pickle refuses a
# mappingproxy)
copyreg.pickle(MappingProxyType, _reduce_proxy)


def _plain(v: Any) -> Any:
    """The JSON form of a field value: tuples become lists, contract types their to_json(), mappings dicts."""
    if hasattr(v, "to_json"):
        return v.to_json()
    if isinstance(v, tuple):
        return [_plain(x) for x in v]
    if isinstance(v, MappingProxyType):
        return dict(v)
    return v


def _in_order(out: dict[str, Any], order: tuple[str, ...]) -> dict[str, Any]:
    """`out` with the keys `order` names first, in that order (the order they were emitted in), then the rest."""
    if not order:
        return out
    ordered = {k: out[k] for k in order if k in out}
    ordered.update(out)
    return ordered


# ------------------------------------------------------------------------------------------------ plan: fixes


@dataclass(frozen=True)
class FixResult:
    """What a fixed launch plans to. Both engines emit `status`, `error`, `kv_tokens`, `max_running_requests`;
    SGLang adds the rest of the plan's headline keys (engines/sglang/fixes.py::_result), vLLM its pool numbers (`extra`)."""

    status: str
    error: str | None
    kv_tokens: int | None
    max_running_requests: int | None
    extra: Mapping[str, Any] = field(default_factory=dict)
    key_order: tuple[str, ...] = field(default=(), compare=False, repr=False)  # as emitted (PlanResult.key_order)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> FixResult:
        typed = {f.name for f in fields(cls)} - {"extra", "key_order"}
        return cls(status=d["status"], error=d["error"], kv_tokens=d["kv_tokens"],
                   max_running_requests=d["max_running_requests"],
                   extra=_frozen({k: v for k, v in d.items() if k not in typed}), key_order=tuple(d))

    def to_json(self) -> dict[str, Any]:
        out = {"status": self.status, "error": self.error, "kv_tokens": self.kv_tokens,
               "max_running_requests": self.max_running_requests, **self.extra}
        return _in_order(out, self.key_order)


@dataclass(frozen=True)
class Fix:
    """One nearest working configuration: the flags to change (`{flag: value}`, as the user types them; vLLM's
    CPU space is the env word `VLLM_CPU_KVCACHE_SPACE`) and what the changed launch plans to. The doctor's fix of a
    capped start (the value that lifts the cap, from the engine's own line) has no `result`: nothing was planned."""

    change: Mapping[str, Any]
    result: FixResult | None
    extra: Mapping[str, Any] = field(default_factory=dict)  # the doctor's `source`, `why`, `kind` (docs/contracts.md)
    key_order: tuple[str, ...] = field(default=(), compare=False, repr=False)  # as emitted (PlanResult.key_order)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Fix:
        result = d.get("result")
        return cls(change=_frozen(d["change"]), result=FixResult.from_json(result) if result is not None else None,
                   extra=_frozen({k: v for k, v in d.items() if k not in ("change", "result")}), key_order=tuple(d))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"change": dict(self.change)}
        if self.result is not None:
            out["result"] = self.result.to_json()
        out.update(_plain(self.extra))
        return _in_order(out, self.key_order)


# ------------------------------------------------------------------------------------------------ plan


def sum_of_keys(d: Mapping[str, Any], *keys: str) -> float | None:
    """Sum of the finite numbers under these keys of a JSON object (a plan, its budget); None when none is."""
    vals = [d.get(k) for k in keys]
    nums = [float(v) for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)]
    return sum(nums) if nums else None


@dataclass(frozen=True)
class MemorySplit:
    """Where one GPU's memory goes in a plan (`plan --json` `memory`), GiB per GPU, each engine's own arithmetic:
    target weights, drafter weights, recurrent state outside the KV pool (SGLang's Mamba / GDN pools and speculative
    scratch; vLLM keeps state inside its block pool: null), the KV cache (SGLang: K + V + the drafter's K and V;
    vLLM: the block pool), and the GPU's total. null where the plan does not size it."""

    weights_gib: float | None
    draft_gib: float | None
    state_gib: float | None
    kv_gib: float | None
    total_gib: float | None

    @property
    def sized(self) -> bool:
        return any(v is not None for v in (self.weights_gib, self.draft_gib, self.state_gib, self.kv_gib))

    @property
    def headroom_gib(self) -> float | None:
        """The total less what the plan sizes (None without a total)."""
        if self.total_gib is None:
            return None
        return self.total_gib - sum(v for v in (self.weights_gib, self.draft_gib, self.state_gib, self.kv_gib)
                                    if v is not None)

    def to_json(self) -> dict[str, Any]:
        return {"weights_gib": self.weights_gib, "draft_gib": self.draft_gib, "state_gib": self.state_gib,
                "kv_gib": self.kv_gib, "total_gib": self.total_gib}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> MemorySplit:
        return cls(*(sum_of_keys(d, k) for k in ("weights_gib", "draft_gib", "state_gib", "kv_gib", "total_gib")))

    @classmethod
    def of_plan(cls, plan: Mapping[str, Any]) -> MemorySplit:
        """A stored plan's split: its `memory` where it has one; a plan written before `memory` existed, from the
        keys it had then (K + V of both engines, else vLLM's pool; SGLang's state pools; the GPU total where
        stated). The only reader of those older keys."""
        m = plan.get("memory")
        if isinstance(m, Mapping):
            return cls.from_json(m)
        kv = sum_of_keys(plan, "k_size_gib", "v_size_gib")
        if kv is None:
            kv = sum_of_keys(plan, "kv_pool_gib") or sum_of_keys(plan, "available_kv_gib") or sum_of_keys(plan, "kv_cache_gib")
        state = None if plan.get("engine") == "vllm" else sum_of_keys(
            plan, "conv_state_gib", "ssm_state_gib", "intermediate_ssm_state_gib", "intermediate_conv_window_gib")
        budget = plan.get("budget")
        total = sum_of_keys(plan, "gpu_total_gib") or (sum_of_keys(budget, "total_gib") if isinstance(budget, Mapping)
                                                    else None)
        return cls(sum_of_keys(plan, "weights_gib"), sum_of_keys(plan, "draft_weights_gib"), state, kv, total)


@dataclass(frozen=True)
class PlanResult:
    """`specbench plan --json`: the keys both engines emit as fields (docs/contracts.md, "emitted by: both"),
    every engine-specific key in `extra`. Units: GiB = 2**30 bytes, per GPU (per worker for vLLM)."""

    status: str  # "ok" | "fails"
    error: str | None  # the engine's own error text, or null
    error_kind: str | None  # a stable name for the failure, or null
    engine: str  # "sglang" | "vllm"
    engine_version: str  # the rule set used
    era: str  # the rule family within the engine (SGLang "v0512"/"v0515"/"v0523", vLLM "vLLM GPU V1" ...)
    model: str
    model_kind: str  # architecture and shape in words
    draft_model: str | None
    gpu: str | None  # catalog name; vLLM CPU: "CPU node"
    tp: int
    mem_fraction_static: float  # SGLang f; vLLM: gpu_memory_utilization
    weights_gib: float
    draft_weights_gib: float
    kv_tokens: int | None
    k_size_gib: float | None
    v_size_gib: float | None
    max_mamba_cache_size: int | None
    conv_state_gib: float | None
    ssm_state_gib: float | None
    intermediate_ssm_state_gib: float | None
    max_running_requests: int | None
    reason: str  # why it starts or fails, in plain words
    warnings: tuple[str, ...]
    log_lines: tuple[str, ...]
    ignored_flags: tuple[str, ...]
    unknown_flags: tuple[str, ...]  # flags the release's parser does not have (it would refuse to start)
    fixes: tuple[Fix, ...]
    per_tp: tuple[TpRow, ...] | None  # None: the key is absent (planned with --no-fixes)
    # where the configs came from (specs/resolve.py::SOURCES) and what the reading of command and model says;
    # optional on input: plans written before they existed read back with the defaults
    model_source: str | None = None
    draft_model_source: str | None = None
    model_notes: tuple[str, ...] = ()
    # the expected error of config-estimated weights (specs/estimate_error.py); None: measured or from headers
    weights_estimate_error: float | None = None
    weights_estimate_error_basis: str | None = None
    draft_weights_estimate_error: float | None = None
    draft_weights_estimate_error_basis: str | None = None
    # concurrency said one way (plan/concurrency.py): requests at once at the asked / a typical context, the cap
    engine_cap: int | None = None
    concurrency_at_context: int | None = None
    typical_context: int | None = None
    typical_context_basis: str | None = None
    concurrency_at_typical_context: int | None = None
    concurrency_summary: str | None = None
    # a model planned on a bundled stand-in config (specs/standin.py): which, what was assumed, what makes it exact
    model_stand_in: str | None = None
    # the launch's GPUs besides TP: data- and pipeline-parallel sizes (1 without; plans written before read so)
    dp: int = 1
    pp: int = 1
    # where the GPU's memory goes, typed (each engine fills it; plans written before it: MemorySplit.of_plan)
    memory: MemorySplit | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    # the order the keys were emitted in (`to_json` writes them so; keys it does not name follow); not a key
    key_order: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @classmethod
    def shared_keys(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls) if f.name not in ("extra", "key_order"))

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> PlanResult:
        """Read a plan dict (as `plan_command` returns it or `plan --json` prints it). KeyError names a missing
        shared key."""
        keys = cls.shared_keys()
        optional = {f.name for f in fields(cls) if f.default is not MISSING or f.default_factory is not MISSING}
        kw: dict[str, Any] = {k: d[k] for k in keys if k != "per_tp" and (k in d or k not in optional)}
        for k in ("warnings", "log_lines", "ignored_flags", "unknown_flags", "model_notes"):
            if k in kw:
                kw[k] = tuple(kw[k])
        kw["fixes"] = tuple(Fix.from_json(f) for f in kw["fixes"])
        if isinstance(kw.get("memory"), Mapping):
            kw["memory"] = MemorySplit.from_json(kw["memory"])
        if "per_tp" in d:
            row = TP_ROW_TYPES.get(d["engine"])
            if row is None:
                raise ValueError(f"no per-TP row type for engine {d['engine']!r}")
            kw["per_tp"] = tuple(row.from_json(r) for r in d["per_tp"])
        else:
            kw["per_tp"] = None
        return cls(**kw, extra=_frozen({k: v for k, v in d.items() if k not in keys}), key_order=tuple(d))

    def to_json(self) -> dict[str, Any]:
        out = {k: _plain(getattr(self, k)) for k in self.shared_keys()
               if not (k in ("per_tp", "memory") and getattr(self, k) is None)}
        out.update(self.extra)
        return _in_order(out, self.key_order)

    def updated(self, changes: Mapping[str, Any]) -> PlanResult:
        """The plan with these keys set, typed fields or engine keys alike (their JSON form); a key not yet emitted
        goes after the emitted ones, in the order given."""
        new = PlanResult.from_json({**self.to_json(), **changes})
        order = self.key_order + tuple(k for k in changes if k not in self.key_order) if self.key_order else ()
        return replace(new, key_order=order)


@dataclass(frozen=True)
class PlannerError:
    """A launch the planner could not plan, for an engine whose matrix tolerates it (the tiny CPU models outside what
    the planner models): stored and shown as the plan JSON `{"status": null, "error": null, "planner_error": ...}`."""

    message: str  # "<exception type>: <text>"

    def to_json(self) -> dict[str, object]:
        return {"status": None, "error": None, "planner_error": self.message}


# what the matrix preflight has for a launch: a plan, a tolerated planner error, or nothing (no planner for the engine)
PlanOutcome = PlanResult | PlannerError | None


def plan_json(outcome: PlanOutcome) -> dict[str, object] | None:
    """The JSON contract of an outcome (`plan --json` for a plan), as the store and the dry run hold it."""
    return None if outcome is None else outcome.to_json()


# ------------------------------------------------------------------------------------------------ doctor


@dataclass(frozen=True, slots=True)
class BudgetRow:
    """One row of the memory budget a logged boot used (`doctor --json` `budget`)."""

    key: str  # stable row id: free_before_load, weights, kv, graphs ...
    label: str  # what a person reads
    gib: float | None  # GiB, one GPU (the lowest rank in the log)
    source: str  # the log line (or the arithmetic over log numbers) it comes from

    def to_dict(self) -> dict[str, object]:
        return {"key": self.key, "label": self.label, "gib": self.gib, "source": self.source}

    to_json = to_dict

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> BudgetRow:
        return cls(d["key"], d["label"], d["gib"], d["source"])


# ------------------------------------------------------------------------------------------------ engine -> planner


@dataclass(frozen=True)
class ConcurrencyInputs:
    """What an engine's plan hands the planner to state concurrency (plan/api.py, plan/concurrency.py word it; never
    in the JSON). Engines sit below the planner (pyproject's import layers)."""

    engine: str  # the engine's name in words ("SGLang", "vLLM")
    cap: int | None  # its own cap on running requests; None when the plan fails
    context: int  # the asked context (tokens)
    fits: Callable[[int], int] | None  # requests of c tokens its KV memory holds; None when no pool was sized
    asked: int | None  # the asked cap, or None
    kv_tokens: int


@dataclass(frozen=True)
class EnginePlan:
    """What `Engine.plan` returns: the plan (the JSON contract as a type) and the numbers the planner words."""

    result: PlanResult
    concurrency: ConcurrencyInputs | None = None
