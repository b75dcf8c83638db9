"""A packed run: several servers at once on disjoint GPUs of this machine (`specbench run --gpus 0-7`).

Per phase (phases stay barriers): every tuple's preflight here; each launched tuple waits for `tp` free GPUs,
adjacent ones where the topology says so (gpus.py), and a free slot: slot N has port = the matrix's port + N
(checked free when the run starts; a busy one is skipped) and the `active_server.N` orphan record. It then runs in
its own worker process (spawned: a fresh interpreter, one event loop and one GIL per active server, so the load
generators of concurrent cells do not starve each other; pinned to its own cores where there are enough) with
`CUDA_VISIBLE_DEVICES` set for its server. Workers relay their store calls to this process, the one writer
(relay.py). A worker dies with the runner (PR_SET_PDEATHSIG), its server outlives both and is stopped by the next
run (its slot's orphan record); a worker that dies alone has its unfinished cells `failed` with the reason.
"""

from __future__ import annotations

import ctypes
import itertools
import multiprocessing
import os
import queue
import signal
import sys
import time
from pathlib import Path
from typing import Any

from specbench.engines.base import ServerAdapter
from specbench.matrix import gpus as gpu_mod
from specbench.matrix import lifecycle, orphans
from specbench.matrix.adapters import adapter_for
from specbench.matrix.expansion import Cell, ServerTuple
from specbench.matrix.placement import Placement
from specbench.matrix.preflight import Preflight, preflight
from specbench.matrix.relay import INTERRUPTED, Job, Writer, relays
from specbench.matrix.schema import MatrixSpec
from specbench.matrix.tuple_run import cell_server_json, fail_cells, record_server, run_tuple

_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def by_phase(work: list[tuple[ServerTuple, list[Cell]]]) -> list[list[tuple[ServerTuple, list[Cell]]]]:
    return [list(g) for _, g in itertools.groupby(work, key=lambda w: w[0].phase)]


def slot_ports(host: str, base: int, n: int) -> list[int]:
    """n ports from `base` up that nothing listens on now (the matrix's port first)."""
    out: list[int] = []
    p = base
    while len(out) < n and p <= 65535:
        if lifecycle.port_free(host, p):
            out.append(p)
        p += 1
    while len(out) < n:  # nothing free left above: each tuple's own port-free wait reports it
        out.append(base + len(out))
    return out


def core_slices(n: int) -> list[tuple[int, ...] | None]:
    """The cores each slot's load generator is pinned to: disjoint slices when there is at least one core per
    slot, else none (unpinned)."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < n:
        return [None] * n
    per = len(cores) // n
    return [tuple(cores[i * per:(i + 1) * per]) for i in range(n)]


def run_packed(spec: MatrixSpec, work: list[tuple[ServerTuple, list[Cell]]], adapter: ServerAdapter, store: Any,
               progress: Any, report: Any, log_dir: Path, baseline: list[int] | None, opts: Any) -> None:
    gpus, skipped = usable_gpus(tuple(opts.gpus))
    packer = Packer(spec, store, progress, report, log_dir, baseline, gpus, skipped)
    try:
        for phase in by_phase(work):
            jobs = []
            for st, todo in phase:
                pf = preflight(spec, st, adapter)
                if pf.verdict == "skipped":
                    run_tuple(spec, pf, todo, adapter, log_dir, store, progress, report, baseline)
                elif st.tp > len(gpus):
                    packer.too_big(pf, todo)
                else:
                    record_server(spec, pf, store)  # in matrix order, as a serial run writes them
                    jobs.append(Job(pf, todo))
            packer.run_phase(jobs)
    finally:
        report.messages.extend(orphans.reap_orphans(store))  # a worker that died with its server up


def usable_gpus(gpus: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The `--gpus` this run may use now (after the orphans of earlier runs were stopped): without those whose
    memory another process holds, each said on stderr; a one-line error when none is left."""
    from specbench.errors import UserError

    if not gpus:
        raise UserError("--gpus: no GPU to run on")
    free = gpu_mod.usable(gpus, gpu_mod.list_gpus())
    if not free.ids:
        raise UserError(f"--gpus: every GPU it names is in use by another process ({'; '.join(free.skipped)}): "
                        "free them, or name others")
    for line in free.skipped:
        sys.stderr.write(f"specbench: warning: {line}: skipped\n")
    sys.stderr.write(f"specbench: --gpus: using GPU {', '.join(free.ids)}\n")
    return free.ids, free.skipped


