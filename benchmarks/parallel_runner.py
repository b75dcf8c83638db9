"""Serial vs packed vs Ray: the incident matrix's structure on 8 simulated GPUs, wall time of `specbench run`.

The matrix: examples/qwen36-27b-dflash-ddtree.toml expanded (its tp phases 1, 4, 8; its 5 server variants per
phase, every one launched or fixed by the planner; its 8 cells per tuple: 4 concurrencies x 2 prompt lengths),
run with the stand-in engine (specbench.testing.standin_server) instead of SGLang, every duration scaled by
SCALE so the three runs take a few minutes together:
- boot: from the recorded SGLang 0.5.15.post1 boots on the H200 (tests/data/sglang-0.5.15.post1/*.log, first
  timestamped line to "The server is fired up and ready to roll!"): Qwen3.6-27B tp1 boots for tp=1; the tp2
  boots for tp=4 and tp=8 (no tp4/tp8 boot is recorded: the nearest one);
- cells: from the H200 run fixture store (tests/data/h200-run-sglang-0.5.15.post1/h200.db, ended_at - started_at
  of its done cells, concurrency 1 and 4): fitted as a + b/c and averaged over the matrix's concurrencies; the
  stand-in gets the ITL that gives that mean (8 requests of 16 tokens: a cell at concurrency c lasts 8/c x 16 x ITL).
Expected ratio from the structure alone: per phase, tuples n, tp, G GPUs: ceil(n / floor(G / tp)) waves of
one tuple's duration; serial / packed = sum(n x T) / sum(waves x T). The runner's own time per tuple (the
stand-in's start, tokenizer load, port and stop waits; spawning a worker in a packed run) is not scaled; it runs in
parallel too when tuples are packed, so the measured ratio can come out above the structure's.

Run: .venv/bin/python benchmarks/parallel_runner.py [--scale 0.015] [--no-ray]
A stand-in nvidia-smi (tests/fake_gpus.py) on PATH gives the 8 GPUs; Ray (the .[ray] extra) runs on a local head
node started here on 127.0.0.1 with --num-gpus 8, stopped at the end (its own process group). No assertions.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

INCIDENT = ROOT / "examples" / "qwen36-27b-dflash-ddtree.toml"
BOOTS = ROOT / "tests" / "data" / "sglang-0.5.15.post1"
H200_STORE = ROOT / "tests" / "data" / "h200-run-sglang-0.5.15.post1" / "h200.db"
GPUS = 8
REQUESTS, OUTPUT = 8, 16
_TS = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")


def boot_seconds(log: Path) -> float | None:
    """First timestamped line to the ready line of one recorded boot; None when it never got ready."""
    first = ready = None
    for line in log.read_text(errors="replace").splitlines():
        m = _TS.match(line)
        if not m:
            continue
        t = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")
        first = first or t
        if "The server is fired up and ready to roll" in line:
            ready = t
            break
    return (ready - first).total_seconds() if first and ready else None


def recorded_boots() -> dict[str, float]:
    """Mean boot seconds of the Qwen3.6-27B recordings: tp1 and tp2."""
    tp1 = [b for p in sorted(BOOTS.glob("q36_27b_mrr*.log")) if (b := boot_seconds(p)) is not None]
    tp2 = [b for p in sorted(BOOTS.glob("q36_27b_tp2_*.log")) if (b := boot_seconds(p)) is not None]
    return {"tp1": sum(tp1) / len(tp1), "tp2": sum(tp2) / len(tp2), "n_tp1": len(tp1), "n_tp2": len(tp2)}


def recorded_cell_mean(concurrencies: list[int]) -> tuple[float, float, float]:
    """(a, b, mean) of cell seconds = a + b / concurrency, fitted on the H200 run's done cells."""
    con = sqlite3.connect(f"file:{H200_STORE}?mode=ro", uri=True)
    by_c: dict[int, list[float]] = {}
    for c_json, start, end in con.execute("SELECT client_json, started_at, ended_at FROM cells WHERE status='done'"):
        by_c.setdefault(int(json.loads(c_json)["concurrency"]), []).append(end - start)
    con.close()
    (c1, d1), (c2, d2) = sorted((c, sum(v) / len(v)) for c, v in by_c.items())[:2]
    b = (d1 - d2) / (1 / c1 - 1 / c2)
    a = d1 - b / c1
    return a, b, sum(a + b / c for c in concurrencies) / len(concurrencies)


def structure() -> tuple[list[int], list[str], list[int], int, int]:
    """tp per phase, variant labels, concurrencies, prompt lengths and launched tuples of the incident matrix."""
    from specbench.matrix.preflight import dry_run
    from specbench.matrix.toml_load import load_matrix

    spec, _ = load_matrix(INCIDENT)
    rows = dry_run(spec)
    tuples = {r["server_id"]: (r["server"]["tp"], r["label"], r["verdict"]) for r in rows}
    tps = sorted({t for t, _, _ in tuples.values()})
    labels = list(dict.fromkeys(lbl for _, lbl, _ in tuples.values()))
    launched = sum(1 for *_, v in tuples.values() if v != "skipped")
    conc = sorted({r["client"]["concurrency"] for r in rows})
    prompts = len({r["client"]["prompt_tokens"] for r in rows})
    return tps, labels, conc, prompts, launched


