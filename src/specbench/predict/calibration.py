"""The calibration file: the fitted constants per class, versioned JSON (`specbench calibrate` writes it).

{"format": "specbench-calibration", "version": 2, "stores": [...], "global": {params},
 "classes": [{"key": {engine, engine_version, gpu, attention_backend, cuda_graphs, model ("" = pooled over models)},
              "params": {a, al, am, p, e, d, q, f, g, k, ks, k1, k1s, kf, t, db, mt} (model.py::Params),
              "n_step", "n_ttft", "step_rel_rms", "ttft_rel_rms", "stores": [...]}],
 "roofline_optimism": {"c1": x, "cmax": x, "cmax_concurrency": N},
 "coverage": {gpus, methods, kinds, tps, topk_max, kv_scales, prompt: [lo, hi], batch: [lo, hi], accept: [lo, hi],
              routings (the MoE cells' routing regimes)},
 "out_of_sample": {"speedup_log_rms": x, "tok_s_log_rms": x, "n": N, "how": "..."}}
Version 1 files (no coverage, no out-of-sample error) are read: their predictions take the shipped calibration's.
Params units: a, al, am, p, d, q, f in seconds (per step, per layer and per MoE layer per step, per sequence per
step, per draft forward, per sequence per spec step, of TTFT), mt in seconds per token per MoE layer; e and g are
multipliers of the roofline time. A file without mt (written before it) reads it as 0. The shipped calibrations are package data
(specbench/data/calibrations/*.json), read when no --calibration is given.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, TypedDict

from specbench.errors import UserError
from specbench.predict.cells import ClassFit, ClassKey
from specbench.predict.model import Params
from specbench.predict.roofline import Ceilings
from specbench.predict.trust import Coverage
from specbench.specs.gpu import find_gpu, gpu_perf
from specbench.userfile import parse_json, read_text

FORMAT = "specbench-calibration"
VERSION = 2
READS = (1, 2)

# GPU-to-GPU bandwidth per direction, GB/s, by the catalog name's family (NVIDIA datasheets: NVLink 4 900 GB/s total on
# H100 / H200 / H800 SXM, NVLink 5 1.8 TB/s on B200 / GB200, NVLink 3 600 GB/s on A100 SXM; boards without NVLink:
# PCIe Gen5 x16 64 GB/s, Gen4 32 GB/s). Only the TP > 1 all-reduce term reads it (predict/roofline.py::allreduce_s).
LINK_GBS = (("B200", 900.0), ("GB200", 900.0), ("B300", 900.0), ("H200", 450.0), ("H100", 450.0), ("H800", 200.0),
            ("H20", 450.0), ("A100", 300.0), ("A800", 200.0))
PCIE_GBS = {"gen5": 64.0, "gen4": 32.0}


def link_gbs(name: str) -> float:
    """Per-direction link bandwidth of a catalog GPU (PCIe boards: the PCIe link)."""
    n = name.upper()
    if "PCIE" in n or "RTX" in n or n.startswith("L4") or "NVL" in n and "H100 NVL" not in n:
        return PCIE_GBS["gen5"] if any(t in n for t in ("H100", "H200", "RTX PRO", "L40S", "5090")) else PCIE_GBS["gen4"]
    for family, gbs in LINK_GBS:
        if family in n:
            return gbs
    return PCIE_GBS["gen4"]


def ceilings(gpu_name: str) -> Ceilings | None:
    """The catalog's roofline ceilings for a GPU name (specs/gpu.py::PERF), None when unknown."""
    try:
        g = find_gpu(gpu_name)
    except UserError:
        return None
    perf = gpu_perf(g)
    if not perf:
        return None
    return Ceilings(perf.mem_bw_gbs * 1e9, perf.bf16_dense_tflops * 1e12, link_gbs(perf.gpu) * 1e9)


class ClassJson(TypedDict):
    """One class of a calibration file (from_json reads it back)."""

    key: dict[str, str | bool]  # ClassKey.as_dict
    params: dict[str, float]  # Params, every constant
    n_step: int
    n_ttft: int
    step_rel_rms: float | None
    ttft_rel_rms: float | None
    stores: list[str]
    coverage: dict[str, object]  # trust.py::Coverage.as_dict


