"""`specbench run --executor ray [--address ADDR]`: server tuples as Ray tasks on an existing Ray cluster.

Ray is an optional extra (`pip install 'specbench-llm[ray]'`), imported only here. Per phase (a barrier, as
everywhere), every launched tuple is one streaming-generator task with `num_gpus = tp`: Ray picks the node and the
GPUs and sets `CUDA_VISIBLE_DEVICES` for it; the task runs the tuple (tuple_run.py) and yields each store,
progress and tally call as it happens, the driver applies them to its store in order (relay.py: the same rows as
a local run, resumable by the same rules), and the whole server log comes back with the server's last record and
is written under the driver's log folder. A lost node or a dead worker ends the task's stream with a Ray error:
the tuple's unfinished cells are `failed` with it as the reason, and `--retry-failed` re-runs them. Tuples of
one phase on one node get different ports (the matrix's port + their position in the phase).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from specbench.engines.base import ServerAdapter
from specbench.errors import UserError
from specbench.matrix import orphans
from specbench.matrix.expansion import Cell, ServerTuple
from specbench.matrix.packing import by_phase
from specbench.matrix.preflight import Preflight, preflight
from specbench.matrix.relay import INTERRUPTED, Job, Writer, relays
from specbench.matrix.schema import MatrixSpec
from specbench.matrix.tuple_run import Placement, record_server, run_tuple


def tuple_task(spec: MatrixSpec, pf: Preflight, todo: list[Cell], slot: int, port: int) -> Iterator[tuple[Any, ...]]:
    """The Ray task: one tuple on the GPUs Ray gave it; yields the relayed calls, its end message last."""
    import tempfile

    import ray

    from specbench.matrix import lifecycle
    from specbench.matrix.adapters import adapter_for

    gpus = tuple(str(g) for g in ray.get_gpu_ids())
    indices = tuple(int(g) for g in gpus) if gpus and all(g.isdigit() for g in gpus) else None
    place = Placement(slot=slot, port=port, gpus=gpus or None, gpu_indices=indices)
    log_dir = Path(tempfile.mkdtemp(prefix="specbench-ray-logs-"))
    q: queue.Queue[tuple[Any, ...]] = queue.Queue()
    store, progress, tally = relays(q.put, slot)

    def work() -> None:
        error = None
        try:
            run_tuple(spec, pf, todo, adapter_for(spec), log_dir, store, progress, tally,
                      lifecycle.gpu_memory_used_mib(), place)
        except KeyboardInterrupt:
            error = INTERRUPTED
        except BaseException as exc:
            error = f"specbench error in the Ray task running this tuple: {exc!r}"
        q.put(("end", slot, error))

    threading.Thread(target=work, name=f"specbench-tuple-{slot}", daemon=True).start()
    active = ""
    try:
        while True:
            msg = q.get()
            if msg[0] == "call" and msg[3] == "set_meta":
                active = next(iter(msg[4][0].values()), "")
            yield msg
            if msg[0] == "end":
                return
    except BaseException:  # cancelled or the driver went away: the server must not outlive the task
        orphans.reap_one(active, spec.timeouts.stop_s)
        raise


def _reason(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [""])[0][:300]
    return f"ray: {type(exc).__name__} (the node or worker running this tuple was lost): {first}"


def _follow(gen: Any, slot: int, q: queue.Queue[tuple[Any, ...]]) -> None:
    """Driver side of one task: its messages into `q`; a Ray error as the tuple's end."""
    import ray

    ended = False
    try:
        for ref in gen:
            msg = ray.get(ref)
            ended = ended or msg[0] == "end"
            q.put(msg)
    except Exception as exc:
        if not ended:
            q.put(("end", slot, _reason(exc)))
            ended = True
    if not ended:
        q.put(("end", slot, "ray: the task ended without its last record"))


def run_ray(spec: MatrixSpec, work: list[tuple[ServerTuple, list[Cell]]], adapter: ServerAdapter, store: Any,
            progress: Any, report: Any, log_dir: Path, baseline: list[int] | None, opts: Any) -> None:
    try:
        import ray
    except ImportError:
        raise UserError("--executor ray needs Ray: pip install 'specbench-llm[ray]'") from None
    started = not ray.is_initialized()
    if started:
        try:
            ray.init(address=opts.ray_address, include_dashboard=False, log_to_driver=False)
        except (ConnectionError, ValueError, RuntimeError) as exc:
            raise UserError(f"--executor ray: cannot reach a Ray cluster at {opts.ray_address or 'auto'}: "
                            f"{str(exc).strip().splitlines()[0] if str(exc).strip() else exc!r}") from None
    task = ray.remote(tuple_task)
    writer = Writer(spec, store, progress, report, local_log_dir=log_dir)
    try:
        for phase in by_phase(work):
            _run_phase(spec, phase, adapter, store, progress, report, log_dir, baseline, task, writer)
    finally:
        if started:
            ray.shutdown()


def _run_phase(spec: MatrixSpec, phase: list[tuple[ServerTuple, list[Cell]]], adapter: ServerAdapter, store: Any,
               progress: Any, report: Any, log_dir: Path, baseline: list[int] | None, task: Any,
               writer: Writer) -> None:
    import ray

    q: queue.Queue[tuple[Any, ...]] = queue.Queue()
    jobs: dict[int, Job] = {}
    for slot, (st, todo) in enumerate(phase):
        pf = preflight(spec, st, adapter)
        if pf.verdict == "skipped":
            run_tuple(spec, pf, todo, adapter, log_dir, store, progress, report, baseline)
            continue
        record_server(spec, pf, store)
        job = jobs[slot] = Job(pf, todo, slot=slot)
        job.handle = task.options(num_gpus=st.tp, num_returns="streaming", max_retries=0,
                                  name=f"specbench {st.server_id}").remote(spec, pf, todo, slot, spec.port + slot)
        threading.Thread(target=_follow, args=(job.handle, slot, q), daemon=True).start()
    left = set(jobs)
    try:
        while left:
            try:
                msg = q.get(timeout=0.5)
            except queue.Empty:
                continue
            ended = writer.handle(msg, jobs)
            if ended is not None:
                left.discard(ended.slot)
    except KeyboardInterrupt:
        for slot in left:  # the tasks stop their servers; unfinished cells stay running: re-run next time
            ray.cancel(jobs[slot].handle)
        raise
