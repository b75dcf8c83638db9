"""Step-cost model accuracy (leave-one-out) and `predict` speed.

1. Leave-one-out over every recorded store: each speculative configuration (store, label) is predicted by a
   calibration fitted on everything else (its AR cells and the store's other configurations stay in), with its own
   measured accept length; the table is the speedup error per cell. Goal (issue 25): median |error| <= 5 % and
   max <= 15 % at c <= 32.
2. Speed: a 500-cell matrix (Qwen3-30B-A3B on an H200, AR + 9 simulated-acceptance EAGLE3 servers x 50
   concurrencies): the model alone over the dry run's rows, the dry run (planner preflight per server) + model in
   this process, and the whole `specbench predict` process. Goal: predict under 1 s.

Run: .venv/bin/python benchmarks/predict_accuracy.py [STORE ...]   (default: tests/data/h200-*/*.db)
"""

from __future__ import annotations

import glob
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from specbench.predict.api import leave_one_out
from specbench.predict.calibration import shipped
from specbench.predict.plan_matrix import predict_spec

ROOT = Path(__file__).resolve().parents[1]
C_MAX = 32

BIG = """name = "predict-speed-500"
engine = "sglang"
command = ["python3", "-m", "sglang.launch_server", "--model-path", "/tmp/models/q3_30b", "--load-format", "dummy",
           "--attention-backend", "triton"]
[plan]
model_config = "Qwen/Qwen3-30B-A3B"
draft_config = "specforge/qwen3-30B-A3B-eagle3"
gpu = "H200"
engine_version = "0.5.15.post1"
[server]
tp = 1
max_running_requests = 64
context_length = 2048
[[server.spec]]
label = "ar"
[[server.spec]]
label = "eagle3-sim{simulated_accept_len}"
algorithm = "EAGLE3"
draft_model = "DRAFTER"
num_steps = 3
eagle_topk = 1
num_draft_tokens = 4
simulated_accept_len = [1.5, 1.8, 2.1, 2.4, 2.7, 3.0, 3.3, 3.6, 3.9]
[client]
concurrency = [CONCURRENCIES]
prompt_tokens = 512
output_tokens = 128
num_requests = 8
""".replace("CONCURRENCIES", ", ".join(str(c) for c in range(1, 51)))


def accuracy(stores: list[str]) -> None:
    rows = leave_one_out(stores)
    print("| store | config | c | accept | measured speedup | predicted | error |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        e = r.speedup_error
        print(f"| {Path(r.obs.store).name} | {r.obs.label} | {r.obs.shape.concurrency} | {r.obs.accept_len:.2f} | "
              f"{r.obs.speedup:.3f} | {r.speedup:.3f} | {100 * e:+.1f} % |" if e is not None and r.speedup else
              f"| {Path(r.obs.store).name} | {r.obs.label} | {r.obs.shape.concurrency} | - | - | - | - |")
    for name, sel in (("all stores", rows),
                      *((Path(s).name, [r for r in rows if r.obs.store == s]) for s in stores)):
        errs = sorted(abs(r.speedup_error) for r in sel
                      if r.speedup_error is not None and r.obs.shape.concurrency <= C_MAX)
        if errs:
            print(f"{name}: c <= {C_MAX}: n = {len(errs)}, median |error| {100 * statistics.median(errs):.1f} %, "
                  f"max {100 * errs[-1]:.1f} %")


def speed() -> None:
    from specbench.commands.predict import plan_rows
    from specbench.matrix.toml_load import load_matrix

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "big.toml"
        drafter = Path(d) / "q3_30b_eagle3"  # the matrix's drafter folder must exist (matrix/toml_load.py)
        drafter.mkdir()
        shutil.copy(ROOT / "src/specbench/data/configs/specforge__qwen3-30B-A3B-eagle3.json", drafter / "config.json")
        path.write_text(BIG.replace("DRAFTER", str(drafter)), encoding="utf-8")
        spec, _ = load_matrix(path)
        cal = shipped()
        t0 = time.perf_counter()
        rows = plan_rows(spec)
        t_dry = time.perf_counter() - t0
        model = []
        for _ in range(5):
            t0 = time.perf_counter()
            preds = predict_spec(spec, rows, cal)
            model.append(time.perf_counter() - t0)
        assert len(preds) == 500 and all(p.speedup is not None for p in preds), "every cell predicted"
        walls, cpus = [], []
        for _ in range(3):
            c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "specbench", "predict", str(path), "--json"], check=True,
                           capture_output=True, cwd=ROOT)
            walls.append(time.perf_counter() - t0)
            c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime)
    print(f"500 cells ({len({r['server_id'] for r in rows})} servers): model {1e3 * min(model):.1f} ms (best of 5), "
          f"planner per server (no fix search, first call) {1e3 * t_dry:.0f} ms, whole `specbench predict --json` "
          f"process {1e3 * min(walls):.0f} ms wall, {1e3 * min(cpus):.0f} ms CPU (best of 3); "
          f"{platform.python_implementation()} {platform.python_version()}, {platform.machine()}, load average "
          f"{os.getloadavg()[0]:.1f}")


def main() -> None:
    stores = sys.argv[1:] or sorted(glob.glob(str(ROOT / "tests/data/h200-*/*.db")))
    accuracy([str(Path(s).relative_to(ROOT)) if Path(s).is_absolute() else s for s in stores])
    speed()


if __name__ == "__main__":
    main()