# A calibration file (FORMAT, VERSION), in this key order ("global" is a keyword: the functional form names it)
CalibrationJson = TypedDict("CalibrationJson", {
    "format": str, "version": int, "stores": list[str], "global": dict[str, float], "classes": list[ClassJson],
    "roofline_optimism": dict[str, float], "coverage": dict[str, object], "out_of_sample": dict[str, object]})


@dataclass(frozen=True)
class Calibration:
    classes: tuple[ClassFit, ...]
    glob: Params
    stores: tuple[str, ...] = ()
    optimism: dict[str, float] = field(default_factory=dict)  # {} or c1, cmax, cmax_concurrency (_optimism)
    source: str = ""
    coverage: Coverage = Coverage()
    out_of_sample: dict[str, object] = field(default_factory=dict)  # api.py::out_of_sample_error; read narrowed
    coverages: dict[ClassKey, Coverage] = field(default_factory=dict)  # per class: what its own cells spanned

    def _cov(self, key: ClassKey) -> Coverage:
        return self.coverages.get(key) or self.coverage

    def find(self, key: ClassKey) -> Found:
        """The constants for a class and how far they were moved: the class itself (or pooled over models); else a
        class of the same engine and GPU (another release / backend / graph mode); else the same engine on the
        nearest GPU (by memory bandwidth), its constants moved by this GPU's roofline; else another engine's
        global constants (uncalibrated); never the bare roofline while any class exists."""
        for want in (key, key.pooled()):
            for c in self.classes:
                if c.key == want:
                    return Found(c.params, f"calibrated: {c.key.text()}", {}, c.key.gpu, self._cov(c.key),
                                 _finite(c.step_rel_rms))
        pooled = [c for c in self.classes if not c.key.model]
        same_engine = [c for c in pooled if c.key.engine == key.engine]
        if same_engine:
            own = ceilings(key.gpu)

            def distance(c: ClassFit) -> tuple[bool, bool, bool, float, bool]:
                """Same GPU first; then the graph mode (eager vs graphs moves every step's floor: tok/s x3-4 in
                tests/data/h200-run), the backend, the nearest bandwidth, the release."""
                other = ceilings(c.key.gpu)
                bw = abs(math.log(own.bytes_per_s / other.bytes_per_s)) if own and other else 9.0
                return (c.key.gpu != key.gpu, c.key.cuda_graphs != key.cuda_graphs,
                        c.key.attention_backend != key.attention_backend, bw, c.key.engine_version != key.engine_version)
            c = min(same_engine, key=distance)
            # the model's own class on the source GPU, where one was fitted: its residual is a floor too (a model the
            # pooled constants fit badly there, a MoE, is no better predicted on another GPU)
            own_fit = max((_finite(o.step_rel_rms) for o in self.classes
                           if key.model and o.key == dataclasses.replace(c.key, model=key.model)), default=0.0)
            # moved constants: the ranges are checked against everything calibrated (the context and batch terms
            # are pulled towards the fit over all classes); the move itself is priced by its own terms. The MoE
            # routing regimes are the source class's own: its MoE constants were fitted on those alone
            cov = dataclasses.replace(self.coverage, routings=self._cov(c.key).routings)
            return Found(c.params, f"moved: {c.key.text()} (no calibration for {key.text()})", _moves(c.key, key),
                         c.key.gpu, cov, max(_finite(c.step_rel_rms), own_fit))
        if pooled:
            return Found(self.glob, f"uncalibrated: the constants of {pooled[0].key.engine} (no calibration of "
                         f"{key.engine}: {key.text()})", {"engine": f"engine {key.engine} never calibrated: the "
                         f"constants of {pooled[0].key.engine} moved by the roofline"}, "", self.coverage)
        return Found(Params(), f"uncalibrated: no calibration at all, the bare roofline ({key.text()})",
                     {"engine": "no calibration: the bare roofline"}, "", Coverage())

    def optimism_text(self) -> str:
        o = self.optimism
        if not o:
            return ""
        return (f"on the calibrated stores the bare roofline's tok/s is {o['c1']:.2f}x the measured at c=1 and "
                f"{o['cmax']:.2f}x at c={o['cmax_concurrency']}")

    def base_sigma(self) -> float:
        """The out-of-sample log RMS of the speedup (trust.py); NaN when this calibration could not measure it."""
        v = self.out_of_sample.get("speedup_log_rms")
        return float(v) if isinstance(v, (int, float)) and math.isfinite(v) and v > 0 else math.nan

    def to_json(self) -> CalibrationJson:
        return {"format": FORMAT, "version": VERSION, "stores": list(self.stores), "global": asdict(self.glob),
                "classes": [{"key": c.key.as_dict(), "params": asdict(c.params), "n_step": c.n_step,
                             "n_ttft": c.n_ttft, "step_rel_rms": _num(c.step_rel_rms),
                             "ttft_rel_rms": _num(c.ttft_rel_rms), "stores": list(c.stores),
                             "coverage": self._cov(c.key).as_dict()} for c in self.classes],
                "roofline_optimism": self.optimism, "coverage": self.coverage.as_dict(),
                "out_of_sample": self.out_of_sample}


