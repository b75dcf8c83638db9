"""What a results store measured, as the step model's observations: one per done cell, from its raw request rows.

Definitions (pooled over a cell's requests and repeats, total over total):
- step time: AR sum(e2e - ttft) / sum(output - 1); speculative sum(e2e - ttft) / sum(verify steps), with verify
  steps = SGLang's `spec_verify_ct`, else output / the request's accept length (vLLM);
- accept length: sum(output) / sum(verify steps) (SGLang's own definition: completion tokens / spec_verify_ct);
- TTFT: the mean over the requests;
- tok/s: sum(output) / metrics_json.duration_s (the summed measured time), else b * mean(output) / mean(e2e);
- speedup: tok/s over that of the AR cell with the same baseline key (load/speedup.py::baseline_key).
The store's [plan] table comes from its `meta.matrix_text` (the matrix the run read).
"""

from __future__ import annotations

import functools
import math
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from specbench.errors import UserError
from specbench.load.schedule import is_closed_loop
from specbench.plan.reach import request_length
from specbench.predict.cells import (
    ClassKey,
    PlanKeys,
    adapter_for,
    cell_shape,
    class_key,
    held,
    routing,
)
from specbench.predict.model import CellShape
from specbench.stored.read import load_store
from specbench.stored.records import CellRecord, LoadedStore, RequestRecord, first_repeat_in_send_order

if TYPE_CHECKING:
    from specbench.engines.base import ServerAdapter

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@dataclass(frozen=True)
class Observation:
    store: str
    cell_id: str
    label: str
    key: ClassKey
    shape: CellShape
    step_s: float
    ttft_s: float
    e2e_s: float                 # mean request latency
    accept_len: float | None     # None for AR
    tok_s: float
    speedup: float | None        # measured, over the AR cell with the same baseline key
    # what the cell measured that no real checkpoint would (the engine's stand_in_measurement, e.g. a dummy-weight
    # MoE whose simulated acceptance collapsed its routing): kept out of the calibration and of its accuracy
    stand_in: str | None = None


def plan_table(store: LoadedStore) -> PlanKeys:
    """The [plan] table of the matrix a store recorded (meta.matrix_text)."""
    text = store.meta.get("matrix_text") or ""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{store.path}: its meta.matrix_text is not a readable matrix ({exc})") from None
    plan = doc.get("plan")
    return PlanKeys.of(plan) if isinstance(plan, dict) else PlanKeys()


def _steady(cell: CellRecord, reqs: list[RequestRecord]) -> list[RequestRecord] | None:
    """A closed-loop cell's requests after its first wave, where it ran two or more (the first `concurrency`
    requests its first repeat sent): None where the cell cannot say (one wave, a rate).

    The first wave of the first cell at a concurrency on a boot ran cold with a two-request warm-up (the EAGLE3 chain
    at c = 16, 512 tokens, H100: slowest first token 0.586 s in wave 1, 0.206 s in wave 2; matrix/warmup.py), which
    the runner now warms with a full wave; the step model is fitted to, and judged on, the warm waves."""
    c = cell.concurrency or 1
    if not is_closed_loop(cell.client.get("request_rate")):
        return None
    mine = first_repeat_in_send_order(reqs)
    if len(mine) < 2 * c:
        return None
    cold = {id(r) for r in mine[:c]}
    return [r for r in reqs if id(r) not in cold]


def _measured(cell: CellRecord) -> tuple[float, float, float, float | None, float] | None:
    reqs = [r for r in cell.requests if r.ok and r.e2e_s is not None and r.ttft_s is not None and r.output_tokens]
    if not reqs:
        return None
    steady = _steady(cell, reqs)
    reqs = steady or reqs
    decode = sum(max(0.0, (r.e2e_s or 0.0) - (r.ttft_s or 0.0)) for r in reqs)
    out = sum(int(r.output_tokens or 0) for r in reqs)
    if cell.is_ar:
        steps: float = sum(max(1, int(r.output_tokens or 0) - 1) for r in reqs)
        acc = None
    else:
        steps = 0.0
        for r in reqs:
            if r.spec_verify_ct:
                steps += r.spec_verify_ct
            elif r.accept_len and r.accept_len >= 1:
                steps += int(r.output_tokens or 0) / r.accept_len
            else:
                return None
        acc = out / steps if steps else None
    if steps <= 0 or decode <= 0 or (acc is not None and acc < 1):  # nothing the step model can read
        return None
    ttft = sum(r.ttft_s or 0.0 for r in reqs) / len(reqs)
    e2e = sum(r.e2e_s or 0.0 for r in reqs) / len(reqs)
    dur = cell.metric("duration_s")
    b = cell.concurrency or 1
    if e2e <= 0:
        return None
    # closed loop: b requests in flight, each out / len tokens in e2e (the whole cell's rate where all waves count)
    tok_s = out / dur if dur and dur > 0 and steady is None else b * (out / len(reqs)) / e2e
    return decode / steps, ttft, e2e, acc, tok_s


