"""Predict every cell of a matrix: the dry run's cells (matrix/preflight.py::dry_run, the planner's
max_running_requests per server) -> predicted tok/s, TPOT, speedup over the AR cell at the same TP, concurrency and
load, each with its trust (predict/trust.py): `calibration_state` calibrated / extrapolated (with what lies outside
the calibration) / uncalibrated, and an interval on the log scale from the calibration's out-of-sample error widened
for every such distance. Every predicted cell has an interval; none is the bare roofline."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from specbench.errors import UserError
from specbench.plan.reach import request_length
from specbench.predict.calibration import Calibration, ceilings
from specbench.predict.cells import PlanKeys, adapter_for, cell_shape, class_key, held, routing
from specbench.predict.judged import ar_twin, judge
from specbench.predict.model import CellShape


@dataclass(frozen=True)
class Predicted:
    """One cell's prediction (docs/contracts.md, `specbench predict --json`)."""

    cell: str
    label: str
    tp: int
    concurrency: int
    batch: int
    accept_len: float | None
    tok_s: float | None
    tpot_ms: float | None
    ttft_ms: float | None
    speedup: float | None
    speedup_lo: float | None
    speedup_hi: float | None
    source: str
    error: str | None = None
    tok_s_lo: float | None = None    # tok/s / exp(Z sigma) .. x exp(Z sigma) (trust.py)
    tok_s_hi: float | None = None
    state: str = ""                  # calibrated | extrapolated | uncalibrated; "" when not predicted
    outside: tuple[str, ...] = ()    # what lies outside the calibration (trust.py::assess)
    sigma: float | None = None       # log-scale SD of the speedup
    load: str = ""                   # the client's "prompt+output" tokens (a matrix that varies them tells cells apart)
    ttft_seen_ms: float | None = None  # the TTFT the closed-loop client measures, the wait for a slot included

    @property
    def calibration_state(self) -> str:
        """calibrated | extrapolated | uncalibrated (predict/trust.py); "" when not predicted."""
        return self.state if self.tok_s is not None else ""

    def as_dict(self) -> dict[str, Any]:
        def r(x: float | None, n: int) -> float | None:
            return None if x is None or not math.isfinite(x) else round(x, n)
        return {"cell": self.cell, "label": self.label, "tp": self.tp, "concurrency": self.concurrency,
                "batch": self.batch, "accept_len": r(self.accept_len, 3), "tok_s": r(self.tok_s, 1),
                "tpot_ms": r(self.tpot_ms, 3), "ttft_ms": r(self.ttft_ms, 1), "speedup": r(self.speedup, 3),
                "speedup_lo": r(self.speedup_lo, 3), "speedup_hi": r(self.speedup_hi, 3), "source": self.source,
                "error": self.error, "tok_s_lo": r(self.tok_s_lo, 1), "tok_s_hi": r(self.tok_s_hi, 1),
                "calibration_state": self.calibration_state, "outside_calibration": list(self.outside),
                "sigma_log": r(self.sigma, 4), "load": self.load, "ttft_seen_ms": r(self.ttft_seen_ms, 1)}


def _accept(row: Mapping[str, Any], accept_len: float | None, measured: Mapping[str, float]) -> float | None:
    if accept_len is not None:
        return accept_len
    if row["label"] in measured:
        return measured[row["label"]]
    sim = (row.get("server") or {}).get("simulated_accept_len")
    return float(sim) if isinstance(sim, (int, float)) and not isinstance(sim, bool) else None


def max_accept(shape: CellShape) -> int:
    """The most one verify step can accept, the bonus token included: a chain or tree of num_steps drafts accepts at
    most num_steps + 1 (a tree's depth, not its width); a block or n-gram draft, its verify tokens."""
    if shape.method in ("eagle", "mtp") and shape.num_steps > 0:
        return shape.num_steps + 1
    return max(1, shape.verify_tokens)


def accept_problem(shape: CellShape, acc: float) -> str | None:
    if not math.isfinite(acc) or acc < 1:
        return f"accept length {acc:g} is not a number >= 1 (tokens per verify step, the bonus token included)"
    most = max_accept(shape)
    if acc > most + 1e-9:
        return f"accept length {acc:g} is above {most}, the most this configuration can accept per verify step"
    return None


def _load(c: Mapping[str, Any]) -> str:
    """"prompt+output" tokens of a cell's client (the fixed lengths, or a dataset's caps), "" when it names neither."""
    prompt = c.get("prompt_tokens") or c.get("prompt_len")
    out = c.get("output_tokens") or c.get("output_len")
    return f"{prompt or '?'}+{out or '?'}" if prompt or out else ""


