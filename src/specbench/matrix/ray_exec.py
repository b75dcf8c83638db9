"""`specbench run --executor ray [--address ADDR]`: server tuples as Ray tasks on an existing Ray cluster.

Ray is an optional extra (`pip install 'specbench-llm[ray]'`), imported only here. Per phase (a barrier, as
everywhere), every launched tuple is one streaming-generator task with `num_gpus = tp`: Ray picks the node and the
GPUs and sets `CUDA_VISIBLE_DEVICES` for it; the task runs the tuple (tuple_run.py) and yields each store,
progress and tally call as it happens, the driver applies them to its store in order (relay.py: the same rows as
a local run, resumable by the same rules), and the whole server log comes back with the server's last record and
is written under the driver's log folder. A lost node or a dead worker ends the task's stream with a Ray error:
the tuple's unfinished cells are `failed` with it as the reason, and `--retry-failed` re-runs them. Tuples of
one phase on one node get different ports (the matrix's port + their position in the phase).

Failing fast rather than waiting without a word: the executor's name and `--address` are checked before anything
(check_executor); an address is probed first (a TCP connect and an HTTP/2 greeting, each bounded by CONNECT_S: Ray's
GCS and Ray Client speak gRPC), so a dead or wrong address is one line at once, not Ray's minutes of retries; and
the cluster's GPUs are read before any task is submitted: a cluster without a GPU is refused, and a tuple wider than
its largest node (a task's `num_gpus = tp` would never be scheduled) has its cells failed with the reason, as a
packed run does for a tuple wider than `--gpus`.
"""

from __future__ import annotations

import difflib
import os
import queue
import socket
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from specbench.engines.base import ServerAdapter
from specbench.errors import UserError
from specbench.matrix import orphans
from specbench.matrix.expansion import Cell, ServerTuple
from specbench.matrix.packing import by_phase
from specbench.matrix.placement import Placement
from specbench.matrix.preflight import Preflight, preflight
from specbench.matrix.relay import INTERRUPTED, Job, Writer, relays
from specbench.matrix.schema import MatrixSpec
from specbench.matrix.tuple_run import cell_server_json, fail_cells, record_server, run_tuple

EXECUTORS = ("local", "ray")
CONNECT_S = 10.0  # a Ray address's TCP connect, then its HTTP/2 greeting
# an HTTP/2 client's connection preface and an empty SETTINGS frame: a gRPC server answers with its SETTINGS
_H2_HELLO = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])



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
    address = opts.ray_address or os.environ.get("RAY_ADDRESS") or None
    if started:
        probe(address)
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        except (ConnectionError, ValueError, RuntimeError) as exc:
            raise UserError(f"--executor ray: cannot reach a Ray cluster at {address or 'auto'}: "
                            f"{str(exc).strip().splitlines()[0] if str(exc).strip() else exc!r}") from None
    task = ray.remote(tuple_task)
    writer = Writer(spec, store, progress, report, local_log_dir=log_dir)
    try:
        most = _largest_node(address) if work else 0.0
        for phase in by_phase(work):
            _run_phase(spec, phase, adapter, store, progress, report, log_dir, baseline, task, writer, most)
    finally:
        if started:
            ray.shutdown()


def _run_phase(spec: MatrixSpec, phase: list[tuple[ServerTuple, list[Cell]]], adapter: ServerAdapter, store: Any,
               progress: Any, report: Any, log_dir: Path, baseline: list[int] | None, task: Any,
               writer: Writer, most: float) -> None:
    import ray

    q: queue.Queue[tuple[Any, ...]] = queue.Queue()
    jobs: dict[int, Job] = {}
    for slot, (st, todo) in enumerate(phase):
        pf = preflight(spec, st, adapter)
        if pf.verdict == "skipped":
            run_tuple(spec, pf, todo, adapter, log_dir, store, progress, report, baseline)
            continue
        record_server(spec, pf, store)
        if st.tp > most:  # num_gpus = tp on no node: Ray would hold the task forever
            store.update_server(st.server_id, status="failed")
            fail_cells(store, report, progress, todo, f"tp={st.tp} needs a Ray node with {st.tp} GPUs; the "
                       f"cluster's largest has {most:g}", cell_server_json(pf))
            continue
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