@dataclass(frozen=True)
class Found:
    """Constants for a class, what they are, and how they were moved (trust.py::assess reads `moved`)."""

    params: Params
    source: str
    moved: dict[str, str]
    from_gpu: str
    coverage: Coverage = Coverage()  # what the cells of the class it comes from spanned
    fit_rms: float = 0.0  # the class's own step-fit residual (relative RMS): a class the model fits badly is less sure


def _finite(x: float) -> float:
    return x if math.isfinite(x) else 0.0


def _moves(src: ClassKey, want: ClassKey) -> dict[str, str]:
    out: dict[str, str] = {}
    if src.gpu != want.gpu:
        out["gpu"] = f"GPU {want.gpu} never calibrated: the constants of {src.gpu} moved by its roofline"
    if src.engine_version != want.engine_version:
        out["release"] = f"{want.engine} {want.engine_version} never calibrated: {src.engine_version}'s constants"
    if src.attention_backend != want.attention_backend:
        out["backend"] = (f"attention backend {want.attention_backend} never calibrated: "
                          f"{src.attention_backend}'s constants")
    if src.cuda_graphs != want.cuda_graphs:
        g = {True: "CUDA graphs", False: "eager (no CUDA graphs)"}
        out["graphs"] = f"{g[want.cuda_graphs]} never calibrated: the constants of {g[src.cuda_graphs]}"
    return out


def _num(x: float) -> float | None:
    return None if not math.isfinite(x) else round(x, 6)


PARAM_NAMES = ("a", "al", "am", "p", "e", "d", "q", "f", "g", "k", "ks", "k1", "k1s", "kf", "t", "db", "mt")
# The largest value a constant can take and still be a step-cost constant: seconds at most 1 s; multipliers of a
# roofline time at most 1000 (the largest fitted, k1s, is ~30). Beyond them a hand-edited file would give negative
# or absurd speeds: refused in one line.
PARAM_MAX = {"e": 1000.0, "g": 1000.0, "k": 1000.0, "ks": 1000.0, "k1": 1000.0, "k1s": 1000.0, "kf": 1000.0}


def _params(d: Any, where: str) -> Params:
    if not isinstance(d, dict):
        raise UserError(f"{where}: params must be an object")
    try:
        vals = {k: float(v) for k, v in d.items() if not isinstance(v, bool)}
        params = Params(**vals)
    except (TypeError, ValueError):
        raise UserError(f"{where}: params must be numbers {', '.join(PARAM_NAMES)}; got {sorted(d)}") from None
    bad = [k for k, v in vals.items() if not (math.isfinite(v) and 0.0 <= v <= PARAM_MAX.get(k, 1.0))]
    if bad or len(vals) != len(d) or params.e <= 0 or params.g <= 0:
        raise UserError(f"{where}: params out of their physical range ({', '.join(sorted(bad)) or 'e and g > 0'}): "
                        "times are seconds in [0, 1], multipliers in [0, 1000]")
    return params


