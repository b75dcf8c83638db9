"""Synthetic results stores with the store's own schema (matrix/store.py SCHEMA), written with plain sqlite3.

For tests and for trying `specbench report` without a GPU. The shape follows the incident in
shared/scenario/README.md: TP1/TP4/TP8 x ar / dflash / ddtree-b{4,8,16} x concurrency, an AR
baseline near 26.5 tok/s per request at TP1, a TP1 DDTree server that fails with
`AssertionError: max_running_request is zero` (its cells skipped), and one failed cell with a log.
The numbers are made up (seeded) and say so in `meta.synthetic`.
"""

from __future__ import annotations

import json
import random
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TypeAlias, TypedDict

from specbench.matrix.store import insert_sql
from specbench.stored.schema import SCHEMA

LABELS = ("ar", "dflash", "ddtree-b4", "ddtree-b8", "ddtree-b16")
MEAN_ACCEPT = {"dflash": 3.1, "ddtree-b4": 2.6, "ddtree-b8": 3.4, "ddtree-b16": 4.0}
GPU_GIB = 95.59  # RTX PRO 6000 Blackwell, 97,887 MiB

OOM_LOG = """[2026-03-02 01:12:03 TP0] Load weight begin. avail mem=94.24 GB
[2026-03-02 01:12:41 TP0] Load weight end. type=Qwen3_5ForConditionalGeneration, dtype=torch.bfloat16, avail mem=43.19 GB, mem usage=51.05 GB.
[2026-03-02 01:12:44 TP0] Mamba Cache is allocated. max_mamba_cache_size: 2, conv_state size: 0.01GB, ssm_state size: 0.29GB intermediate_ssm_state_cache size: 0.94GB
[2026-03-02 01:12:44 TP0] KV Cache is allocated. #tokens: 11893, K size: 0.36 GB, V size: 0.36 GB
Traceback (most recent call last):
  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2715, in run_scheduler_process
    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)
AssertionError: max_running_request is zero
"""


# a value of a synthetic cell's metrics_json: counts, rates, "inf", the accept lengths, None
MetricValue: TypeAlias = int | float | str | list[float] | None


class _PlanKeys(TypedDict):
    """The part of a server's plan_json (the planner's JSON) a synthetic server writes."""
    status: str
    error: str | None
    engine: str
    engine_version: str
    mem_fraction_static: float
    weights_gib: float
    draft_weights_gib: float | None
    kv_tokens: int
    k_size_gib: float
    v_size_gib: float
    max_mamba_cache_size: int
    conv_state_gib: float
    ssm_state_gib: float
    intermediate_ssm_state_gib: float
    max_running_requests: int
    gpu_total_gib: float
    fixes: list[Mapping[str, object]]  # none here


class _SettingsKeys(TypedDict):
    tp: int
    label: str
    algorithm: str
    mem_fraction_static: float
    max_running_requests: int
    context_length: int
    flags: dict[str, str]
    env: dict[str, str]


class _Settings(_SettingsKeys, total=False):
    """servers.settings_json (and cells.server_json) of a synthetic server: `ddtree_budget` for DDTree only."""
    ddtree_budget: int


class _CellRow(TypedDict):
    """What one synthetic cell stores (`_cell_outcome`)."""
    status: str
    reason: str | None
    metrics: dict[str, MetricValue] | None
    log: str | None
    diag: Mapping[str, object] | None
    accepts: list[float]


def _percentiles(values: Sequence[float]) -> dict[str, float]:
    xs = sorted(values)

    def q(p: float) -> float:
        k = (len(xs) - 1) * p
        lo = int(k)
        hi = min(lo + 1, len(xs) - 1)
        return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)

    return {"mean": sum(xs) / len(xs), "p50": q(0.5), "p90": q(0.9), "p99": q(0.99)}


