"""Run a matrix: phases of server tuples; per tuple preflight, boot, all its cells, stop; resumable.

Per server tuple:
1. preflight through the planner (preflight.py): `launch`, `fixed` (auto_fix) or `skipped` with the reason;
2. boot, cells written ahead, identity checked around each cell, stop (tuple_run.py, lifecycle.py);
then the repeats on later boots (rounds.py): the waves of `repeat_across_boots` (each repeat on a fresh boot, the
servers interleaved) and the rounds of `repeats = {min, max}` (one more repeat for each cell whose decision is still
open, until decided or `max`). A cell's repeats are stored one by one (store_rows.py), so a resumed run goes on from
the last finished repeat. Afterwards each speculative cell gets its speedup over the autoregressive cell with the same
TP, concurrency, prompt/output tokens, rate and dataset.

How tuples are placed: one after another in this process (the default); packed onto the machine's GPUs, several
servers at once on disjoint GPUs, ports and logs, one worker process each (`--gpus`, packing.py); or as Ray
tasks on a Ray cluster (`--executor ray`, ray_exec.py). Phases are barriers in every mode, and every mode
writes the same rows into the same store (one writer: this process). A server a killed run left behind is
stopped by the next run (orphans.py).
"""

from __future__ import annotations

import signal
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import specbench
from specbench.engines.base import ServerAdapter
from specbench.errors import UserError
from specbench.load import speedup as speedups
from specbench.matrix import lifecycle, orphans
from specbench.matrix.adapters import adapter_for
from specbench.matrix.expansion import Cell, ServerTuple, expand
from specbench.matrix.preflight import preflight
from specbench.matrix.rounds import Repeats, planned_visit, question_key, question_rows
from specbench.matrix.schema import MatrixSpec
from specbench.matrix.store import Store, check_log_folder, damage_error, lock_store
from specbench.matrix.tuple_run import StoreWriteError, run_tuple
from specbench.matrix.visits import policy_of

__all__ = ["RunOptions", "RunReport", "default_store_path", "fill_speedups", "log_dir_for", "run_matrix"]

Work = list[tuple[ServerTuple, list[Cell]]]  # the tuples with cells to run, in matrix order, with those cells


@dataclass(frozen=True)
class RunOptions:
    store_path: Path
    retry_failed: bool = False
    progress: bool = True
    log_dir: Path | None = None
    gpus: tuple[str, ...] | None = None  # pack tuples onto these GPUs (None: one tuple at a time)
    executor: str = "local"  # local | ray
    ray_address: str | None = None
    order: tuple[str, ...] | None = None  # server ids to run first, in this order, within each phase (--order)
    new_matrix: bool = False  # run another matrix into a store holding one's results (--new-matrix)


@dataclass
class RunReport:
    store_path: Path
    ran: int = 0
    done: int = 0
    failed: int = 0
    partial: int = 0  # some requests failed beyond the client's max_failed_fraction (exit 1 like failed)
    skipped: int = 0
    kept: int = 0
    merged: int = 0  # repeat-until-decided repeats merged into done cells (rounds.py)
    interrupted: bool = False
    messages: list[str] = field(default_factory=list)
    rounds: list[Any] = field(default_factory=list)  # rounds.py RoundInfo, one per round run

    def count(self, kind: str, n: int = 1) -> None:
        """ran | done | failed | skipped (the tally sink of tuple_run.py)."""
        setattr(self, kind, getattr(self, kind) + n)

    def message(self, text: str) -> None:
        self.messages.append(text)


def default_store_path(matrix_path: str | Path) -> Path:
    return Path("runs") / (Path(matrix_path).stem + ".sqlite")


def log_dir_for(store_path: Path) -> Path:
    return store_path.parent / (store_path.stem + "-logs")