def from_json(doc: Any, source: str) -> Calibration:
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise UserError(f"{source}: not a specbench calibration file (no \"format\": \"{FORMAT}\")")
    if doc.get("version") not in READS:
        raise UserError(f"{source}: calibration version {doc.get('version')!r}; this specbench reads "
                        f"{' and '.join(map(str, READS))}")
    classes = []
    coverages: dict[ClassKey, Coverage] = {}
    for name, kind in (("classes", list), ("stores", list), ("global", dict), ("coverage", dict),
                       ("out_of_sample", dict), ("roofline_optimism", dict)):
        if doc.get(name) is not None and not isinstance(doc[name], kind):
            raise UserError(f"{source}: {name} must be {'a list' if kind is list else 'an object'}, got "
                            f"{type(doc[name]).__name__}")
    stores = _names(doc.get("stores"), f"{source}: stores")
    optimism = _optimism(doc.get("roofline_optimism"), f"{source}: roofline_optimism")
    for i, c in enumerate(doc.get("classes") or []):
        where = f"{source}: classes[{i}]"
        try:
            k = c["key"]
            if not isinstance(k["cuda_graphs"], bool):  # "false" is a true string: only JSON true / false
                raise TypeError(f"cuda_graphs must be true or false, got {k['cuda_graphs']!r}")
            key = ClassKey(str(k["engine"]), str(k["engine_version"]), str(k["gpu"]), str(k["attention_backend"]),
                           k["cuda_graphs"], str(k.get("model") or ""))
            rms = c.get("step_rel_rms")
            trms = c.get("ttft_rel_rms")
            classes.append(ClassFit(key, _params(c["params"], where), int(c.get("n_step") or 0),
                                    int(c.get("n_ttft") or 0), math.nan if rms is None else float(rms),
                                    math.nan if trms is None else float(trms),
                                    _names(c.get("stores"), f"{where}: stores")))
            if c.get("coverage"):
                coverages[key] = Coverage.from_dict(c["coverage"])
        except (KeyError, TypeError, ValueError) as exc:
            raise UserError(f"{where}: malformed ({type(exc).__name__}: {exc})") from None
    try:
        cov = Coverage.from_dict(doc.get("coverage"))
    except (TypeError, ValueError) as exc:
        raise UserError(f"{source}: coverage malformed ({exc})") from None
    raw = doc.get("out_of_sample")
    oos: dict[str, object] = dict(raw) if isinstance(raw, dict) else {}
    return Calibration(tuple(classes), _params(doc.get("global") or {}, f"{source}: global"), stores, optimism,
                       source, cov, oos, coverages)


def _names(value: Any, where: str) -> tuple[str, ...]:
    """A list of store paths (absent: none); a string would read as its characters."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UserError(f"{where}: must be a list of store paths (strings)")
    return tuple(value)


OPTIMISM_KEYS = ("c1", "cmax", "cmax_concurrency")


def _optimism(value: Any, where: str) -> dict[str, float]:
    """roofline_optimism: absent / null / {} (a calibration that measured none), or all three of its keys: the
    roofline's tok/s over the measured at c=1 and at the largest concurrency (finite, > 0), and that concurrency (an
    integer >= 1). A part of it, a string or a number is a damaged file, not an optimism of unknown parts."""
    if not value:
        return {}
    if not isinstance(value, dict) or sorted(value) != sorted(OPTIMISM_KEYS):
        raise UserError(f"{where}: must hold exactly {', '.join(OPTIMISM_KEYS)} (or be empty)")
    ratios = [value["c1"], value["cmax"]]
    conc = value["cmax_concurrency"]
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0
               for x in ratios):
        raise UserError(f"{where}: c1 and cmax must be finite numbers > 0")
    if isinstance(conc, bool) or not isinstance(conc, int) or conc < 1:
        raise UserError(f"{where}: cmax_concurrency must be an integer >= 1")
    return dict(value)


MAX_BYTES = 16 << 20  # a calibration of every class of every engine is tens of kB


def read(path: Path) -> Calibration:
    """A calibration file the user named: a regular UTF-8 file of JSON (userfile.py: a FIFO, a device, a store,
    another encoding is one line at once), then its fields checked (from_json)."""
    try:
        text = read_text(path, "calibration file", MAX_BYTES)
    except OSError as exc:
        raise UserError(f"cannot read calibration {path}: {exc.strerror or exc}") from None
    return from_json(parse_json(text, str(path), "not JSON"), str(path))


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
    cov = Coverage()
    for cal in cals:
        cov = cov.merged(cal.coverage)
    # the first calibration's out-of-sample error, else the next that measured one (a one-store calibration cannot)
    oos = next((cal.out_of_sample for cal in cals if math.isfinite(cal.base_sigma())), {})
    covs = {k: v for cal in reversed(cals) for k, v in cal.coverages.items()}  # the first calibration's win
    return Calibration(classes, cals[0].glob, tuple(s for cal in cals for s in cal.stores), cals[0].optimism,
                       ", ".join(c.source for c in cals), cov, dict(oos), covs)
