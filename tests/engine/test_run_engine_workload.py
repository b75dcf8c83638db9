"""`specbench run` on the real local engine (vLLM's CPU build, the tiny target, autoregressive and with itself as
draft): one matrix, run twice with faults between, four boots for the module, three kinds of check on its store.

The runs (fixture `workload`):
1. `specbench run --repeats 3`: the `ar` server's engine is killed during its second cell, then the runner is
   SIGKILLed while the `self-draft` server boots (its EngineCore already spawned);
2. `specbench run --repeats 3 --retry-failed`: keeps the first cell, re-runs the failed one on a new `ar` boot and
   runs both `self-draft` cells.

The checks:
- faults (was test_run_engine.py's own run and two boots): the cell whose engine died is `failed` with the whole
  server log and a diagnosis; the SIGKILLed runner's engine dies with it (matrix/watchdog.py: vLLM's EngineCore,
  retitled by setproctitle, once outlived its API server), so the next run has nothing to stop; the finished cell
  is kept, the failed one re-run once;
- #14: a dataset file, a category axis, sampling settings and `--repeats 3` run end to end, the store holds
  per-request categories and repeats, and the report shows per-category results with intervals;
- count, don't trust (#22): the client asks `return_token_ids` (engines/vllm/launch.py::VllmServer.count_body),
  counts the ids vLLM streams and finds them equal to vLLM's usage; the running cap (--max-num-seqs 2, below the
  concurrency of 4) is read from vLLM's own log and the concurrency that ran is 2; the `code` prompts are longer than
  the context allows and are clamped to exactly what vLLM counts (with the chat template).

(test_truth_engine.py's run and boot were folded in earlier; test_run_engine.py keeps the readiness time-out.)
What the fold changed: the runner is SIGKILLed while a server boots, not mid-cell, and run 1 never exits by itself.
A cell left `running` by a killed runner and re-run by a plain resume, and a run's exit status 1 after its engine
died, are checked on the instant server (tests/process/test_run_instant.py's SIGKILL and Ctrl-C tests), where neither
depends on the engine; vLLM's exit status 1 on a failed cell stays in test_run_engine.py's readiness test.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from engine_boot import engine_venv_or_skip
from paths import ROOT
from proc_helpers import free_port, pid_alive
from run_helpers import rows, wait
from specbench.engines.vllm.launch import models_dir
from specbench.matrix.identity import group_pids

pytestmark = pytest.mark.engine

CAP, CONCURRENCY, REQUESTS, REPEATS, OUTPUT, CONTEXT, DRAFTS = 2, 4, 4, 3, 16, 512, 3
CLAMPED = CONTEXT - OUTPUT  # a `code` prompt: asked longer than the context, clamped to what fits with its output


def _safe_rows(store: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """`rows`, or none while the store or its tables do not exist yet."""
    try:
        return rows(store, sql, *params) if store.exists() else []
    except Exception:  # noqa: BLE001 - sqlite3.OperationalError before the schema is written
        return []


def _cells(store: Path) -> dict[tuple[str, str], tuple[Any, ...]]:
    """(label, category) -> (cell_id, status, attempts, ended_at, reason)."""
    return {(label, json.loads(client)["category"]): (cid, st, att, end, reason) for cid, label, client, st, att, end,
            reason in _safe_rows(store, "SELECT cell_id, label, client_json, status, attempts, ended_at, reason "
                                        "FROM cells")}


def _active_pgid(store: Path) -> int | None:
    """The running server's process group (matrix/orphans.py::record_active); None between servers (cleared: '')."""
    got = _safe_rows(store, "SELECT value FROM meta WHERE key='active_server'")
    return json.loads(got[0][0])["pgid"] if got and got[0][0] else None


