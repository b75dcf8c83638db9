"""The calibration file: the fitted constants per class, versioned JSON (`specbench calibrate` writes it).

{"format": "specbench-calibration", "version": 1, "stores": [...], "global": {params},
 "classes": [{"key": {engine, engine_version, gpu, attention_backend, cuda_graphs, model ("" = pooled over models)},
              "params": {a, al, am, p, e, d, q, f, g},
              "n_step", "n_ttft", "step_rel_rms", "ttft_rel_rms", "stores": [...]}],
 "roofline_optimism": {"c1": x, "cmax": x, "cmax_concurrency": N}}
Params units: a, al, am, p, d, q, f in seconds (per step, per layer and per MoE layer per step, per sequence per
step, per draft forward, per sequence per spec step, of TTFT); e and g are multipliers of the roofline time. The shipped calibrations are package data
(specbench/data/calibrations/*.json), read when no --calibration is given.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from specbench.errors import UserError
from specbench.predict.cells import ClassKey
from specbench.predict.fit import ClassFit
from specbench.predict.model import Params
from specbench.predict.roofline import Ceilings
from specbench.specs.gpu import find_gpu, gpu_perf

FORMAT = "specbench-calibration"
VERSION = 1

# How far a prediction's constants are from a fit on its own kind of cell (`Calibration.lookup`'s source says which):
# calibrated (the class itself, or the class pooled over models), borrowed (another class of the same engine and GPU:
# another release, attention backend or CUDA-graph mode), uncalibrated (no class for this engine and GPU: the bare
# roofline, no overheads at full efficiency, a ceiling on speed with no interval).
CALIBRATED, BORROWED, UNCALIBRATED = "calibrated", "borrowed", "uncalibrated"


def state_of(source: str) -> str:
    """The calibration state of a `lookup` source text ("" for none)."""
    for state in (CALIBRATED, BORROWED):
        if source.startswith(state + ":"):
            return state
    return UNCALIBRATED if source.startswith("roofline only") else ""


def ceilings(gpu_name: str) -> Ceilings | None:
    """The catalog's roofline ceilings for a GPU name (specs/gpu.py::PERF), None when unknown."""
    try:
        g = find_gpu(gpu_name)
    except UserError:
        return None
    perf = gpu_perf(g)
    return Ceilings(perf.mem_bw_gbs * 1e9, perf.bf16_dense_tflops * 1e12) if perf else None


@dataclass(frozen=True)
class Calibration:
    classes: tuple[ClassFit, ...]
    glob: Params
    stores: tuple[str, ...] = ()
    optimism: dict[str, Any] = field(default_factory=dict)
    source: str = ""

    def lookup(self, key: ClassKey) -> tuple[Params, float, str]:
        """(constants, relative RMS of a request's latency under them, where they come from) for a class: the exact
        class, else a class of the same engine and GPU (named), else the pure roofline (with its measured optimism).
        The RMS combines the step fit's and the TTFT fit's (both relative to the request's latency)."""
        for want in (key, key.pooled()):
            for c in self.classes:
                if c.key == want:
                    return c.params, latency_rms(c), f"calibrated: {c.key.text()}"
        near = [c for c in self.classes if (c.key.engine, c.key.gpu) == (key.engine, key.gpu) and not c.key.model]
        if near:
            c = min(near, key=lambda c: (c.key.engine_version != key.engine_version,
                                         c.key.cuda_graphs != key.cuda_graphs,
                                         c.key.attention_backend != key.attention_backend))
            return c.params, latency_rms(c), f"borrowed: {c.key.text()} (no calibration for {key.text()})"
        return Params(), math.nan, f"roofline only (no calibration for {key.text()}){self.optimism_text()}"

    def optimism_text(self) -> str:
        o = self.optimism
        if not o:
            return ""
        return (f"; on the calibrated stores the roofline's tok/s is {o['c1']:.2f}x the measured at c=1 and "
                f"{o['cmax']:.2f}x at c={o['cmax_concurrency']}")

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "stores": list(self.stores), "global": asdict(self.glob),
                "classes": [{"key": c.key.as_dict(), "params": asdict(c.params), "n_step": c.n_step,
                             "n_ttft": c.n_ttft, "step_rel_rms": _num(c.step_rel_rms),
                             "ttft_rel_rms": _num(c.ttft_rel_rms), "stores": list(c.stores)} for c in self.classes],
                "roofline_optimism": self.optimism}


