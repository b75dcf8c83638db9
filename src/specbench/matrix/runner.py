"""Run a matrix: phases of server tuples; per tuple preflight, boot, all its cells, stop; resumable.

Per server tuple:
1. preflight through the planner (`specbench.plan.api.plan_command`): `launch` when it starts, `fixed`
   (with `auto_fix = true`) when the nearest working configuration from the plan's `fixes` is launched
   instead, `skipped` with the planner's reason otherwise;
2. boot (lifecycle.py): port free, GPU memory at baseline, own process group, ready = health + one
   generation, effective server args read back;
3. every cell that needs running (store.py resume rules), written ahead: `running` before, `done` /
   `failed` after; a failure keeps the whole server log and a doctor diagnosis;
4. stop the group (SIGTERM, then SIGKILL).
Afterwards each speculative cell gets its speedup over the autoregressive cell with the same TP,
concurrency, prompt/output tokens, rate and dataset.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specbench.engines.base import Engine, engine
from specbench.errors import UserError
from specbench.load import speedup as speedups
from specbench.matrix import lifecycle
from specbench.matrix.adapters import Adapter, Launch, adapter_for
from specbench.matrix.cellrun import CellContext, CellOutcome, run_cell
from specbench.matrix.spec import Cell, MatrixSpec, ServerTuple, expand
from specbench.matrix.store import Store

# ----------------------------------------------------------------------------- preflight

# planner fix keys (flag or field spelling) -> the server setting they change
@dataclass(frozen=True)
class Preflight:
    """The verdict on one server tuple and what would be launched."""

    server: ServerTuple
    verdict: str  # launch | fixed | skipped
    plan_status: str | None  # the planner's ok | fails for what is launched; None without a planner
    plan: dict[str, Any] | None
    launch: Launch
    settings: dict[str, Any]  # effective settings (requested + fix)
    reason: str | None = None
    fix: dict[str, Any] | None = None
    notes: tuple[str, ...] = ()


def _apply_fix(settings: dict[str, Any], change: dict[str, Any], eng: Engine) -> dict[str, Any]:
    """The settings with a planner fix applied: the engine names the matrix axis each changed argument sets."""
    out = {**settings, "flags": dict(settings.get("flags") or {})}
    for key, value in change.items():
        name = eng.fix_axis(key)
        if key.isupper() and not key.startswith("-"):  # an environment variable (e.g. VLLM_CPU_KVCACHE_SPACE)
            out["env"] = {**dict(settings.get("env") or {}), key: str(value)}
        elif name is not None:
            out[name] = value
        else:  # any other engine flag: set it as a flag of this tuple
            flag = key if key.startswith("-") else "--" + key.replace("_", "-")
            out["flags"][flag] = value
    return out


def plan_argv(adapter: Adapter, spec: MatrixSpec, launch: Launch) -> dict[str, Any] | None:
    """The planner's verdict for an argv, or None when there is no planner for this engine."""
    if adapter.plan_engine is None:
        return None
    try:
        from specbench.plan.api import PlanOptions, plan_command
    except ImportError:
        return None
    p = spec.plan
    version = p.engine_version or adapter.default_plan_version()
    opts = PlanOptions(
        model_config=p.model_config_, draft_config=p.draft_config, gpu=p.gpu, gpu_mem_gib=p.gpu_mem_gib,
        engine=adapter.plan_engine, engine_version=version,
        avail_before_load_gib=p.avail_before_load_gib, weights_gib=p.weights_gib,
        draft_weights_gib=p.draft_weights_gib, non_kv_gib=p.non_kv_gib, fixes=True,
    )
    # the server's environment is part of what it allocates (VLLM_CPU_KVCACHE_SPACE selects vLLM's CPU rules
    # and its KV space; SGLANG_* switches): hand it to the planner as the leading VAR=value words of the command
    env_words = [f"{k}={v}" for k, v in launch.env.items() if k.startswith(("VLLM_", "SGLANG_"))]
    try:
        return dict(plan_command(env_words + list(launch.argv), opts))
    except (UserError, ImportError, NotImplementedError) as exc:
        if adapter.tolerate_plan_errors:  # e.g. the tiny CPU models may be outside what the planner models
            return {"status": None, "error": None, "planner_error": f"{type(exc).__name__}: {exc}"}
        if not isinstance(exc, UserError):
            raise
        raise UserError(f"planner cannot plan {launch.argv[:3]}...: {exc} (check the matrix's [plan] table)") from None