def observations(source: str | LoadedStore) -> list[Observation]:
    """Every done cell of one store (a path, or a store already loaded: `specbench report` passes its own, so a
    20,000-cell store is read once) that the model can read (others are skipped, silently: failed cells, cells
    without request rows). A path is read once per process while the file stays as it was (`_of_file`: the
    leave-one-store-out fits and `calibrate` read every store once per fold otherwise)."""
    if isinstance(source, LoadedStore):
        return _observed(source, str(source.path))
    try:
        st = os.stat(source)
    except OSError:
        return _observed(load_store(source, logs=False), str(source))  # load_store says what is wrong
    return list(_of_file(str(source), (st.st_mtime_ns, st.st_size), _wal_stamp(str(source))))


def _wal_stamp(path: str) -> tuple[int, int] | None:
    """The write-ahead log's time and size: a store a run is writing may change only there (SQLite WAL mode)."""
    try:
        st = os.stat(path + "-wal")
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


@functools.lru_cache(maxsize=64)
def _of_file(path: str, stamp: tuple[int, int], wal: tuple[int, int] | None) -> tuple[Observation, ...]:
    """One store file's observations, keyed by its and its write-ahead log's modification time and size: a store a
    run is still writing changes them, and is read again (the observations are frozen values)."""
    return tuple(_observed(load_store(path, logs=False), path))


def _observed(store: LoadedStore, path: str) -> list[Observation]:
    plan = plan_table(store)
    engine = store.engine or "unknown"
    version = store.engine_version or plan.engine_version or "unknown"
    gpu = plan.gpu or "unknown"
    measured: dict[str, tuple[CellRecord, tuple[float, float, float, float | None, float]]] = {}
    for cell in store.cells:
        if cell.status != "done":
            continue
        m = _measured(cell)
        if m is not None:
            measured[cell.cell_id] = (cell, m)
    ar = {c.baseline_key: m[4] for c, m in measured.values() if c.is_ar}
    adapter = adapter_for(engine, version)
    out: list[Observation] = []
    for cell, (step, ttft, e2e, acc, tok_s) in measured.values():
        srv = store.server(cell.server_id)
        settings = dict(srv.settings) if srv else dict(cell.server)
        argv = srv.command if srv else ()
        cap = (srv.plan or {}).get("max_running_requests") if srv else None
        try:
            shape = held(cell_shape(settings, cell.client, plan, cap if isinstance(cap, int) else None, argv,
                                    routing=routing(adapter, argv, settings)), srv.plan if srv else None,
                         request_length(cell.client))
        except (ValueError, UserError):
            continue
        base = ar.get(cell.baseline_key)
        sp = tok_s / base if (not cell.is_ar and base and base > 0 and math.isfinite(base)) else None
        key = class_key(engine, version, gpu, argv, plan.model_config or "")
        stand_in = _stand_in(adapter, shape, argv, settings) if not cell.is_ar else None
        out.append(Observation(str(path), cell.cell_id, cell.label, key, shape,
                               step, ttft, e2e, acc, tok_s, sp, stand_in))
    return out


def _stand_in(adapter: ServerAdapter | None, shape: CellShape, argv: tuple[str, ...],
              settings: dict[str, object]) -> str | None:
    """The engine's word on a stand-in's artifact in this cell (only a MoE target's routing is known to move)."""
    if adapter is None or shape.target.moe is None:
        return None
    return adapter.stand_in_measurement(argv, settings)


def stand_in_cells(store: LoadedStore) -> dict[str, str]:
    """cell_id -> what a stand-in's artifact measured in that cell (`Observation.stand_in`): the report's notes."""
    return {o.cell_id: o.stand_in for o in observations(store) if o.stand_in}


def fitted(obs: Iterable[Observation]) -> list[Observation]:
    """The observations a calibration is fitted on and judged by: every one but a stand-in's artifact."""
    return [o for o in obs if o.stand_in is None]


def all_observations(sources: Iterable[str | LoadedStore]) -> list[Observation]:
    res: list[Observation] = []
    for p in sources:
        res.extend(observations(p))
    return res
