"""Tuples that run elsewhere (a worker process of a packed run, a Ray task) send their store, progress and tally
calls here, where one writer applies them in order: the store has one writer whatever the executor.

A message is `("call", slot, target, name, args, kwargs)` (target: store | progress | tally) or
`("end", slot, error)`: error None when the tuple finished, "interrupted" after a Ctrl-C (its unfinished cells
stay `running`/`pending`, re-run next time), else why its worker died: then every cell of the tuple that did not
finish is recorded `failed` with that reason (`--retry-failed` re-runs them) and a server the worker left is
stopped (orphans.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specbench.matrix import orphans
from specbench.matrix.expansion import Cell
from specbench.matrix.preflight import Preflight
from specbench.matrix.schema import MatrixSpec
from specbench.matrix.tuple_run import cell_server_json, record_server, visit_of

INTERRUPTED = "interrupted"


class Relay:
    """Stands in for the store, progress or tally of tuple_run.py: every method call becomes a message."""

    def __init__(self, send: Callable[[tuple[Any, ...]], None], slot: int, target: str):
        self._send, self._slot, self._target = send, slot, target

    def __getattr__(self, name: str) -> Callable[..., None]:
        if name.startswith("_"):
            raise AttributeError(name)

        def call(*args: Any, **kwargs: Any) -> None:
            self._send(("call", self._slot, self._target, name, args, kwargs))

        return call


def relays(send: Callable[[tuple[Any, ...]], None], slot: int) -> tuple[Relay, Relay, Relay]:
    return Relay(send, slot, "store"), Relay(send, slot, "progress"), Relay(send, slot, "tally")


@dataclass
class Job:
    pf: Preflight
    todo: list[Cell]
    slot: int = -1
    gpus: tuple[str, ...] = ()
    handle: Any = None  # the worker process or Ray generator
    finished: set[str] = field(default_factory=set)
    started: set[str] = field(default_factory=set)
    log_name: str | None = None  # a remote worker's log file name

    @property
    def tp(self) -> int:
        return self.pf.server.tp


def _visit_ends(job: Job, cell_id: str, repeat: Any) -> bool:
    """Is this stored repeat the last of its cell's visit (one that leaves the cell unfinished)?"""
    for c in job.todo:
        if c.cell_id == cell_id:
            v = visit_of(c)
            return not v.finish and getattr(getattr(repeat, "record", None), "repeat", None) == v.stop - 1
    return False


class Writer:
    """Applies relayed calls to the real store, progress and tally (the runner's own process)."""

    def __init__(self, spec: MatrixSpec, store: Any, progress: Any, tally: Any, local_log_dir: Path | None = None):
        self.spec, self.store = spec, store
        self.targets = {"store": store, "progress": progress, "tally": tally}
        self.local_log_dir = local_log_dir  # set for remote workers: their logs are written here

    def apply(self, job: Job, target: str, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if target == "store":
            if name in ("finish_cell", "skip_cell") and args:
                job.finished.add(args[0])
            if name == "put_repeat" and args and _visit_ends(job, args[0], args[1]):
                job.finished.add(args[0])  # a visit that leaves its cell running ended with this repeat
            if name == "start_cell" and args:
                job.started.add(args[0])
            if name == "update_server" and self.local_log_dir is not None:
                kwargs = self._local_log(job, kwargs)
        getattr(self.targets[target], name)(*args, **kwargs)

    def _local_log(self, job: Job, kwargs: dict[str, Any]) -> dict[str, Any]:
        """A remote worker's log path -> the same file name under the driver's log folder, its text written there."""
        assert self.local_log_dir is not None
        kwargs = dict(kwargs)
        if kwargs.get("log_path"):
            job.log_name = Path(kwargs["log_path"]).name
            kwargs["log_path"] = str(self.local_log_dir / job.log_name)
        if kwargs.get("log_text") is not None and job.log_name:
            self.local_log_dir.mkdir(parents=True, exist_ok=True)
            (self.local_log_dir / job.log_name).write_text(kwargs["log_text"], encoding="utf-8")
        return kwargs

    def end(self, job: Job, error: str | None) -> None:
        """The tuple's worker ended; a dead worker's unfinished cells become `failed` with the reason."""
        if error is None or error == INTERRUPTED:
            return
        if self.store.server(job.pf.server.server_id) is None:
            record_server(self.spec, job.pf, self.store)
        raw = self.store.meta().get(orphans.active_key(job.slot), "")
        msg = orphans.reap_one(raw)
        if raw:
            orphans.clear_active(self.store, job.slot)
        self.store.update_server(job.pf.server.server_id, status="failed", diagnosis_json={
            "status": "unknown", "failure": {"kind": "worker_lost", "message": error}})
        for c in job.todo:
            if c.cell_id in job.finished:
                continue
            visit = visit_of(c)
            if visit.merge:  # a done cell that was to get a round's repeat keeps what it has (matrix/rounds.py)
                continue
            if visit.fresh and c.cell_id not in job.started:  # one attempt per cell: the running one counts once
                self.store.start_cell(c.cell_id, server_json=cell_server_json(job.pf))
            self.store.finish_cell(c.cell_id, "failed", reason=f"{error}; --retry-failed re-runs it")
            self.targets["tally"].count("failed")
            self.targets["progress"].cell_finished("failed", f"slot {job.slot}")
        self.targets["tally"].message(f"{job.pf.server.label} tp={job.tp}: {error}" + (f" ({msg})" if msg else ""))

    def handle(self, msg: tuple[Any, ...], jobs: dict[int, Job]) -> Job | None:
        """Apply one message; the job when it was its end."""
        kind, slot = msg[0], msg[1]
        job = jobs[slot]
        if kind == "call":
            self.apply(job, *msg[2:])
            return None
        self.end(job, msg[2])
        return job