def preflight(spec: MatrixSpec, st: ServerTuple, adapter: Adapter,
              planner: Callable[[Adapter, MatrixSpec, Launch], dict[str, Any] | None] = plan_argv) -> Preflight:
    settings = dict(st.settings)
    launch = adapter.launch(spec, settings)
    notes = tuple(settings.get("notes") or ()) + launch.notes
    plan = planner(adapter, spec, launch)
    status = plan.get("status") if plan else None
    if plan is None or status != "fails":
        return Preflight(st, "launch", status, plan, launch, settings, notes=notes + _cap_note(plan, settings))
    reason = _plan_reason(plan)
    if spec.auto_fix:
        for fix in plan.get("fixes") or []:
            change = dict(fix.get("change") or {})
            fixed = _apply_fix(settings, change, engine(adapter.plan_engine))
            if int(fixed["tp"]) != st.tp:  # a fix must keep the tuple in its phase
                continue
            fl = adapter.launch(spec, fixed)
            replan = planner(adapter, spec, fl)
            if replan is not None and replan.get("status") == "fails":
                continue
            return Preflight(st, "fixed", replan.get("status") if replan else None, replan, fl, fixed,
                             reason=f"auto_fix {change} (planner: {reason})", fix=change,
                             notes=notes + fl.notes + _cap_note(replan, fixed))
        reason = f"{reason}; no fix at tp={st.tp} plans ok"
    return Preflight(st, "skipped", status, plan, launch, settings, reason=reason, notes=notes)


def _cap_note(plan: dict[str, Any] | None, settings: dict[str, Any]) -> tuple[str, ...]:
    """The planner's max_running_requests is below the asked value (SGLang caps to it; for vLLM it is the
    concurrency its KV cache holds at full context, above which it preempts)."""
    asked, planned = settings.get("max_running_requests"), (plan or {}).get("max_running_requests")
    if isinstance(asked, int) and isinstance(planned, int) and planned < asked:
        return (f"planner: max_running_requests {planned} for this launch (asked {asked})",)
    return ()


def _plan_reason(plan: dict[str, Any]) -> str:
    for key in ("error", "reason"):
        v = plan.get(key)
        if v:
            return str(v)
    return "planner: would fail"


# ----------------------------------------------------------------------------- options and results


@dataclass(frozen=True)
class RunOptions:
    store_path: Path
    retry_failed: bool = False
    progress: bool = True
    log_dir: Path | None = None


@dataclass
class RunReport:
    store_path: Path
    ran: int = 0
    done: int = 0
    failed: int = 0
    partial: int = 0  # some requests failed beyond the client's max_failed_fraction (exit 1 like failed)
    skipped: int = 0
    kept: int = 0
    interrupted: bool = False
    messages: list[str] = field(default_factory=list)


def default_store_path(matrix_path: str | Path) -> Path:
    return Path("runs") / (Path(matrix_path).stem + ".sqlite")


def log_dir_for(store_path: Path) -> Path:
    return store_path.parent / (store_path.stem + "-logs")


# ----------------------------------------------------------------------------- diagnosis