def expected_ratio(tps: list[int], per_phase: int, tuple_s: dict[int, float]) -> float:
    serial = sum(per_phase * tuple_s[tp] for tp in tps)
    packed = sum(math.ceil(per_phase / (GPUS // tp)) * tuple_s[tp] for tp in tps)
    return serial / packed


def write_matrix(path: Path, tok: Path, port: int, tps: list[int], labels: list[str], conc: list[int],
                 boot_s: dict[int, float], itl_ms: float) -> None:
    cmd = [sys.executable, "-m", "specbench.testing.standin_server", "--burst", "1", "--itl-ms", f"{itl_ms:.3f}"]
    variants = "".join(f'\n[[server.spec]]\nlabel = "{lbl}"\n' + (
        "" if i == 0 else f'algorithm = "draft_model"\nflags = {{ "--accept-length" = {i + 1} }}\n')
        for i, lbl in enumerate(labels))
    overrides = "".join(f'\n[[override]]\nwhen = {{ tp = {tp} }}\nserver = {{ flags = {{ "--boot-s" = '
                        f'{boot_s[tp]:.3f} }} }}\n' for tp in tps)
    path.write_text(f"""name = "incident-standin"
engine = "openai"
command = {json.dumps(cmd)}
port = {port}
tokenizer = "{tok}"
phases = ["tp"]
[timeouts]
ready_s = 120
stop_s = 5
port_free_s = 10
[server]
tp = {json.dumps(tps)}
{variants}
[client]
concurrency = {json.dumps(conc)}
prompt_tokens = [24, 48]
output_tokens = {OUTPUT}
num_requests = {REQUESTS}
warmup_requests = 0
{overrides}""")


def timed_run(matrix: Path, store: Path, env: dict[str, str], *extra: str) -> float:
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "specbench", "run", str(matrix), "--store", str(store),
                        "--no-progress", *extra], env=env, capture_output=True, text=True)
    took = time.monotonic() - t0
    if r.returncode != 0:
        raise SystemExit(f"run {' '.join(extra) or 'serial'} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    return took


def start_ray(env: dict[str, str], tmp: Path) -> tuple[subprocess.Popen[str], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    head = subprocess.Popen([str(Path(sys.executable).with_name("ray")), "start", "--head", "--num-gpus", str(GPUS),
                             "--num-cpus", str(GPUS), "--node-ip-address", "127.0.0.1", "--port", str(port),
                             "--include-dashboard", "false", "--disable-usage-stats", "--temp-dir", str(tmp)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    _, err = head.communicate(timeout=180)
    if head.returncode != 0:
        raise SystemExit(f"ray start failed: {err[-1000:]}")
    return head, f"127.0.0.1:{port}"


def stop_ray(head: subprocess.Popen[str]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(head.pid, sig)
        except ProcessLookupError:
            return
        time.sleep(3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=float, default=0.015, help="recorded seconds x scale = stand-in seconds")
    ap.add_argument("--no-ray", action="store_true")
    args = ap.parse_args()

    import fake_gpus
    from run_helpers import make_tokenizer

    tps, labels, conc, prompts, launched = structure()
    per_phase = launched // len(tps)
    boots = recorded_boots()
    a, b, cell_mean = recorded_cell_mean(conc)
    boot_real = {tp: boots["tp1"] if tp == 1 else boots["tp2"] for tp in tps}
    cells = len(conc) * prompts
    tuple_real = {tp: boot_real[tp] + cells * cell_mean for tp in tps}
    mean_8_over_c = sum(REQUESTS / c for c in conc) / len(conc)
    itl_ms = cell_mean * args.scale / (mean_8_over_c * OUTPUT) * 1000
    expected = expected_ratio(tps, per_phase, tuple_real)

    print(f"matrix: {INCIDENT.name}: phases tp={tps}, {per_phase} tuples per phase ({launched} launched), "
          f"{cells} cells per tuple, {GPUS} GPUs")
    print(f"recorded: boot tp1 {boots['tp1']:.1f} s (mean of {boots['n_tp1']}), tp2 {boots['tp2']:.1f} s "
          f"(of {boots['n_tp2']}); cell = {a:.2f} + {b:.2f}/c s, mean {cell_mean:.1f} s over c={conc}")
    print(f"scale {args.scale}: boot {', '.join(f'tp{tp} {boot_real[tp] * args.scale:.2f} s' for tp in tps)}, "
          f"cell mean {cell_mean * args.scale:.2f} s (ITL {itl_ms:.2f} ms)")
    waves = {tp: math.ceil(per_phase / (GPUS // tp)) for tp in tps}
    print(f"expected serial/packed from the structure: {expected:.2f} (waves per phase {waves})")

    with tempfile.TemporaryDirectory(prefix="specbench-bench-") as d:
        tmp = Path(d)
        env = fake_gpus.install(tmp / "bin")
        env.update({"PYTHONPATH": str(ROOT / "src"), "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"})
        tok = make_tokenizer(tmp / "tok")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        matrix = tmp / "m.toml"
        write_matrix(matrix, tok, port, tps, labels, conc, {tp: boot_real[tp] * args.scale for tp in tps}, itl_ms)
        walls = {"serial": timed_run(matrix, tmp / "serial.sqlite", env)}
        walls["packed"] = timed_run(matrix, tmp / "packed.sqlite", env, "--gpus", f"0-{GPUS - 1}")
        if not args.no_ray:
            head, address = start_ray(env, tmp / "ray")
            try:
                walls["ray"] = timed_run(matrix, tmp / "ray.sqlite", env, "--executor", "ray", "--address", address)
            finally:
                stop_ray(head)
    for name, wall in walls.items():
        print(f"{name:>6}: {wall:6.1f} s wall   serial/{name} = {walls['serial'] / wall:.2f}")
    print(f"expected serial/packed (structure): {expected:.2f}")


if __name__ == "__main__":
    main()