def _metrics(tp: int, label: str, conc: int, rng: random.Random, n_req: int,
             throughput_scale: float = 1.0) -> tuple[dict[str, MetricValue], list[float]]:
    """A done cell's metrics_json (its output_throughput times `throughput_scale`) and its accept lengths."""
    # AR decode speed per request: 26.5 tok/s at TP1, c=1 (scenario README), better with TP, worse with c.
    per_user_ar = 26.5 * (1 + 0.55 * (tp.bit_length() - 1)) / (1 + 0.06 * (conc - 1))
    accept = MEAN_ACCEPT.get(label)
    accepts: list[float] = []
    if accept is None:
        per_user = per_user_ar
    else:
        accepts = [max(1.0, rng.gauss(accept - 0.05 * conc, 0.45)) for _ in range(n_req)]
        overhead = 1.25 + 0.05 * conc * (1 + int(label.rsplit("b", 1)[-1]) / 16 if "-b" in label else 1)
        per_user = per_user_ar * (sum(accepts) / n_req) / overhead
    tpot = 1000.0 / per_user
    tpots = [tpot * rng.uniform(0.93, 1.12) for _ in range(n_req)]
    ttfts = [60.0 * (1 + 0.3 * conc) / tp ** 0.5 * rng.uniform(0.8, 1.6) for _ in range(n_req)]
    itls = [t * rng.uniform(0.7, 1.6) for t in tpots]
    e2es = [a + b * 255 for a, b in zip(ttfts, tpots)]
    out_tput = conc * per_user * rng.uniform(0.97, 1.03)
    m: dict[str, MetricValue] = {
        "completed": n_req, "failed": 0, "duration_s": n_req * 256 / out_tput, "concurrency": conc,
        "request_rate": "inf", "request_throughput": out_tput / 256, "output_throughput": out_tput * throughput_scale,
        "total_token_throughput": out_tput * (1 + 1024 / 256),
        "accept_length_mean": (sum(accepts) / len(accepts)) if accepts else None,
        "accept_lengths": accepts, "goodput": out_tput / 256, "speedup": None,
    }
    for name, vals in (("ttft", ttfts), ("tpot", tpots), ("itl", itls), ("e2e", e2es)):
        for k, v in _percentiles(vals).items():
            m[f"{name}_ms_{k}"] = v
    return m, accepts


def _plan(tp: int, label: str, fails: bool) -> _PlanKeys:
    spec = label != "ar"
    weights = 47.54 / tp  # 51.05 GB NVFP4 target (scenario) in GiB, split over TP
    mamba = (0.01 + 0.29 + 0.94) if fails else (0.07 + 3.52 + 11.25) / (1 if tp == 1 else 2)
    return {
        "status": "fails" if fails else "ok", "error": "max_running_request is zero" if fails else None,
        "engine": "sglang", "engine_version": "0.5.23", "mem_fraction_static": 0.75 if not spec else 0.85,
        "weights_gib": weights, "draft_weights_gib": 3.07 / tp if spec else None,
        "kv_tokens": 11893 if fails else 87061 * tp, "k_size_gib": 0.36 if fails else 2.6 * tp ** 0.5,
        "v_size_gib": 0.36 if fails else 2.6 * tp ** 0.5,
        "max_mamba_cache_size": 2 if fails else 24, "conv_state_gib": 0.01 if fails else 0.07,
        "ssm_state_gib": 0.29 if fails else mamba * 0.24, "intermediate_ssm_state_gib": 0.94 if fails else mamba * 0.755,
        "max_running_requests": 0 if fails else 4 * tp, "gpu_total_gib": GPU_GIB, "fixes": [],
    }


SERVER_DIAGNOSIS = {"status": "failed", "failure": {"kind": "no_request_slots",
                                                    "message": "AssertionError: max_running_request is zero"},
                    "explanation": "max_mamba_cache_size is 2, too small for 8 running requests and the draft."}
CELL_DIAGNOSIS = {"status": "failed", "failure": {"kind": "server_died", "message": "ServerDisconnectedError"},
                  "explanation": "the engine process exited during the cell."}
CLAMP = {"requested_prompt_tokens": 1024, "prompt_tokens": 1024, "output_tokens": 256, "context_len": 32768,
         "clamped": False}


def _settings(tp: int, label: str) -> _Settings:
    """servers.settings_json (and cells.server_json) of one server tuple."""
    algorithm = "ar" if label == "ar" else label.split("-")[0].upper()
    budget = int(label.rsplit("b", 1)[1]) if "-b" in label else None
    settings: _Settings = {"tp": tp, "label": label, "algorithm": algorithm, "mem_fraction_static": 0.75,
                "max_running_requests": 4 * tp, "context_length": 32768, "flags": {}, "env": {}}
    if budget:
        settings["ddtree_budget"] = budget
    return settings


def _insert_server(con: sqlite3.Connection, sid: str, phase: int, tp: int, label: str, settings: _Settings,
                   engine: str, server_fails: bool, pending: bool, t: float) -> None:
    if pending:
        status = "pending"
    else:
        status = "failed" if server_fails else "stopped"
    diag = SERVER_DIAGNOSIS if server_fails else None
    con.execute(
        insert_sql("servers"),
        (sid, phase, tp, engine, json.dumps(settings),
         json.dumps(["python", "-m", "sglang.launch_server", "--tp", str(tp)]), json.dumps({}),
         "launch", json.dumps(_plan(tp, label, server_fails)), None, status, f"/logs/{sid}.log",
         OOM_LOG if server_fails else f"server {sid} ready\n" if not pending else None,
         json.dumps(diag) if diag else None, t, t + 60),
    )