def run_matrix(spec: MatrixSpec, matrix_text: str, matrix_path: str, opts: RunOptions,
               console: Any = None) -> RunReport:
    """Run (or resume) every cell of the matrix into the store at `opts.store_path`."""
    from specbench.matrix.progress import Progress

    adapter = adapter_for(spec)
    tuples, cells = expand(spec)
    if opts.order:  # `run --order predicted`: the same tuples, most promising first within each phase
        rank = {sid: i for i, sid in enumerate(opts.order)}
        tuples = sorted(tuples, key=lambda st: (st.phase, rank.get(st.server_id, len(rank))))
    lock = lock_store(opts.store_path)
    store = Store(opts.store_path)
    log_dir = opts.log_dir or log_dir_for(opts.store_path)
    try:
        store.check_writable()
        store.claim(spec.name, matrix_text, str(matrix_path), spec.engine, replace=opts.new_matrix)
        check_log_folder(log_dir)
    except UserError:
        store.close()
        lock.close()
        raise
    report = RunReport(opts.store_path)
    store.set_meta({"matrix_path": str(matrix_path), "matrix_text": matrix_text, "engine": spec.engine,
                    "engine_version": spec.plan.engine_version or "", "host": spec.host, "name": spec.name,
                    "specbench_version": specbench.__version__})
    report.messages.extend(orphans.reap_orphans(store))
    gpu_baseline = lifecycle.gpu_memory_used_mib()  # before any server of this run; None without nvidia-smi
    work = _work(store, tuples, cells, opts.retry_failed)
    todo_total = sum(len(todo) for _, todo in work)
    report.kept = sum(1 for c in cells if not store.needs_run(c.cell_id, opts.retry_failed))

    lifecycle.Interrupted.by_sigterm = False
    # SIGTERM, and a closed terminal or dropped ssh (SIGHUP), stop the run as Ctrl-C does: the servers are stopped
    # and the records finished (SIGQUIT and SIGKILL end it at once; the watchdog stops the servers: watchdog.py)
    old_handlers = {sig: signal.signal(sig, lifecycle.Interrupted.handler) for sig in (signal.SIGTERM, signal.SIGHUP)}
    progress = Progress(enabled=opts.progress, console=console, total=todo_total)
    try:
        with progress:
            execute = _executor(opts)

            def run(w: Work) -> None:
                execute(spec, w, adapter, store, progress, report, log_dir, gpu_baseline, opts)

            run(work)
            Repeats(tuples, cells, store, run, report, progress, opts.retry_failed).run()
    except KeyboardInterrupt:
        report.interrupted = True
    except sqlite3.OperationalError as exc:  # any other write the store refused (disk full, read-only folder)
        damaged = damage_error(opts.store_path, exc)
        if damaged is not None:
            raise damaged from None
        raise StoreWriteError(f"the results store could not be written ({exc}): finished cells are kept, free space "
                              "(or make the folder writable) and run the matrix again to resume") from None
    finally:
        for sig, old in old_handlers.items():
            signal.signal(sig, old)
        try:
            fill_speedups(store)
        except sqlite3.OperationalError:  # a full disk: the run ends with the store's own one-line error
            pass
        store.close()
        lock.close()
    return report


Executor = Callable[[MatrixSpec, Work, ServerAdapter, Store, Any, RunReport, Path, "list[int] | None", RunOptions],
                    None]


def _executor(opts: RunOptions) -> Executor:
    if opts.executor == "ray":
        from specbench.matrix.ray_exec import run_ray

        return run_ray
    if opts.gpus is not None:
        from specbench.matrix.packing import run_packed

        return run_packed
    return run_serial


def _work(store: Store, tuples: list[ServerTuple], cells: list[Cell], retry_failed: bool) -> Work:
    """The planned pass: each tuple with its cells that need running, each with its visit (rounds.py
    planned_visit: from the start, or on from the repeats a stopped run stored). `repeat_across_boots` cells are left
    to the waves (rounds.py)."""
    by_server: dict[str, list[Cell]] = {}
    for c in cells:
        by_server.setdefault(c.server_id, []).append(c)
    for st in tuples:
        for c in by_server.get(st.server_id, []):
            store.ensure_cell(cell_id=c.cell_id, server_id=c.server_id, phase=c.phase, tp=c.tp,
                              algorithm=c.algorithm, label=c.label, server=c.server, client=c.client)
    work = [(st, [replace(c, visit=planned_visit(store, c)) for c in by_server.get(st.server_id, [])
                  if not policy_of(c.client).across_boots and store.needs_run(c.cell_id, retry_failed)])
            for st in tuples]
    return [(st, todo) for st, todo in work if todo]


def run_serial(spec: MatrixSpec, work: Work, adapter: ServerAdapter, store: Store, progress: Any, report: RunReport,
               log_dir: Path, baseline: list[int] | None, opts: RunOptions) -> None:
    """One tuple after another in this process."""
    for st, todo in work:
        run_tuple(spec, preflight(spec, st, adapter), todo, adapter, log_dir, store, progress, report, baseline)


def fill_speedups(store: Store) -> None:
    """Every done cell's derived keys (load/speedup.py::fill: pooled-throughput and latency speedups over the AR
    cell of the same baseline key with their log-ratio intervals and decisions, the cell's own intervals), written
    where they changed."""
    # each cell with the model its server was launched with: a speculative cell of one model is never compared with
    # the AR cell of another (a matrix whose specs launch different models)
    rows = question_rows(store)
    key = question_key

    # the AR cell's running cap beside each speculative cell's: a c above either cap compares other widths
    ar_caps = {key(r): r["metrics"].get("running_cap") for r in rows if speedups.is_ar(r.get("algorithm"))}
    for old, new in zip(rows, speedups.fill(rows)):
        m = dict(new["metrics"])
        base_cap = None if speedups.is_ar(old.get("algorithm")) else ar_caps.get(key(old))
        m["baseline_running_cap"] = base_cap
        m["cap_differs_from_baseline"] = (base_cap is not None and m.get("running_cap") is not None
                                          and base_cap != m.get("running_cap"))
        if m != old["metrics"]:
            store.set_metrics(old["cell_id"], m)