def diagnose(log_text: str) -> dict[str, Any]:
    """`specbench.logs.doctor` on a whole log; a minimal last-error reading if doctor is not available."""
    try:
        from specbench.logs import doctor
    except ImportError:
        doctor = None  # type: ignore[assignment]
    if doctor is not None:
        for name in ("diagnose_text", "diagnose_log_text", "diagnose"):
            fn = getattr(doctor, name, None)
            if callable(fn):
                try:
                    result = fn(log_text)
                except Exception as exc:  # a diagnosis must never hide the failure it explains
                    return {"status": "unknown", "failure": None, "explanation": f"doctor raised {exc!r}"}
                return _as_dict(result)
    return _fallback_diagnosis(log_text)


def _as_dict(obj: Any) -> dict[str, Any]:
    if isinstance(obj, dict):
        return obj
    for name in ("to_json", "as_dict", "to_dict", "model_dump"):
        fn = getattr(obj, name, None)
        if callable(fn):
            out = fn()
            return json.loads(out) if isinstance(out, str) else dict(out)
    if dataclasses.is_dataclass(obj):
        return dataclasses.asdict(obj)  # type: ignore[arg-type]
    return {"value": str(obj)}


_ERR = re.compile(r"^\s*(?:[\w.]+(?:Error|Exception)|AssertionError|RuntimeError|ValueError)\b.*$", re.M)


def _fallback_diagnosis(log_text: str) -> dict[str, Any]:
    errors = _ERR.findall(log_text)
    failure = {"kind": "error", "message": errors[-1].strip()} if errors else None
    return {"status": "failed" if failure else "unknown", "failure": failure, "facts": {},
            "explanation": "last error line of the log (specbench.logs.doctor not available)", "fixes": []}


# ----------------------------------------------------------------------------- orphan servers