def _cell_outcome(cid: str, sid: str, tp: int, label: str, conc: int, rng: random.Random, n_req: int,
                  state: str, throughput_scale: float) -> _CellRow:
    """status, reason, metrics, log, diagnosis and per-request accept lengths of one cell; `state` is "pending",
    "server_failed", "failed" or "done" (only a done cell draws from `rng`)."""
    row: _CellRow = {"status": "pending", "reason": None, "metrics": None, "log": None, "diag": None,
                     "accepts": []}
    if state == "server_failed":
        row["status"], row["reason"] = "skipped", f"server {sid} failed to start"
    elif state == "failed":
        row["status"], row["reason"] = "failed", "all 16 requests failed: server disconnected"
        row["log"], row["diag"] = "client: ServerDisconnectedError after 3 requests\n" * 3, CELL_DIAGNOSIS
    elif state == "done":
        metrics, accepts = _metrics(tp, label, conc, rng, n_req, throughput_scale)
        row["status"], row["metrics"], row["accepts"] = "done", metrics, accepts
        row["log"] = f"cell {cid}: {n_req} requests ok\n"
    return row


def _insert_cell(con: sqlite3.Connection, cid: str, sid: str, phase: int, tp: int, label: str,
                 settings: _Settings, client: Mapping[str, int | str], row: _CellRow, t: float) -> None:
    algorithm = settings["algorithm"]
    con.execute(
        insert_sql("cells"),
        (cid, sid, phase, tp, algorithm.lower() if label == "ar" else algorithm, label,
         json.dumps(settings), json.dumps(client), row["status"], row["reason"],
         0 if row["status"] == "pending" else 1, t, t + 30,
         json.dumps(row["metrics"]) if row["metrics"] else None, json.dumps(CLAMP),
         row["log"], json.dumps(row["diag"]) if row["diag"] else None),
    )
    for i, acc in enumerate(row["accepts"]):
        con.execute(insert_sql("requests"),
                    (cid, i, 1024, 256, 0.1, 9.0, json.dumps([0.03] * 4), None, acc, 64, None, None,
                     256, 256, "token_ids", 0, None, None, None, None, None, None))


def write_store(path: str | Path, *, tps: Sequence[int] = (1, 4, 8), labels: Sequence[str] = LABELS,
                concurrencies: Sequence[int] = (1, 2, 4, 8), seed: int = 7, n_req: int = 16,
                failing_server: tuple[int, str] | None = (1, "ddtree-b16"),
                failing_cell: tuple[int, str, int] | None = (4, "dflash", 8),
                pending_from: tuple[int, str] | None = None, engine: str = "sglang",
                engine_version: str = "0.5.23", throughput_scale: float = 1.0, done_logs: bool = True) -> Path:
    """Write a synthetic store. `pending_from=(tp, label)` leaves that server and all after it pending.
    `done_logs=False`: done cells without a log, as `specbench run` leaves them (matrix/tuple_run.py::record keeps a
    log for failed and partial cells only)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        path.unlink()
    rng = random.Random(seed)
    con = sqlite3.connect(path)
    con.executescript(SCHEMA)
    con.executemany(insert_sql("meta"), [
        ("engine", engine), ("engine_version", engine_version), ("host", "synthetic"),
        ("specbench_version", "0.1.0"), ("synthetic", "true: made-up numbers for tests"),
    ])
    pending = False
    t = 1_770_000_000.0
    for phase, tp in enumerate(tps, start=1):
        for label in labels:
            sid = f"srv-tp{tp}-{label}"
            settings = _settings(tp, label)
            if pending_from == (tp, label):
                pending = True
            server_fails = failing_server == (tp, label)
            _insert_server(con, sid, phase, tp, label, settings, engine, server_fails, pending, t)
            for conc in concurrencies:
                cid = f"cell-tp{tp}-{label}-c{conc}"
                client: dict[str, int | str] = {"concurrency": conc, "prompt_tokens": 1024, "output_tokens": 256, "num_requests": n_req,
                          "dataset": "random", "request_rate": "inf"}
                state = ("pending" if pending else "server_failed" if server_fails
                         else "failed" if failing_cell == (tp, label, conc) else "done")
                row = _cell_outcome(cid, sid, tp, label, conc, rng, n_req, state, throughput_scale)
                if state == "done" and not done_logs:
                    row["log"] = None
                _insert_cell(con, cid, sid, phase, tp, label, settings, client, row, t)
                t += 31
    con.commit()
    con.close()
    return path