def latency_rms(c: ClassFit) -> float:
    """sqrt(step RMS^2 + TTFT RMS^2): the step residuals are relative to the step, which is most of a request's
    latency; the TTFT residuals are already relative to the latency (predict/fit.py)."""
    t = c.ttft_rel_rms if math.isfinite(c.ttft_rel_rms) else 0.0
    return math.sqrt(c.step_rel_rms ** 2 + t ** 2) if math.isfinite(c.step_rel_rms) else math.nan


def _num(x: float) -> float | None:
    return None if not math.isfinite(x) else round(x, 6)


def _params(d: Any, where: str) -> Params:
    if not isinstance(d, dict):
        raise UserError(f"{where}: params must be an object")
    try:
        return Params(**{k: float(v) for k, v in d.items()})
    except (TypeError, ValueError):
        raise UserError(f"{where}: params must be numbers a, p, e, d, q, f, g; got {sorted(d)}") from None


def from_json(doc: Any, source: str) -> Calibration:
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise UserError(f"{source}: not a specbench calibration file (no \"format\": \"{FORMAT}\")")
    if doc.get("version") != VERSION:
        raise UserError(f"{source}: calibration version {doc.get('version')!r}; this specbench reads {VERSION}")
    classes = []
    for i, c in enumerate(doc.get("classes") or []):
        where = f"{source}: classes[{i}]"
        try:
            k = c["key"]
            key = ClassKey(str(k["engine"]), str(k["engine_version"]), str(k["gpu"]), str(k["attention_backend"]),
                           bool(k["cuda_graphs"]), str(k.get("model") or ""))
            rms = c.get("step_rel_rms")
            trms = c.get("ttft_rel_rms")
            classes.append(ClassFit(key, _params(c["params"], where), int(c.get("n_step") or 0),
                                    int(c.get("n_ttft") or 0), math.nan if rms is None else float(rms),
                                    math.nan if trms is None else float(trms), tuple(c.get("stores") or ())))
        except (KeyError, TypeError, ValueError) as exc:
            raise UserError(f"{where}: malformed ({type(exc).__name__}: {exc})") from None
    return Calibration(tuple(classes), _params(doc.get("global") or {}, f"{source}: global"),
                       tuple(doc.get("stores") or ()), dict(doc.get("roofline_optimism") or {}), source)


def read(path: Path) -> Calibration:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read calibration {path}: {exc.strerror or exc}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    return from_json(doc, str(path))


def shipped() -> Calibration:
    """The calibrations shipped with specbench (package data), merged into one."""
    folder = resources.files("specbench") / "data" / "calibrations"
    cals: list[Calibration] = []
    if folder.is_dir():
        for f in sorted(folder.iterdir(), key=lambda p: p.name):
            if f.name.endswith(".json"):
                cals.append(from_json(json.loads(f.read_text(encoding="utf-8")), f"specbench/data/calibrations/"
                                      f"{f.name}"))
    return merge(cals)


def merge(cals: Sequence[Calibration]) -> Calibration:
    if not cals:
        return Calibration((), Params(), source="none")
    if len(cals) == 1:
        return cals[0]
    classes = tuple(c for cal in cals for c in cal.classes)
    return Calibration(classes, cals[0].glob, tuple(s for cal in cals for s in cal.stores), cals[0].optimism,
                       ", ".join(c.source for c in cals))