def _start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22): with the pid, an identity
    that survives exec (a shebang script's cmdline starts with its interpreter, not our argv[0])."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2:].split()[19])


def _record_active(store: Store, proc: lifecycle.ServerProcess, server_id: str) -> None:
    store.set_meta({"active_server": json.dumps({"pgid": proc.pid, "start": _start_ticks(proc.pid),
                                                 "argv": proc.argv, "server_id": server_id})})


def _clear_active(store: Store) -> None:
    store.set_meta({"active_server": ""})


def reap_orphan(store: Store, grace_s: float = 10.0) -> str | None:
    """Stop a server a killed `specbench run` left behind: the same process (pid and start time) still
    leading its process group. A recycled pid fails the start-time check and is left alone."""
    raw = store.meta().get("active_server")
    if not raw:
        return None
    try:
        info = json.loads(raw)
        pgid = int(info["pgid"])
        start = info.get("start")
    except (ValueError, KeyError, TypeError):
        _clear_active(store)
        return None
    now = _start_ticks(pgid)
    msg = None
    if now is not None and start is not None and now == int(start):
        _stop_group(pgid, grace_s)
        msg = f"stopped server {info.get('server_id')} (pgid {pgid}) left by an interrupted run"
    _clear_active(store)
    return msg


def _stop_group(pgid: int, grace_s: float) -> None:
    def alive() -> bool:
        try:
            os.killpg(pgid, 0)
            return True
        except ProcessLookupError:
            return False
        except PermissionError:
            return True

    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        if not alive():
            return
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and alive():
            time.sleep(0.1)


# ----------------------------------------------------------------------------- the run


def _sigterm_to_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def run_matrix(spec: MatrixSpec, matrix_text: str, matrix_path: str, opts: RunOptions,
               console: Any = None) -> RunReport:
    """Run (or resume) every cell of the matrix into the store at `opts.store_path`."""
    from specbench.matrix.progress import Progress

    adapter = adapter_for(spec)
    tuples, cells = expand(spec)
    lock = _lock_store(opts.store_path)
    store = Store(opts.store_path)
    report = RunReport(opts.store_path)
    log_dir = opts.log_dir or log_dir_for(opts.store_path)
    try:
        import specbench

        version = getattr(specbench, "__version__", "")
    except ImportError:  # pragma: no cover
        version = ""
    store.set_meta({"matrix_path": str(matrix_path), "matrix_text": matrix_text, "engine": spec.engine,
                    "engine_version": spec.plan.engine_version or "", "host": spec.host, "name": spec.name,
                    "specbench_version": version})
    orphan = reap_orphan(store)
    if orphan:
        report.messages.append(orphan)
    gpu_baseline = lifecycle.gpu_memory_used_mib()  # before any server of this run; None without nvidia-smi

    by_server: dict[str, list[Cell]] = {}
    for c in cells:
        by_server.setdefault(c.server_id, []).append(c)
    for st in tuples:
        for c in by_server.get(st.server_id, []):
            store.ensure_cell(cell_id=c.cell_id, server_id=c.server_id, phase=c.phase, tp=c.tp,
                              algorithm=c.algorithm, label=c.label, server=c.server, client=c.client)
    todo_total = sum(1 for c in cells if store.needs_run(c.cell_id, opts.retry_failed))
    report.kept = len(cells) - todo_total

    old_handler = signal.signal(signal.SIGTERM, _sigterm_to_interrupt)
    progress = Progress(enabled=opts.progress, console=console, total=todo_total)
    try:
        with progress:
            for st in tuples:
                todo = [c for c in by_server.get(st.server_id, []) if store.needs_run(c.cell_id, opts.retry_failed)]
                if not todo:
                    continue
                _run_tuple(spec, st, todo, adapter, store, log_dir, report, progress, gpu_baseline)
    except KeyboardInterrupt:
        report.interrupted = True
    finally:
        signal.signal(signal.SIGTERM, old_handler)
        fill_speedups(store)
        store.close()
        lock.close()
    return report


def _lock_store(store_path: Path) -> Any:
    """One runner per store: an exclusive flock on `<store>.lock`, released by the kernel even on SIGKILL."""
    import fcntl

    store_path.parent.mkdir(parents=True, exist_ok=True)
    f = open(store_path.with_name(store_path.name + ".lock"), "a+")
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        raise UserError(f"{store_path}: another `specbench run` is using this store") from None
    return f


def _run_tuple(spec: MatrixSpec, st: ServerTuple, todo: list[Cell], adapter: Adapter, store: Store,
               log_dir: Path, report: RunReport, progress: Any, baseline: list[int] | None = None) -> None:
    pf = preflight(spec, st, adapter)
    store.put_server(server_id=st.server_id, phase=st.phase, tp=st.tp, engine=spec.engine,
                     settings={**pf.settings, "requested": _requested(st), "fix": pf.fix,
                               "notes": list(pf.notes)},
                     command=pf.launch.argv, env=pf.launch.env, verdict=pf.verdict, plan=pf.plan,
                     status="skipped" if pf.verdict == "skipped" else "pending")
    progress.phase(st.phase, st.tp, pf.settings["label"], pf.verdict)
    if pf.verdict == "skipped":
        for c in todo:
            store.skip_cell(c.cell_id, f"planner: {pf.reason}")
            report.skipped += 1
            progress.cell_finished("skipped")
        return

    cell_server = {k: v for k, v in pf.settings.items() if k != "notes"}
    if pf.fix:
        cell_server["fix"] = pf.fix
    log_path = _next_log_path(log_dir, st.server_id)
    proc = lifecycle.ServerProcess(
        argv=pf.launch.argv,
        env=lifecycle.clean_env(dict(os.environ), pf.launch.env, pf.launch.drop_env),
        log_path=log_path, cwd=pf.launch.cwd,
    )
    base_url = f"http://{_url_host(spec.host)}:{spec.port}"
    t = spec.timeouts
    if not lifecycle.wait_gpu_baseline(baseline, t.gpu_free_s):
        report.messages.append(f"GPU memory still above the baseline {baseline} MiB before {st.server_id}")
    if not lifecycle.wait_port_free(spec.host, spec.port, t.port_free_s):
        msg = f"port {spec.host}:{spec.port} still in use after {t.port_free_s:.0f} s; not launched"
        store.update_server(st.server_id, status="failed", ended_at=time.time(),
                            diagnosis_json={"status": "unknown", "failure": {"kind": "port_in_use", "message": msg}})
        for c in todo:
            store.start_cell(c.cell_id, server_json=cell_server)
            store.finish_cell(c.cell_id, "failed", reason=msg)
            report.failed += 1
            progress.cell_finished("failed")
        return

    store.update_server(st.server_id, status="running", log_path=str(log_path), started_at=time.time())
    try:
        try:
            proc.start()
            _record_active(store, proc, st.server_id)
            ready_s = lifecycle.wait_ready(proc, base_url, adapter.health_paths,
                                           lambda url, to: adapter.probe(url, to, pf.launch.argv), t.ready_s)
        except lifecycle.ServerFailed as exc:
            proc.stop(t.stop_s)
            log = proc.log_text()
            diag = diagnose(log)
            reason = f"server {exc.kind}: {exc.message}" + _failure_suffix(diag)
            store.update_server(st.server_id, status="failed", log_text=log, diagnosis_json=diag, ended_at=time.time())
            for c in todo:
                store.start_cell(c.cell_id, server_json=cell_server)
                store.finish_cell(c.cell_id, "failed", reason=reason, log_text=log, diagnosis=diag)
                report.failed += 1
                progress.cell_finished("failed")
            report.messages.append(f"{st.label} tp={st.tp}: {reason}")
            return
        info = _safe_read_back(adapter, base_url, proc.log_text())
        info["ready_s"] = round(ready_s, 3)
        store.update_server(st.server_id, status="ready", server_info_json=info)
        cell_server = {**cell_server, "effective": info}  # what the engine reports, stored with each cell
        ctx = CellContext(spec=spec, adapter=adapter, base_url=base_url, argv=pf.launch.argv,
                          server_info=info, settings=pf.settings, proc=proc, plan=pf.plan)
        dead_reason: str | None = None
        for c in todo:
            if dead_reason is not None:
                store.start_cell(c.cell_id, server_json=cell_server)
                log = proc.log_text()
                store.finish_cell(c.cell_id, "failed", reason=dead_reason, log_text=log, diagnosis=diagnose(log))
                report.failed += 1
                progress.cell_finished("failed")
                continue
            store.start_cell(c.cell_id, server_json=cell_server)
            report.ran += 1
            progress.cell_started(c)
            try:
                outcome = run_cell(c, ctx, progress.request_done)
            except KeyboardInterrupt:  # stays `running`: the next run re-runs it
                store.mark_interrupted(c.cell_id, "interrupted (Ctrl-C); re-run next time")
                raise
            except Exception as exc:  # a cell must end in the store whatever went wrong
                outcome = CellOutcome("failed", reason=f"specbench error while running the cell: {exc!r}")
            if outcome.status == "done":
                store.finish_cell(c.cell_id, "done", metrics=outcome.metrics, clamp=outcome.clamp,
                                  requests=outcome.requests)
                report.done += 1
            else:
                log = proc.log_text()
                diag = diagnose(log)
                reason = (outcome.reason or "failed") + _failure_suffix(diag)
                status = "partial" if outcome.status == "partial" else "failed"
                store.finish_cell(c.cell_id, status, reason=reason, metrics=outcome.metrics, clamp=outcome.clamp,
                                  requests=outcome.requests, log_text=log, diagnosis=diag)
                report.failed += status == "failed"
                report.partial += status == "partial"
                if not proc.alive():
                    dead_reason = f"server exited (status {proc.returncode()}) during cell {c.cell_id}"
                    store.update_server(st.server_id, status="failed", log_text=log, diagnosis_json=diag)
            progress.cell_finished(outcome.status)
    finally:
        how = proc.stop(t.stop_s)
        _clear_active(store)
        row = store.server(st.server_id) or {}
        final = row.get("status") if row.get("status") == "failed" else "stopped"
        store.update_server(st.server_id, status=final, log_text=proc.log_text(), ended_at=time.time())
        if not lifecycle.wait_port_free(spec.host, spec.port, t.port_free_s):
            report.messages.append(f"port {spec.port} still busy after stopping {st.server_id} ({how})")
        if not lifecycle.wait_gpu_baseline(baseline, t.gpu_free_s):
            report.messages.append(f"GPU memory not back to baseline {baseline} MiB after {st.server_id}")


def _requested(st: ServerTuple) -> dict[str, Any]:
    return {k: v for k, v in st.settings.items() if k != "notes"}


def _failure_suffix(diag: dict[str, Any]) -> str:
    failure = diag.get("failure") if isinstance(diag, dict) else None
    if isinstance(failure, dict) and failure.get("message"):
        return f" [{failure.get('kind', 'error')}: {str(failure['message']).strip().splitlines()[0][:300]}]"
    return ""


def _safe_read_back(adapter: Adapter, base_url: str, log_text: str) -> dict[str, Any]:
    try:
        return dict(adapter.read_back(base_url, log_text))
    except Exception as exc:  # read-back is a record, never a reason to fail the cell
        return {"read_back_error": repr(exc)}


def _url_host(host: str) -> str:
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


def _next_log_path(log_dir: Path, server_id: str) -> Path:
    log_dir.mkdir(parents=True, exist_ok=True)
    n = 1
    while (log_dir / f"{server_id}-boot{n}.log").exists():
        n += 1
    return log_dir / f"{server_id}-boot{n}.log"


# ----------------------------------------------------------------------------- speedups


def fill_speedups(store: Store) -> None:
    """metrics.speedup = output_throughput / AR output_throughput at the same baseline key (null for AR),
    rounded to 4 digits (load/speedup.py)."""
    rows = [r for r in store.cells() if r.get("status") == "done" and r.get("metrics")]

    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        c = r.get("client") or {}
        return speedups.baseline_key(r.get("tp"), c.get("concurrency"), c)

    index = speedups.ar_index((key(r), speedups.is_ar(r.get("algorithm")), r["metrics"].get("output_throughput"))
                              for r in rows)
    for r in rows:
        m = dict(r["metrics"])
        new = speedups.speedup_at(key(r), speedups.is_ar(r.get("algorithm")), m.get("output_throughput"), index)
        new = None if new is None else round(new, 4)
        if m.get("speedup") != new or "speedup" not in m:
            m["speedup"] = new
            store.set_metrics(r["cell_id"], m)


# ----------------------------------------------------------------------------- dry run


def dry_run(spec: MatrixSpec,
            planner: Callable[[Adapter, MatrixSpec, Launch], dict[str, Any] | None] = plan_argv
            ) -> list[dict[str, Any]]:
    """One object per cell: cell, server (incl. tp), client, verdict, plan_status, command; nothing launched."""
    adapter = adapter_for(spec)
    tuples, cells = expand(spec)
    pfs = {st.server_id: preflight(spec, st, adapter, planner) for st in tuples}
    out = []
    for c in cells:
        pf = pfs[c.server_id]
        server = {k: v for k, v in pf.settings.items() if k != "notes"}
        out.append({
            "cell": c.cell_id, "server_id": c.server_id, "phase": c.phase, "label": c.label,
            "server": server, "client": c.client, "verdict": pf.verdict, "plan_status": pf.plan_status,
            "reason": pf.reason, "fix": pf.fix, "notes": list(pf.notes),
            "command": list(pf.launch.argv), "env": dict(pf.launch.env),
            "max_running_requests_planned": (pf.plan or {}).get("max_running_requests"),
        })
    return out


def iter_phases(rows: Sequence[dict[str, Any]]) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    phase: int | None = None
    group: list[dict[str, Any]] = []
    for r in rows:
        if r["phase"] != phase and group:
            yield phase or 0, group
            group = []
        phase = r["phase"]
        group.append(r)
    if group:
        yield phase or 0, group