def check_executor(name: str, gpus: str | None, address: str | None) -> str:
    """`--executor NAME` with `--gpus` / `--address`: the name, or a one-line error (a near name suggested)."""
    if name not in EXECUTORS:
        near = difflib.get_close_matches(name.strip().lower(), EXECUTORS, n=1, cutoff=0.5)
        raise UserError(f"--executor {name!r}: expected local or ray" + (f" (did you mean {near[0]}?)" if near else ""))
    if name == "ray" and gpus is not None:
        raise UserError("--gpus is for --executor local; on Ray the cluster assigns the GPUs")
    if name != "ray" and address is not None:
        raise UserError(f"--address {address!r} is the Ray cluster's: add --executor ray (or drop --address)")
    return name


def _target(address: str) -> tuple[str, int] | None:
    """(host, port) of a Ray address to probe; None for `auto` / `local` (Ray looks for those itself, at once)."""
    text = address.strip()
    if text in ("auto", "local"):
        return None
    scheme, _, rest = text.rpartition("://")
    if scheme not in ("", "ray"):
        raise UserError(f"--address {address!r}: expected HOST:PORT (a Ray head) or ray://HOST[:PORT] (Ray Client)")
    host, sep, port = rest.rpartition(":")
    if not sep or "]" in port:
        host, port = rest, "10001" if scheme else "6379"
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UserError(f"--address {address!r}: expected HOST:PORT with a port from 1 to 65535")
    return host, int(port)


def _found(address: str | None) -> str | None:
    """The address ray.init connects to for None / `auto`: RAY_ADDRESS, else the cluster `ray start` recorded on
    this machine (a stale record names a dead one); None: it starts a new local instance."""
    try:
        from ray._private.services import canonicalize_bootstrap_address
    except ImportError:  # a Ray without it: ray.init finds the cluster alone
        return None
    try:
        return canonicalize_bootstrap_address(address)  # type: ignore[arg-type]  # None: what ray.init passes
    except (ConnectionError, ValueError) as exc:
        raise UserError(f"--executor ray: {str(exc).strip().splitlines()[0] if str(exc).strip() else exc!r}") from None


def probe(address: str | None) -> None:
    """A one-line error at once when nothing at the Ray address (given, or the one ray.init would find) answers
    as a Ray cluster does (gRPC over HTTP/2)."""
    if address is None or address.strip() == "auto":
        found = _found(address)
        if found is None:
            return
        address = f"{found} (found by Ray as the cluster to join)"
        target = _target(found)
    else:
        target = _target(address)
    if target is None:
        return
    where = f"--executor ray: no Ray cluster at {address}"
    try:
        with socket.create_connection(target, timeout=CONNECT_S) as conn:
            if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
                return  # TLS first: the plain greeting below is not how such a cluster starts
            conn.settimeout(CONNECT_S)
            conn.sendall(_H2_HELLO)
            head = conn.recv(9)
    except TimeoutError:
        raise UserError(f"{where}: no answer within {CONNECT_S:g} s") from None
    except OSError as exc:
        raise UserError(f"{where}: {exc.strerror or exc}") from None
    if len(head) < 4 or head[3] != 4:  # an HTTP/2 server's first frame is its SETTINGS (type 4)
        raise UserError(f"{where}: something listens on {target[0]}:{target[1]} but does not speak gRPC as Ray does")


def largest_node(gpus_per_node: Sequence[float]) -> float:
    return max(gpus_per_node, default=0.0)


def _largest_node(address: str | None) -> float:
    """The most GPUs on one alive node of the cluster; a one-line error when no node has one."""
    import ray

    nodes = [float(n.get("Resources", {}).get("GPU", 0)) for n in ray.nodes() if n.get("Alive")]
    most = largest_node(nodes)
    if most <= 0:
        raise UserError(f"--executor ray: the Ray cluster at {address or 'a new local instance'} has no GPU "
                        f"({len(nodes)} alive node(s), none with a GPU resource): every server asks for tp GPUs and "
                        "would wait forever (start the nodes with GPUs, or `ray start --num-gpus N`)")
    return most