def _gone(pgid: int, timeout: float) -> bool:
    """The leader and every process of its group have exited (waited for, not slept for)."""
    deadline = time.monotonic() + timeout
    while (pid_alive(pgid) or group_pids(pgid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not (pid_alive(pgid) or group_pids(pgid))


def _run(matrix: Path, store: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "specbench", "run", str(matrix), "--store", str(store),
                             "--repeats", str(REPEATS), "--no-progress", *extra], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _matrix(tmp: Path) -> Path:
    data = tmp / "prompts.jsonl"
    code = "def add_{i}(a, b):\n    return a + b\n" + "".join(f"x_{k} = add_{{i}}({k}, {k})\n" for k in range(80))
    data.write_text("\n".join(json.dumps(r) for r in (
        [{"prompt": f"Write a short note about apples number {i}.", "category": "chat"} for i in range(6)]
        + [{"prompt": code.format(i=i), "category": "code"} for i in range(6)])) + "\n")
    matrix = tmp / "m.toml"
    matrix.write_text(f"""
name = "engine-workload"
engine = "local"
model = "tiny-target"
port = {free_port()}
[timeouts]
ready_s = 400
request_s = 120
[server]
tp = 1
context_length = {CONTEXT}
max_running_requests = {CAP}
[[server.spec]]
label = "ar"
[[server.spec]]
label = "self-draft"
algorithm = "draft_model"
draft_model = "tiny-target"
num_draft_tokens = {DRAFTS}
[client]
concurrency = {CONCURRENCY}
dataset = "{data}"
category = ["chat", "code"]
prompt_len = "data"
output_tokens = {OUTPUT}
num_requests = {REQUESTS}
warmup_requests = 1
temperature = 0.7
seed = 7
""")
    return matrix


def _second_ar_cell(store: Path) -> tuple[Any, ...] | None:
    """`ar`'s running cell once its other cell is done, else None."""
    ar = [v for (label, _), v in _cells(store).items() if label == "ar"]
    running = [v for v in ar if v[1] == "running"]
    return running[0] if running and any(v[1] == "done" for v in ar) else None


def _first_run(matrix: Path, store: Path) -> dict[str, Any]:
    """Run 1: the `ar` engine killed during its second cell, the runner SIGKILLed once the next server's EngineCore
    is up. What the store and the processes said at each step."""
    first = _run(matrix, store)
    try:
        second = wait(lambda: _second_ar_cell(store), 500, "ar's second cell")
        ar_pgid = _active_pgid(store)
        assert ar_pgid is not None
        time.sleep(0.3)
        os.killpg(ar_pgid, signal.SIGKILL)
        wait(lambda: (p := _active_pgid(store)) is not None and p != ar_pgid, 200, "the self-draft server's launch")
        sd_pgid = _active_pgid(store)
        log = Path(wait(lambda: _safe_rows(store, "SELECT log_path FROM servers WHERE status='running' AND log_path "
                                                  "IS NOT NULL"), 60, "its log")[0][0])
        wait(lambda: "(EngineCore" in log.read_text(errors="replace"), 300, "its EngineCore")
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
    assert sd_pgid is not None
    return {"cells": _cells(store), "dead_cell": second[0], "ar_pgid": ar_pgid, "sd_pgid": sd_pgid,
            "sd_left": not _gone(sd_pgid, 60)}


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The store after both runs, what run 1 left, run 2's exit and output, and the report folder."""
    engine_venv_or_skip()  # skips locally without the engine; fails under CI, where make test installs it
    if not (models_dir() / "tiny-target" / "config.json").is_file():
        pytest.skip("tiny models not built: run `make models`")
    tmp = tmp_path_factory.mktemp("workload")
    matrix, store = _matrix(tmp), tmp / "r.sqlite"
    after_first = _first_run(matrix, store)
    failed = _safe_rows(store, "SELECT log_path FROM servers WHERE status='failed'")
    assert len(failed) == 1, after_first["cells"]  # the `ar` server whose engine was killed, and no other
    (dead_log,), = failed
    after_first["dead_row"] = _safe_rows(store, "SELECT status, reason, log_text, diagnosis_json FROM cells "
                                                "WHERE cell_id=?", after_first["dead_cell"])[0]
    after_first["dead_log"] = Path(dead_log)
    second = _run(matrix, store, "--retry-failed")
    try:
        out, err = second.communicate(timeout=900)
    finally:
        if second.poll() is None:
            second.kill()
    assert second.returncode == 0, (err[-3000:], out[-3000:], _safe_rows(
        store, "SELECT label, client_json, status, reason FROM cells WHERE status != 'done'"))
    return {"store": store, "report": tmp / "rep", "first": after_first, "stderr": err}


def test_the_killed_engines_cell_is_failed_with_its_whole_log(workload: dict[str, Any]) -> None:
    first = workload["first"]
    status, reason, log_text, diag = first["dead_row"]
    assert status == "failed" and "server exited" in reason
    assert first["dead_log"].name.endswith("-boot1.log")
    assert log_text == first["dead_log"].read_text()  # all of it
    assert "vllm" in log_text.lower()
    assert json.loads(diag)["status"] in ("started", "failed", "unknown")
    assert not pid_alive(first["ar_pgid"])


def test_sigkill_of_the_runner_stops_its_booting_engine_and_the_resume_reruns_only_what_is_unfinished(
        workload: dict[str, Any]) -> None:
    before, store = workload["first"]["cells"], workload["store"]
    dead = next(k for k, v in before.items() if v[0] == workload["first"]["dead_cell"])
    kept = next(k for k in before if k[0] == "ar" and k != dead)
    assert before[kept][1:3] == ("done", 1) and before[dead][1] == "failed"
    assert {before[("self-draft", c)][1] for c in ("chat", "code")} == {"pending"}  # never started
    assert not workload["first"]["sd_left"]  # the engine died with the killed runner (matrix/watchdog.py)...
    assert "left by an interrupted run" not in workload["stderr"]  # ...so the next run had nothing to stop
    now = _cells(store)
    assert now[kept] == before[kept]  # kept, not re-run
    assert now[dead][1:3] == ("done", 2)  # failed, re-run once
    assert all(now[("self-draft", c)][1:3] == ("done", 1) for c in ("chat", "code"))
    logs = sorted(p.name.rsplit("-", 1)[1] for p in (store.parent / "r-logs").glob("*.log"))
    assert logs == ["boot1.log", "boot1.log", "boot2.log", "boot2.log"]  # ar twice, self-draft twice (one killed)


def test_dataset_categories_sampling_and_repeats_on_the_local_engine(workload: dict[str, Any]) -> None:
    store, out = workload["store"], workload["report"]
    cells = rows(store, "SELECT label, status, client_json, metrics_json FROM cells")
    cats = {r[0] for r in rows(store, "SELECT DISTINCT category FROM requests")}
    reps = {r[0] for r in rows(store, "SELECT DISTINCT repeat FROM requests")}
    assert len(cells) == 4 and all(status == "done" for _, status, _, _ in cells)
    assert cats == {"chat", "code"} and reps == set(range(REPEATS))
    for label, _, client, metrics in cells:
        c, m = json.loads(client), json.loads(metrics)
        assert c["temperature"] == 0.7 and c["repeats"] == REPEATS
        assert m["spread"]["repeats"] == REPEATS and m["spread"]["metrics"]["output_throughput"]["ci95"]
        if label == "self-draft":
            # at temperature 0.7 vLLM's drafter proposes its argmax and the target accepts it with the target's
            # probability, small for a random-weight model (measured: 1.0, nothing accepted); the greedy demo run
            # shows every draft accepted (test_report_demo.py)
            assert m["accept_length_source"] == "vllm_metrics" and m["accept_length_mean"] >= 1.0
            assert m["speedup"] is not None
    rep = subprocess.run([sys.executable, "-m", "specbench", "report", str(store), "--out", str(out)],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert rep.returncode == 0, rep.stderr
    md = (out / "report.md").read_text()
    section = md.split("## Per category", 1)[1].split("\n## ", 1)[0]
    lines = [ln for ln in section.splitlines() if ln.startswith("| self-draft")]
    assert {r.split("|")[4].strip() for r in lines} == {"chat", "code"}  # one speculative row per category
    assert all("[" in r.split("|")[-2] for r in lines)  # its speedup with the 95% interval over the repeats


def test_vllm_streams_token_ids_that_agree_with_its_usage(workload: dict[str, Any]) -> None:
    store = workload["store"]
    measured = REQUESTS * REPEATS  # every repeat's requests, pooled; the warm-up is not measured
    for label, status, reason, metrics_json in rows(store, "SELECT label, status, reason, metrics_json FROM cells"):
        assert status == "done", (label, reason)
        x = json.loads(metrics_json)
        assert x["count_sources"] == {"token_ids": measured}, label
        assert x["total_output_tokens"] == measured * OUTPUT == x["server_output_tokens_total"], label
        assert x["running_cap"] == CAP and x["running_cap_source"].startswith("log:"), label  # --max-num-seqs 2
        assert x["effective_concurrency"] == CAP and x["queued"] is True, label
        # the embedded engine runs with VLLM_SERVER_DEV_MODE=1: the route is mounted and every run starts emptied
        assert x["prefix_cache_reset"]["how"].startswith("/reset_prefix_cache: HTTP 200"), label
        assert x["prefix_cache_reset"]["reset"] is True, label
    reqs = rows(store, "SELECT output_tokens, server_output_tokens, counted_tokens, count_source FROM requests")
    assert len(reqs) == 4 * measured
    assert set(reqs) == {(OUTPUT, OUTPUT, OUTPUT, "token_ids")}


def test_long_prompts_are_clamped_to_exactly_what_vllm_counts(workload: dict[str, Any]) -> None:
    """The `code` prompts ask more than the context holds with their output: each is cut to CONTEXT - OUTPUT tokens
    by the model's own tokenizer and chat template, and vLLM's usage.prompt_tokens (what the store keeps) agrees."""
    store = workload["store"]
    for category, clamp_json in rows(store, "SELECT json_extract(client_json, '$.category'), clamp_json FROM cells"):
        clamp = json.loads(clamp_json)
        assert clamp["context_len"] == CONTEXT
        if category == "code":
            assert clamp["clamped"] and (clamp["prompt_tokens"], clamp["output_tokens"]) == (CLAMPED, OUTPUT), clamp
        else:
            assert not clamp["clamped"], clamp
    served = {p for p, in rows(store, "SELECT prompt_tokens FROM requests WHERE category='code'")}
    assert served == {CLAMPED}
