"""Step-cost model accuracy out of sample, and `predict` speed.

1. Leave one store out over every recorded store (issue 35): each store's speculative cells are predicted by a
   calibration fitted on the other stores only (no label, drafter or boot of the store in the fit), with their own
   measured accept length; the table is the speedup error, the stated interval and whether the measured speedup lies
   inside it, and the prediction's state. Goal: median |error| <= 7 %, max <= 15 %, >= 90 % inside, at c <= 32.
   (Leaving out one label of a store, issue 25's figure, kept the store's other labels in the fit: interpolation.)
2. A GPU absent from the calibration: every H100 store predicted from the H200 stores only (also split by what
   else the cell lies outside of: the H200 stores ran no DFlash, tree, FP8 KV or long prompt), and every H200 store
   from the H100 stores only. A prompt length
   absent from it: the stores with prompts above 1,024 tokens predicted from the others (those stores also hold
   every DFlash, tree and FP8-KV cell), and cell by cell: every cell above 1,024 tokens predicted from every cell at
   or below. Goal: every measured speedup inside its interval, each interval narrower than a factor 2.
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

from specbench.predict.api import StoredPrediction, calibrate_observations, leave_one_store_out, predict_speculative
from specbench.predict.calibration import shipped
from specbench.predict.observe import all_observations
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


def _row(r: StoredPrediction) -> str:
    e = r.speedup_error
    if e is None or r.speedup is None or r.obs.speedup is None or r.speedup_lo is None or r.speedup_hi is None:
        return f"| {Path(r.obs.store).name} | {r.obs.label} | {r.obs.shape.concurrency} | - | - | - | - | - | - |"
    return (f"| {Path(r.obs.store).name} | {r.obs.label} | {r.obs.shape.concurrency} | {r.obs.shape.prompt_tokens} | "
            f"{r.obs.speedup:.3f} | {r.speedup:.3f} [{r.speedup_lo:.2f}, {r.speedup_hi:.2f}] | {100 * e:+.1f} % | "
            f"{'yes' if r.inside else '**no**'} | {r.state}{': ' + '; '.join(r.outside) if r.outside else ''} |")


def _summary(name: str, rows: list[StoredPrediction]) -> None:
    sel = [r for r in rows if r.speedup_error is not None and r.obs.shape.concurrency <= C_MAX]
    if not sel:
        return
    errs = sorted(abs(r.speedup_error or 0.0) for r in sel)
    inside = sum(1 for r in sel if r.inside)
    widths = [(r.speedup_hi or 0) / (r.speedup_lo or 1) for r in sel]
    print(f"{name}: c <= {C_MAX}: n = {len(errs)}, median |error| {100 * statistics.median(errs):.1f} %, max "
          f"{100 * errs[-1]:.1f} %, inside the interval {inside} / {len(sel)} ({100 * inside / len(sel):.0f} %), "
          f"interval width (hi / lo) median {statistics.median(widths):.2f}x, max {max(widths):.2f}x")


def _only_gpu_prompt_batch(r: StoredPrediction) -> bool:
    """The cell lies outside its calibration only in GPU, prompt length and batch (trust.py's phrases)."""
    return all(w.startswith(("GPU ", "prompt ", "batch ")) for w in r.outside)


def _held_out(train: list[str], test: list[str]) -> list[StoredPrediction]:
    obs = all_observations(train)
    cal = calibrate_observations(obs, train)
    return [p for store in test for p in predict_speculative(cal, all_observations([store]))]


HEADER = ("| store | config | c | prompt | measured speedup | predicted [interval] | error | inside | state |\n"
          "|---|---|---|---|---|---|---|---|---|")


def _section(title: str, rows: list[StoredPrediction], name: str) -> None:
    """One section of the report: its title, the table of its cells and the summary line."""
    print(f"\n### {title}\n")
    print(HEADER)
    for r in rows:
        print(_row(r))
    print()
    _summary(name, rows)


def accuracy(stores: list[str]) -> None:
    rows = leave_one_store_out(stores)
    print("### Leave one store out\n")
    print(HEADER)
    for r in rows:
        print(_row(r))
    print()
    _summary("all stores", rows)
    artifacts = [o for o in all_observations(stores) if o.stand_in]
    if artifacts:
        print(f"\nnot judged nor fitted: {len(artifacts)} cells a stand-in's artifact measured (observe.py::fitted), "
              f"{', '.join(sorted({f'{Path(o.store).name} {o.label}' for o in artifacts}))}: {artifacts[0].stand_in}\n")
    for state in ("calibrated", "extrapolated"):
        _summary(f"  {state} cells", [r for r in rows if r.state == state])
    for st in dict.fromkeys(r.obs.store for r in rows):
        _summary(f"  {Path(st).name}", [r for r in rows if r.obs.store == st])
    gpu = {s: all_observations([s])[0].key.gpu for s in stores if all_observations([s])}
    h200 = [s for s in stores if gpu.get(s) == "H200"]
    h100 = [s for s in stores if gpu.get(s) == "H100"]
    if h200 and h100:
        rows = _held_out(h200, h100)
        _section("A GPU absent from the calibration: the H100 stores from the H200 stores only", rows,
                 "H100 from H200")
        only = [r for r in rows if _only_gpu_prompt_batch(r)]
        _summary("  cells whose only distances are the GPU, prompt and batch", only)
        _summary("  cells whose only distance is the GPU", [r for r in only if len(r.outside) == 1])
        _summary("  cells also outside in method, tree width, KV dtype, model kind or accept length",
                 [r for r in rows if not _only_gpu_prompt_batch(r)])
        _section("The other way: the H200 stores from the H100 stores only", _held_out(h100, h200), "H200 from H100")
    longest = {s: max(o.shape.prompt_tokens for o in all_observations([s])) for s in gpu}
    long = [s for s in gpu if longest[s] > 1024]
    if long:
        _section("A prompt length absent from the calibration: prompts above 1,024 tokens from the rest",
                 _held_out([s for s in gpu if s not in long], long), "long prompts from <= 1,024")
        obs = all_observations(stores)
        short = [o for o in obs if o.shape.prompt_tokens <= 1024]
        cal = calibrate_observations(short, sorted({o.store for o in short}))
        rows = [p for st in dict.fromkeys(o.store for o in obs)
                for p in predict_speculative(cal, [o for o in obs if o.store == st and o.shape.prompt_tokens > 1024])]
        _section("A prompt length absent, cell by cell: every store's cells above 1,024 tokens predicted from every "
                 "store's cells at or below it (each method, tree, KV dtype and GPU calibrated)", rows,
                 "cells above 1,024 tokens from the cells at or below")


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
    # the MoE stores of both routing regimes (dummy weights' routing by token id, SGLang's uniform simulation): each
    # cell's regime is its shape's (model.py::CellShape.routing), so they pool (benchmarks/RESULTS.md, sixth session)
    stores = sys.argv[1:] or [s for pat in ("tests/data/h200-*/*.db", "tests/data/gpu-decide-sglang/*.db",
                                            "tests/data/h100-context-*/*.db", "tests/data/h100-moe-sglang-*/*.db",
                                            "tests/data/h100-moe-uniform-*/*.db", "tests/data/h100-hybrid-*/*.db",
                                            "tests/data/h100-q32b-*/*.db", "tests/data/h100-moe-long-*/*.db")
                              for s in sorted(glob.glob(str(ROOT / pat)))]
    accuracy([str(Path(s).relative_to(ROOT)) if Path(s).is_absolute() else s for s in stores])
    speed()


if __name__ == "__main__":
    main()
