"""One server tuple after its preflight: record it, boot it, run its cells written ahead, stop it.

Boot (lifecycle.py): GPU memory of its GPUs at baseline, port free, own process group, ready = health + one
generation from a process of that group (identity.py), effective server args read back. Every cell that needs
running is `running` before and `done` / `failed` after; the server's identity (the process listening on the
port belongs to the group started) is checked before and after every cell, so a foreign server is never
measured, nor a server of another model (served_model.py). A failure keeps the whole server log and a doctor diagnosis. Stop: SIGTERM, then SIGKILL.

Everything goes to three sinks, so the same code runs in the runner itself (the Store, the Progress, the
RunReport), in a worker process of a packed run and in a Ray task (proxies that ship each call to the writer):
`store` (put_server, update_server, start_cell, continue_cell, put_boot, put_repeat, finish_cell, skip_cell,
mark_interrupted, set_meta), `progress`
(phase, cell_started, request_done, cell_finished, each with the slot's name) and `tally` (count, message).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from specbench.contracts import plan_json
from specbench.engines import server_auth
from specbench.engines.base import Launch, ServerAdapter
from specbench.engines.openai.server import served_models_now
from specbench.errors import UserError
from specbench.matrix import identity, lifecycle, orphans, telemetry
from specbench.matrix.cellload import CellContext
from specbench.matrix.cellrun import CellOutcome, run_cell
from specbench.matrix.diagnosis import diagnose, failure_suffix
from specbench.matrix.expansion import Cell
from specbench.matrix.placement import Placement
from specbench.matrix.preflight import Preflight
from specbench.matrix.schema import MatrixSpec
from specbench.matrix.served_model import model_changed, model_mismatch
from specbench.matrix.visits import Visit, first_visit


def cell_server_json(pf: Preflight) -> dict[str, Any]:
    out = {k: v for k, v in pf.settings.items() if k != "notes"}
    if pf.fix:
        out["fix"] = pf.fix
    return out


class StoreWriteError(UserError):
    """The results store stopped taking writes mid-run (disk full, read-only): a user-level condition, one line."""


def record_server(spec: MatrixSpec, pf: Preflight, store: Any) -> None:
    st = pf.server
    store.put_server(server_id=st.server_id, phase=st.phase, tp=st.tp, engine=spec.engine,
                     settings={**pf.settings, "requested": {k: v for k, v in st.settings.items() if k != "notes"},
                               "fix": pf.fix, "notes": list(pf.notes)},
                     command=pf.launch.argv, env=pf.launch.env, verdict=pf.verdict, plan=plan_json(pf.plan),
                     status="skipped" if pf.verdict == "skipped" else "pending")


def run_tuple(spec: MatrixSpec, pf: Preflight, todo: list[Cell], adapter: ServerAdapter, log_dir: Path,
              store: Any, progress: Any, tally: Any, baseline: list[int] | None = None,
              place: Placement = Placement()) -> None:
    """Record the tuple and run its cells (or skip them with the planner's reason)."""
    record_server(spec, pf, store)
    progress.phase(pf.server.phase, pf.server.tp, pf.settings["label"], pf.verdict, place.name)
    if pf.verdict == "skipped":
        for c in todo:
            if visit_of(c).merge:  # a done cell that was to get a round's repeat keeps what it has
                tally.message(f"{c.label} c={c.client.get('concurrency')}: no more repeat (planner: {pf.reason})")
                continue
            store.skip_cell(c.cell_id, f"planner: {pf.reason}")
            tally.count("skipped")
            progress.cell_finished("skipped", place.name)
        return
    TupleRun(spec, pf, todo, adapter, log_dir, store, progress, tally, baseline, place).run()


class TupleRun:
    def __init__(self, spec: MatrixSpec, pf: Preflight, todo: list[Cell], adapter: ServerAdapter, log_dir: Path,
                 store: Any, progress: Any, tally: Any, baseline: list[int] | None, place: Placement):
        self.spec, self.pf, self.todo, self.adapter = spec, pf, todo, adapter
        self.store, self.progress, self.tally, self.baseline, self.place = store, progress, tally, baseline, place
        self.sid = pf.server.server_id
        self.port = place.port if place.port is not None else spec.port
        # the launch on this slot's port (the store keeps the preflight's command: the same as a serial run's)
        self.launch: Launch = pf.launch if self.port == spec.port else adapter.launch(
            spec.target(self.port), pf.settings)
        self.base_url = f"http://{url_host(spec.host)}:{self.port}"
        self.cell_server = cell_server_json(pf)
        self.log_path = next_log_path(log_dir, self.sid)
        env = lifecycle.clean_env(dict(os.environ), self.launch.env, self.launch.drop_env)
        if place.gpus is not None:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(place.gpus)
        # the API key moves out of argv (`ps`) where the server kind can read it elsewhere (server_base.py); a key
        # file lives in a private temporary folder, removed when the server stops
        self.key_dir = Path(tempfile.mkdtemp(prefix="specbench-keys-"))
        private = getattr(adapter, "private_launch", None)  # a test double may not have it
        argv, env = private(list(self.launch.argv), env, self.key_dir) if private else (list(self.launch.argv), env)
        self.proc = lifecycle.ServerProcess(argv=argv, env=env, log_path=self.log_path, cwd=self.launch.cwd)
        self.server_failed = False
        self.dead_reason: str | None = None
        self.boot_started_at: float | None = None  # this boot's key in the store's `boots` table

    # -- the whole tuple
    def run(self) -> None:
        t = self.spec.timeouts
        if not lifecycle.wait_gpu_baseline(self.baseline, t.gpu_free_s, gpus=self.place.gpu_indices):
            self.tally.message(f"GPU memory still above the baseline {self.baseline} MiB before {self.sid}")
        if not lifecycle.wait_port_free(self.spec.host, self.port, t.port_free_s):
            msg = f"port {self.spec.host}:{self.port} still in use after {t.port_free_s:.0f} s; not launched"
            self.store.update_server(self.sid, status="failed", ended_at=time.time(), diagnosis_json={
                "status": "unknown", "failure": {"kind": "port_in_use", "message": msg}})
            self.fail_all(self.todo, msg)
            shutil.rmtree(self.key_dir, ignore_errors=True)
            return
        self.store.update_server(self.sid, status="running", log_path=str(self.log_path), started_at=time.time())
        key = getattr(self.spec, "api_key", None) or server_auth.launch_key(self.launch.argv)
        try:
            with server_auth.using(key):  # a server enforcing --api-key: every request carries it (server_auth.py)
                if self.boot():
                    self.run_cells()
        finally:
            self.stop()

    def fail_all(self, cells: list[Cell], reason: str, log: str | None = None,
                 diag: dict[str, Any] | None = None) -> None:
        fail_cells(self.store, self.tally, self.progress, cells, reason, self.cell_server, self.place.name, log, diag)

    def owned(self) -> bool | None:
        return identity.served_by_group(self.port, self.proc.pid)

    def boot(self) -> bool:
        t = self.spec.timeouts
        try:
            self.boot_started_at = time.time()
            self.proc.start()
            orphans.record_active(self.store, self.proc.pid, self.launch.argv, self.sid, self.place.slot)
            ready_s = lifecycle.wait_ready(self.proc, self.base_url, self.adapter.health_paths,
                                           lambda url, to: self.adapter.probe(url, to, self.launch.argv), t.ready_s,
                                           owned=self.owned)
        except lifecycle.ServerFailed as exc:
            self.proc.stop(t.stop_s)
            log = self.proc.log_text()
            diag = diagnose(log)
            reason = f"server {exc.kind}: {exc.message}" + failure_suffix(diag)
            self.server_failed = True
            self.store.update_server(self.sid, status="failed", log_text=log, diagnosis_json=diag,
                                     ended_at=time.time())
            self.fail_all(self.todo, reason, log, diag)
            self.tally.message(f"{self.pf.server.label} tp={self.pf.server.tp}: {reason}")
            return False
        info = safe_read_back(self.adapter, self.base_url, self.proc.log_text())
        info["ready_s"] = round(ready_s, 3)
        info["running_cap"], info["running_cap_source"] = safe_cap(self.adapter, info, self.proc.log_text(),
                                                                   plan_json(self.pf.plan))
        wrong = model_mismatch(self.spec, self.launch.argv, self.adapter.served_models(info))
        if wrong is not None:  # before the first cell: a server of another model is never measured
            self.server_failed = True
            log = self.proc.log_text()
            self.store.update_server(self.sid, status="failed", server_info_json=info, log_text=log,
                                     diagnosis_json={"status": "started", "failure": {"kind": "wrong_model",
                                                                                     "message": wrong}},
                                     ended_at=time.time())
            self.fail_all(self.todo, f"server {wrong}", log)
            self.tally.message(f"{self.pf.server.label} tp={self.pf.server.tp}: {wrong}")
            return False
        self.store.update_server(self.sid, status="ready", server_info_json={**info,
                                                                             "placement": self.place.record()})
        self.store.put_boot(self.sid, started_at=self.boot_started_at, log_path=str(self.log_path), pid=self.proc.pid)
        self.cell_server = {**self.cell_server, "effective": info}  # what the engine reports, stored with each cell
        if self.place.cores:
            os.sched_setaffinity(0, self.place.cores)  # the load generator only: the server started unpinned
        return True

    def run_cells(self) -> None:
        ctx = CellContext(spec=self.spec, adapter=self.adapter, base_url=self.base_url, argv=self.launch.argv,
                          server_info=self.cell_server["effective"], settings=self.pf.settings, proc=self.proc,
                          plan=self.pf.plan, boot_started_at=self.boot_started_at)
        served = self.adapter.served_models(self.cell_server["effective"])
        ctx.cache["served"] = tuple(served or ())  # every name an honest answer may carry (load/honesty.py)
        if served and not self.spec.served_model_name and self.adapter.client_mode(self.launch.argv) == "openai":
            ctx.cache["model"] = served[0]  # read back at boot: no cell asks /v1/models again
        for i, c in enumerate(self.todo):
            if self.dead_reason is not None:  # the server died during an earlier cell
                log = self.proc.log_text()
                self.fail_all(self.todo[i:], self.dead_reason, log, diagnose(log))
                return
            visit = visit_of(c)
            if visit.fresh:
                self.store.start_cell(c.cell_id, server_json=self.cell_server)
            else:  # its stored repeats are kept: this boot adds to them
                self.store.continue_cell(c.cell_id, server_json=self.cell_server)
            if visit.first_in_run and not visit.merge:
                self.tally.count("ran")
            info = self.cell_server["effective"]
            self.progress.cell_started(c, self.place.name, cap=info.get("running_cap"),
                                       cap_source=info.get("running_cap_source"))
            try:
                outcome = self.measure(c, ctx)
            except KeyboardInterrupt:  # stays `running`: the next run goes on from its last stored repeat
                self.store.mark_interrupted(c.cell_id, "interrupted (Ctrl-C); re-run next time" if visit.slots == 1
                                            else "interrupted (Ctrl-C); its finished repeats are kept, the rest run "
                                                 "next time")
                raise
            except Exception as exc:  # a cell must end in the store whatever went wrong
                outcome = CellOutcome("failed", reason=f"specbench error while running the cell: {exc!r}")
            try:
                self.record(c, outcome)
            except sqlite3.OperationalError as exc:  # disk full, folder made read-only: the store cannot take it
                self._store_failed(c, exc)

    def measure(self, c: Cell, ctx: CellContext) -> CellOutcome:
        """The cell's load between two identity checks: a foreign server on the port is never measured."""
        wrong = self.not_ours()
        if wrong is not None:
            return CellOutcome("failed", reason=f"{wrong} before the cell; nothing measured")
        with telemetry.sampling(self.place.gpu_indices) as gpu:  # GPU memory/util/power while the load runs
            outcome = run_cell(c, ctx, lambda r: self.progress.request_done(None, self.place.name),
                               lambda rep: self.store.put_repeat(c.cell_id, rep))
        outcome = telemetry.attach(outcome, gpu, self.store, c.cell_id, append=not visit_of(c).fresh)
        wrong = self.not_ours() if self.proc.alive() else None  # a server that exited: its cell says so (cellrun)
        if wrong is None and self.proc.alive():
            wrong = model_changed(ctx.cache.get("served"), served_models_now(self.base_url))
        if wrong is not None:
            return CellOutcome("failed", reason=f"{wrong} after the cell; its measurement is discarded")
        return outcome

    def not_ours(self) -> str | None:
        """Why the port is not the server this runner started (identity.port_holder), or None when it is (or /proc
        cannot tell): another process listens there, or nothing does any more."""
        who = identity.port_holder(self.port, self.proc.pid)
        if who == "other":
            return (f"port {self.port} is not served by the server specbench started (pgid {self.proc.pid}); "
                    "another server holds it")
        if who == "nobody":
            return (f"nothing listens on port {self.port} although the server specbench started (pgid "
                    f"{self.proc.pid}) is still running")
        return None

    def _store_failed(self, c: Cell, exc: sqlite3.OperationalError) -> None:
        """The cell's result could not be written: give the cell its reason if the store takes that much (it stays
        `running`, so the next run re-runs it) and end the run in one line."""
        why = (f"the results store could not be written ({exc}), so cell {c.cell_id} ({c.label} "
               f"c={c.client.get('concurrency')}) stays unfinished and is re-run next time")
        try:
            self.store.mark_interrupted(c.cell_id, why)
        except sqlite3.OperationalError:
            pass
        raise StoreWriteError(f"{why}; finished cells are kept: free space (or make the folder writable) and run "
                              "the matrix again to resume") from None

    def record(self, c: Cell, outcome: CellOutcome) -> None:
        visit = visit_of(c)
        if outcome.status == "continue":  # its repeats are stored; the next on a later boot
            self.progress.cell_finished("repeat", self.place.name,
                                        note=f"repeat {visit.stop} of {c.client.get('repeats')} stored")
            return
        if visit.merge and outcome.repeat is None and outcome.status != "done":  # nothing new was measured
            self.tally.message(f"round {visit.round}: {c.label} c={c.client.get('concurrency')} got no more repeat "
                               f"({(outcome.reason or 'failed').splitlines()[0][:200]}); it keeps its "
                               f"{visit.start} repeats")
            self.progress.cell_finished("kept", self.place.name)
            return
        if outcome.status == "done":
            self.store.finish_cell(c.cell_id, "done", metrics=outcome.metrics, clamp=outcome.clamp,
                                   requests=outcome.requests, repeat=outcome.repeat)
            self.tally.count("merged" if visit.merge else "done")
        else:
            log = self.proc.log_text()
            diag = diagnose(log)
            reason = (outcome.reason or "failed") + failure_suffix(diag)
            status = "partial" if outcome.status == "partial" else "failed"  # partial: some requests failed
            self.store.finish_cell(c.cell_id, status, reason=reason, metrics=outcome.metrics, clamp=outcome.clamp,
                                   requests=outcome.requests, log_text=log, diagnosis=diag, repeat=outcome.repeat)
            self.tally.count(status)
            if not self.proc.alive():
                self.server_failed = True
                self.dead_reason = f"server exited (status {self.proc.returncode()}) during cell {c.cell_id}"
                self.store.update_server(self.sid, status="failed", log_text=log, diagnosis_json=diag)
        self.progress.cell_finished(outcome.status, self.place.name, note=finished_note(outcome.metrics))

    def stop(self) -> None:
        t = self.spec.timeouts
        how = self.proc.stop(t.stop_s)
        shutil.rmtree(self.key_dir, ignore_errors=True)
        store_error: sqlite3.OperationalError | None = None
        try:  # the server is stopped first; a store that stopped taking writes must not hide that, or an earlier error
            orphans.clear_active(self.store, self.place.slot)
            self.store.update_server(self.sid, status="failed" if self.server_failed else "stopped",
                                     log_text=self.proc.log_text(), ended_at=time.time())
        except sqlite3.OperationalError as exc:
            store_error = exc
        if self.proc.stop_interrupted:  # the stop itself was interrupted: the group is gone, now stop the run
            raise KeyboardInterrupt
        if not lifecycle.wait_port_free(self.spec.host, self.port, t.port_free_s):
            self.tally.message(f"port {self.port} still busy after stopping {self.sid} ({how})")
        if not lifecycle.wait_gpu_baseline(self.baseline, t.gpu_free_s, gpus=self.place.gpu_indices):
            self.tally.message(f"GPU memory not back to baseline {self.baseline} MiB after {self.sid}")
        if store_error is not None and sys.exc_info()[0] is None:
            raise StoreWriteError(f"the results store could not be written ({store_error}): finished cells are kept, "
                                  "free space (or make the folder writable) and run the matrix again to resume")


def fail_cells(store: Any, tally: Any, progress: Any, cells: list[Cell], reason: str, server_json: dict[str, Any],
               slot: str | None = None, log: str | None = None, diag: dict[str, Any] | None = None) -> None:
    """Cells that could not run here end `failed` with the reason, their stored repeats kept (a cell that started
    over has none); a `done` cell that was to get a round's repeat stays as it was (matrix/rounds.py gives it no
    more)."""
    for c in cells:
        visit = visit_of(c)
        if visit.merge:
            tally.message(f"round {visit.round}: {c.label} c={c.client.get('concurrency')} got no more repeat "
                          f"({reason.splitlines()[0][:200]}); it keeps its {visit.start} repeats")
            continue
        if visit.fresh:
            store.start_cell(c.cell_id, server_json=server_json)
        store.finish_cell(c.cell_id, "failed", reason=reason, log_text=log, diagnosis=diag)
        tally.count("failed")
        progress.cell_finished("failed", slot)


def visit_of(c: Cell) -> Visit:
    """What this boot does for the cell (matrix/visits.py): its visit, else all its planned repeats from the start."""
    return c.visit if c.visit is not None else first_visit(c.client)


def finished_note(metrics: dict[str, Any] | None) -> str | None:
    """'522 tok/s, over-saturated': a finished cell's throughput for its progress line."""
    if not metrics or not isinstance(metrics.get("output_throughput"), (int, float)):
        return None
    return f"{metrics['output_throughput']:.1f} tok/s" + (", over-saturated" if metrics.get("oversaturated") else "")


def safe_cap(adapter: ServerAdapter, info: dict[str, Any], log_text: str,
             plan: dict[str, Any] | None) -> tuple[int | None, str | None]:
    """The server's running cap (engines/base.py::ServerAdapter.running_cap); unknown when it cannot be read."""
    try:
        return adapter.running_cap(info, log_text, plan)
    except Exception:  # a record, never a reason to fail the tuple
        return None, None


def safe_read_back(adapter: ServerAdapter, base_url: str, log_text: str) -> dict[str, Any]:
    try:
        return dict(adapter.read_back(base_url, log_text))
    except Exception as exc:  # read-back is a record, never a reason to fail the cell
        return {"read_back_error": repr(exc)}


def url_host(host: str) -> str:
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


def next_log_path(log_dir: Path, server_id: str) -> Path:
    log_dir.mkdir(parents=True, exist_ok=True)
    n = 1
    while (log_dir / f"{server_id}-boot{n}.log").exists():
        n += 1
    return log_dir / f"{server_id}-boot{n}.log"
