"""Shared by the packed / Ray / identity / dataset / repeats run tests: a real tokenizer, a matrix of stand-in
engines, a matrix of the instant server, the CLI as a subprocess, store rows, waits on the store, and the store
compared cell for cell (timings left out)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from paths import ROOT


def make_tokenizer(d: Path) -> Path:
    from specbench.models_gen.tokenizer import TokenizerSpec, train_tokenizer, write_tokenizer

    spec = TokenizerSpec(vocab_size=1024, corpus_lines=1500)
    write_tokenizer(train_tokenizer(spec), spec, d)
    return d


def _matrix_head(name: str, cmd: list[str], port: int, tok: Path, *, ready_s: float, stop_s: float,
                 host: str | None = None) -> str:
    """The top of a test matrix: an `openai` engine launched as `cmd` on `port` (and `host` when given), and its
    [timeouts]."""
    return f"""
name = "{name}"
engine = "openai"
command = {json.dumps(cmd)}
{f'host = "{host}"' if host is not None else ""}
port = {port}
tokenizer = "{tok}"

[timeouts]
ready_s = {ready_s}
stop_s = {stop_s}
port_free_s = 10
"""


# one autoregressive server and one small closed-loop cell: the body after a _matrix_head (and its [server.env])
ONE_AR_CELL = """
[[server.spec]]
label = "ar"

[client]
concurrency = 1
prompt_tokens = 24
output_tokens = 8
num_requests = 2
warmup_requests = 0
"""


def standin_matrix(path: Path, port: int, tok: Path, *, tp: str = "[1, 2]", boot_s: float = 0.5,
                   itl_ms: float = 5, specs: int = 3, concurrency: str = "[1, 2]", num_requests: int = 4,
                   stop_s: float = 5, extra_cmd: tuple[str, ...] = ()) -> Path:
    """ar + `specs` speculative variants (accept lengths 2, 3, ...) x tp values: 4 tuples per phase by default."""
    cmd = [sys.executable, "-m", "specbench.testing.standin_server", "--boot-s", str(boot_s), "--burst", "1",
           "--itl-ms", str(itl_ms), *extra_cmd]
    variants = "".join(f"""
[[server.spec]]
label = "spec{a}"
algorithm = "draft_model"
flags = {{ "--accept-length" = {a} }}
""" for a in range(2, 2 + specs))
    path.write_text(_matrix_head("packed", cmd, port, tok, ready_s=60, stop_s=stop_s) + f"""
[server]
tp = {tp}

[[server.spec]]
label = "ar"
{variants}
[client]
concurrency = {concurrency}
prompt_tokens = 24
output_tokens = 16
num_requests = {num_requests}
warmup_requests = 1
""")
    return path


def instant_matrix(path: Path, port: int, tok: Path, client: str, *, name: str,
                   spec3: str = 'flags = { "--accept-length" = 3 }', extra_cmd: tuple[str, ...] = ()) -> Path:
    """The instant server (`specbench.testing.instant_server`, a real subprocess) as two cells: `ar` and `spec3`
    (draft_model; `spec3` is the rest of its [[server.spec]] table), with `client` as the [client] table's body."""
    cmd = [sys.executable, "-m", "specbench.testing.instant_server", "--burst", "1", *extra_cmd]
    path.write_text(_matrix_head(name, cmd, port, tok, ready_s=30, stop_s=5) + f"""
[[server.spec]]
label = "ar"

[[server.spec]]
label = "spec3"
algorithm = "draft_model"
{spec3}

[client]
{client}
""")
    return path


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specbench", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=env)


def cli_tty(*args: str, timeout: float = 180) -> tuple[subprocess.CompletedProcess[str], str]:
    """The CLI with its stderr on a pseudo-terminal, so its progress display is on as a user sees it (250 columns):
    the result (stdout captured; its stderr None) and what the terminal showed, the ANSI control codes removed."""
    import os
    import pty
    import re
    import threading

    master, slave = pty.openpty()
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                b = os.read(master, 65536)
            except OSError:  # the other end closed (EIO): the CLI exited
                return
            if not b:
                return
            chunks.append(b)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        r = subprocess.run([sys.executable, "-m", "specbench", *args], stdout=subprocess.PIPE, stderr=slave,
                           text=True, timeout=timeout, cwd=ROOT, env={**os.environ, "COLUMNS": "250"})
    finally:
        os.close(slave)
        reader.join(10)
        os.close(master)
    shown = b"".join(chunks).decode(errors="replace")
    return r, re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\r", "", shown)


def rows(store: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(store, timeout=30)
    try:
        return list(conn.execute(sql, params))
    finally:
        conn.close()


def wait(pred: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            got = pred()
        except sqlite3.OperationalError:  # the table is not there yet
            got = None
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def comparable(store: Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Cells (ids, server, settings, client, status, reason, attempts, request count) and servers (ids, settings,
    command, env, verdict, status), in store order; timings (and the boot's ready_s) left out."""
    cells = []
    for cid, sid, ph, tp, alg, label, sj, cj, st, reason, att in rows(
            store, "SELECT cell_id, server_id, phase, tp, algorithm, label, server_json, client_json, status, reason, "
                   "attempts FROM cells ORDER BY rowid"):
        server = json.loads(sj)
        server.get("effective", {}).pop("ready_s", None)
        (n,), = rows(store, "SELECT count(*) FROM requests WHERE cell_id=?", cid)
        cells.append((cid, sid, ph, tp, alg, label, server, json.loads(cj), st, reason, att, n))
    servers = rows(store, "SELECT server_id, phase, tp, settings_json, command_json, env_json, verdict, status "
                          "FROM servers ORDER BY rowid")
    return cells, servers


def placements(store: Path) -> list[dict[str, Any]]:
    out = []
    for sid, phase, started, ended, info, log in rows(
            store, "SELECT server_id, phase, started_at, ended_at, server_info_json, log_text FROM servers"):
        out.append({"server_id": sid, "phase": phase, "started": started, "ended": ended,
                    "placement": json.loads(info)["placement"], "log": log})
    return out


def served(port: int) -> int:
    """Requests a server on 127.0.0.1:`port` has finished (`vllm:request_success_total`, read with the project's
    Prometheus parser); 0 while it is not up."""
    import urllib.request

    from specbench.engines.prometheus import counter, samples

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            text = r.read().decode()
    except OSError:
        return 0
    return int(counter(samples(text), "vllm:request_success"))