def _base_key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    c = row.get("client") or {}
    return ((row.get("server") or {}).get("tp"), c.get("concurrency"), c.get("prompt_tokens"),
            c.get("output_tokens"), c.get("prompt_len"), c.get("output_len"), c.get("request_rate"), c.get("dataset"))


def predict_rows(rows: Sequence[Mapping[str, Any]], plan: PlanKeys, engine: str, cal: Calibration,
                 accept_len: float | None = None, measured: Mapping[str, float] | None = None) -> list[Predicted]:
    """`rows` are matrix/preflight.py::dry_run's; `measured` maps a label to an accept length (--acceptance-from)."""
    version = plan.engine_version or "unknown"
    gpu = plan.gpu or "unknown"
    ceil = ceilings(gpu)
    shapes: list[tuple[Mapping[str, Any], CellShape | None, str | None]] = []
    adapter = adapter_for(engine, version)
    for row in rows:
        server, argv = row.get("server") or {}, row.get("command") or ()
        try:
            asked = cell_shape(server, row.get("client") or {}, plan, row.get("max_running_requests_planned"), argv,
                               routing=routing(adapter, argv, server))
            shapes.append((row, held(asked, row.get("plan_limits"), request_length(row.get("client") or {})), None))
        except (ValueError, UserError) as exc:
            shapes.append((row, None, str(exc)))
    ar_tok: dict[tuple[Any, ...], float] = {}
    results: dict[str, Predicted] = {}
    # AR cells first: each speculative cell divides by the AR cell of its TP, concurrency and load
    for row, shape, err in sorted(shapes, key=lambda s: 0 if (s[1] is not None and s[1].method == "ar") else 1):
        c = row.get("client") or {}
        tp = int((row.get("server") or {}).get("tp") or 1)
        conc = int(c.get("concurrency") or 1)
        acc = _accept(row, accept_len, measured or {}) if shape is not None and shape.method != "ar" else None
        if err is None and ceil is None:
            err = f"GPU {gpu!r} has no roofline ceilings in the catalog (specs/gpu.py::PERF)"
        if err is None and shape is not None and shape.method != "ar" and acc is None:
            err = "no accept length: give --accept-len L or --acceptance-from STORE (or simulated_accept_len)"
        if err is None and shape is not None and acc is not None:
            err = accept_problem(shape, acc)
        if err is not None or shape is None or ceil is None:
            results[row["cell"]] = Predicted(row["cell"], row["label"], tp, conc, 0, acc, None, None, None, None,
                                             None, None, "", err, load=_load(c))
            continue
        key = class_key(engine, version, gpu, row.get("command") or (), plan.model_config or "")
        j = judge(cal, key, shape, acc)
        if j is None:
            continue
        p = j.pred
        sp = lo = hi = None
        if shape.method == "ar":
            ar_tok[_base_key(row)] = p.tok_s
            sp = lo = hi = 1.0  # the baseline itself: 1 by definition
        else:
            base = ar_tok.get(_base_key(row))
            if base is None:  # no AR cell in the matrix at this point: predict one, at what an AR server holds
                twin = judge(cal, key, _ar_twin(shape, rows, row), None)
                base = twin.pred.tok_s if twin is not None else 0.0
            sp = p.tok_s / base if base > 0 else None
            if sp is not None:
                lo, hi = j.trust.interval(sp)
        t_lo, t_hi = j.trust.interval(p.tok_s, tok_s=True)
        results[row["cell"]] = Predicted(row["cell"], row["label"], tp, conc, p.batch, acc, p.tok_s, p.tpot_ms,
                                         p.ttft_ms, sp, lo, hi, j.source, None, t_lo, t_hi, j.trust.state,
                                         j.trust.outside, j.trust.sigma, _load(c), p.ttft_seen_ms)
    return [results[row["cell"]] for row in rows]


def _ar_twin(shape: CellShape, rows: Sequence[Mapping[str, Any]], row: Mapping[str, Any]) -> CellShape:
    """The AR cell a speculative cell is compared with where the matrix has none at its load: at the cap and KV of
    the matrix's AR server at the same TP (its planner's max_running_requests, held to what its KV holds at this
    cell's lengths); with no AR server at all, at the speculative launch's own held batch (an AR launch holds at
    least as much KV: a floor)."""
    tp = (row.get("server") or {}).get("tp")
    for r in rows:
        if (r.get("server") or {}).get("algorithm", "ar") == "ar" and (r.get("server") or {}).get("tp") == tp:
            v = r.get("max_running_requests_planned")
            twin = ar_twin(shape, int(v) if isinstance(v, int) else None)
            return held(twin, r.get("plan_limits"), request_length(row.get("client") or {}))
    return ar_twin(shape)