class Packer:
    def __init__(self, spec: MatrixSpec, store: Any, progress: Any, report: Any, log_dir: Path,
                 baseline: list[int] | None, gpus: tuple[str, ...], skipped: tuple[str, ...] = ()):
        self.spec, self.store, self.progress, self.report = spec, store, progress, report
        self.log_dir, self.baseline, self.gpus, self.skipped = log_dir, baseline, gpus, skipped
        self.pool = gpu_mod.GpuPool(gpus, gpu_mod.topology())
        self.ports = slot_ports(spec.host, spec.port, len(gpus))
        self.cores = core_slices(len(gpus))
        self.ctx = multiprocessing.get_context("spawn")
        self.q: Any = self.ctx.Queue()
        self.writer = Writer(spec, store, progress, report)
        self.free_slots = list(range(len(gpus)))
        self.running: dict[int, Job] = {}

    def too_big(self, pf: Preflight, todo: list[Cell]) -> None:
        record_server(self.spec, pf, self.store)
        busy = f" ({len(self.skipped)} more in use by another process)" if self.skipped else ""
        reason = f"tp={pf.server.tp} needs {pf.server.tp} GPUs; --gpus gives {len(self.gpus)}{busy}"
        self.store.update_server(pf.server.server_id, status="failed")
        fail_cells(self.store, self.report, self.progress, todo, reason, cell_server_json(pf))

    def run_phase(self, jobs: list[Job]) -> None:
        pending = list(jobs)
        try:
            while pending or self.running:
                pending = [j for j in pending if not self._launch(j)]
                self._pump(0.2)
        except KeyboardInterrupt:
            self._wind_down()
            raise

    def _launch(self, job: Job) -> bool:
        if not self.free_slots:
            return False
        got = self.pool.take(job.tp)
        if got is None:
            return False
        slot = self.free_slots.pop(0)
        job.slot, job.gpus = slot, got
        indices = tuple(int(g) for g in got) if all(g.isdigit() for g in got) else None
        place = Placement(slot=slot, port=self.ports[slot], gpus=got, gpu_indices=indices, cores=self.cores[slot])
        job.handle = self.ctx.Process(
            target=worker_main, name=f"specbench-slot{slot}", daemon=False,
            args=(self.spec, job.pf, job.todo, self.log_dir, self.baseline, place, self.q, os.getpid()))
        self.running[slot] = job
        job.handle.start()
        return True

    def _release(self, job: Job) -> None:
        self.running.pop(job.slot, None)
        self.pool.give(job.gpus)
        self.free_slots.append(job.slot)
        self.free_slots.sort()
        if job.handle is not None:
            job.handle.join(timeout=10)

    def _pump(self, timeout: float) -> None:
        """Apply messages for up to `timeout` s; notice workers that died without their end message."""
        try:
            msg = self.q.get(timeout=timeout)
        except queue.Empty:
            msg = None
        if msg is not None:
            ended = self.writer.handle(msg, self.running)
            if ended is not None:
                self._release(ended)
            return
        for job in list(self.running.values()):
            if job.handle.exitcode is not None:
                self._drain_dead(job)

    def _drain_dead(self, job: Job) -> None:
        while True:  # what it sent before dying is still in the pipe
            try:
                msg = self.q.get(timeout=0.5)
            except queue.Empty:
                break
            ended = self.writer.handle(msg, self.running)
            if ended is not None:
                self._release(ended)
                if ended is job:
                    return
        if job.slot in self.running:
            self.writer.end(job, f"the worker running this tuple died (exit status {job.handle.exitcode})")
            self._release(job)

    def _wind_down(self) -> None:
        """After Ctrl-C / SIGTERM: the workers stop their servers (they got the signal too, or get SIGTERM now);
        keep applying what they send until they are gone, further interrupts included."""
        if lifecycle.Interrupted.by_sigterm:
            for job in self.running.values():
                _signal(job.handle.pid, signal.SIGTERM)
        deadline = time.monotonic() + self.spec.timeouts.stop_s + 30
        while self.running and time.monotonic() < deadline:
            try:
                self._pump(0.2)
            except KeyboardInterrupt:  # a second Ctrl-C reached the workers too: they kill their servers now
                continue
        for job in list(self.running.values()):
            job.handle.kill()
            self._release(job)


def _signal(pid: int | None, sig: int) -> None:
    if pid is None:
        return
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _die_with_parent(parent: int) -> None:
    """SIGKILL this worker when the runner dies (Linux prctl); its server is recorded and outlives it."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the runner died before the prctl took effect
        os._exit(1)


def _term(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt


def worker_main(spec: MatrixSpec, pf: Preflight, todo: list[Cell], log_dir: Path, baseline: list[int] | None,
                place: Placement, q: Any, parent: int) -> None:
    """One tuple in a worker process; every record goes to the runner through `q`."""
    _die_with_parent(parent)
    signal.signal(signal.SIGTERM, _term)
    store, progress, tally = relays(q.put, place.slot)
    error: str | None = None
    try:
        run_tuple(spec, pf, todo, adapter_for(spec), log_dir, store, progress, tally, baseline, place)
    except KeyboardInterrupt:
        error = INTERRUPTED
    except BaseException as exc:  # the runner records the tuple's unfinished cells as failed with this
        error = f"specbench error in the worker running this tuple: {exc!r}"
    q.put(("end", place.slot, error))
    q.close()
    q.join_thread()
