"""CLI latency: whole-process wall time of a few `specbench` commands, this tree (A) against a baseline commit (B).

The baseline (default f125733, before issue 24's lazy Hub import; 7df77e7 is before the lazy command table) is checked out into a temporary `git worktree`;
each run is `python -m specbench ...` with PYTHONPATH pointing at that tree's src, from process start to exit.
Runs alternate A B A B so that load from other processes on the machine falls on both sides alike. Printed per
command: median, min and max wall time over N runs (ms), the median CPU time (user + system, from
getrusage of the child), the ratio of the wall medians B/A, and how many modules the command imports on each side
(one more, untimed run: `len(sys.modules)` at exit).

Bytecode: by default each tree gets its own PYTHONPYCACHEPREFIX in a temporary folder, warmed by the first
(untimed) runs, as for an installed package; `--no-pyc` compiles every module on every run instead
(PYTHONDONTWRITEBYTECODE=1, what a checkout without __pycache__ costs).

Wall time on this shared 2-core machine moves with the other sessions' load; the instruction count of one run
does not, and is what a change is judged by (benchmarks/RESULTS.md "specbench plan under 250 ms"):

    export PYTHONPYCACHEPREFIX=/tmp/pyc; unset PYTHONDONTWRITEBYTECODE   # one plain run first, to cache bytecode
    PYTHONPATH=src valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.out -q .venv/bin/python -m specbench \
        plan -- python -m sglang.launch_server --model-path Qwen/Qwen3-8B --tp 1 >/dev/null; grep -m1 summary /tmp/cg.out

Run: .venv/bin/python benchmarks/cli_latency.py [--runs 20] [--baseline f125733] [--no-pyc]
Standard library only; no timing assertion anywhere (tests check behaviour, this prints numbers).
"""

from __future__ import annotations

import argparse
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

ROOT = Path(__file__).resolve().parent.parent
DOCTOR_LOG = ROOT / "tests" / "data" / "logs" / "journal-incident-restart.log"
PLAN_CMD = ["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", "--tp", "1"]

CASES: list[tuple[str, list[str]]] = [
    ("plan -- <sglang Qwen3-8B tp1>", ["plan", "--", *PLAN_CMD]),
    ("--help", ["--help"]),
    (f"doctor {DOCTOR_LOG.name} --json", ["doctor", str(DOCTOR_LOG), "--json"]),
]


def _env(tree: Path, pyc_dir: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree / "src")
    env.pop("PYTHONPYCACHEPREFIX", None)
    if pyc_dir is None:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(pyc_dir)
    env["COLUMNS"] = "100"
    return env


def _cpu_children() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _once(python: str, args: list[str], tree: Path, env: dict[str, str]) -> tuple[float, float, int, str]:
    """Wall time and CPU time (user + system) of one whole `python -m specbench ...` process."""
    c0 = _cpu_children()
    t0 = time.perf_counter()
    r = subprocess.run([python, "-m", "specbench", *args], cwd=tree, env=env, capture_output=True,
                       text=True)
    dt = time.perf_counter() - t0
    return dt, _cpu_children() - c0, r.returncode, r.stdout + r.stderr


COUNT = """
import sys
from specbench.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
sys.stderr.write(f"\\nMODULES {len(sys.modules)}\\n")
"""


def _modules(python: str, args: list[str], tree: Path, env: dict[str, str]) -> int | None:
    """How many modules one `specbench ...` run has imported when it exits."""
    r = subprocess.run([python, "-c", COUNT, *args], cwd=tree, env=env, capture_output=True, text=True)
    counts = [int(line.split()[1]) for line in r.stderr.splitlines() if line.startswith("MODULES ")]
    return counts[-1] if counts else None


def _floor(python: str, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([python, "-c", "pass"], check=True)
        out.append(time.perf_counter() - t0)
    return out


def _stats(xs: list[float]) -> tuple[float, float, float]:
    return statistics.median(xs) * 1e3, min(xs) * 1e3, max(xs) * 1e3


def _cpu() -> str:
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20, help="timed runs per command and tree (default 20)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed runs per command and tree first (default 2)")
    ap.add_argument("--baseline", default="f125733", help="commit for B (default f125733)")
    ap.add_argument("--python", default=sys.executable, help="interpreter (default: this one)")
    ap.add_argument("--no-pyc", action="store_true", help="compile every module on every run (no bytecode cache)")
    a = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="specbench-cli-latency-"))
    base = tmp / "baseline"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(base), a.baseline],
                   check=True)
    try:
        trees = {"A": ROOT, "B": base}
        envs = {k: _env(t, None if a.no_pyc else tmp / f"pyc-{k}") for k, t in trees.items()}
        rev = {k: subprocess.run(["git", "-C", str(t), "rev-parse", "--short", "HEAD"], capture_output=True,
                                 text=True).stdout.strip() for k, t in trees.items()}
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        print(f"machine: {_cpu()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}; "
              f"python {platform.python_version()}")
        print(f"A = this tree ({rev['A']}{' + uncommitted changes' if dirty else ''}), B = baseline {rev['B']} "
              f"({a.baseline}); {a.runs} runs each, alternating A B; bytecode: "
              f"{'none (PYTHONDONTWRITEBYTECODE=1)' if a.no_pyc else 'cached (PYTHONPYCACHEPREFIX per tree)'}")
        floor = _stats(_floor(a.python, a.runs))
        print(f"floor: `python -c pass` median {floor[0]:.0f} ms (min {floor[1]:.0f}, max {floor[2]:.0f})\n")

        head = (f"{'command':<42} {'A med':>6} {'min':>5} {'max':>5} {'cpu':>5}   "
                f"{'B med':>6} {'min':>5} {'max':>5} {'cpu':>5}   {'B/A':>5}   {'mods A':>6} {'mods B':>6}")
        print(head)
        print("-" * len(head))
        notes = []
        for label, args in CASES:
            outs: dict[str, str] = {}
            for _ in range(a.warmup):
                for k in "AB":
                    _, _, rc, outs[k] = _once(a.python, args, trees[k], envs[k])
                    if rc != 0:
                        notes.append(f"{label}: {k} exited {rc}: {outs[k].strip().splitlines()[-1:]}")
            times: dict[str, list[float]] = {"A": [], "B": []}
            cpu: dict[str, list[float]] = {"A": [], "B": []}
            for _ in range(a.runs):
                for k in "AB":
                    dt, ct, _, _ = _once(a.python, args, trees[k], envs[k])
                    times[k].append(dt)
                    cpu[k].append(ct)
            sa, sb = _stats(times["A"]), _stats(times["B"])
            ca, cb = _stats(cpu["A"])[0], _stats(cpu["B"])[0]
            mods = {k: _modules(a.python, args, trees[k], envs[k]) for k in "AB"}
            print(f"{label:<42} {sa[0]:6.0f} {sa[1]:5.0f} {sa[2]:5.0f} {ca:5.0f}   "
                  f"{sb[0]:6.0f} {sb[1]:5.0f} {sb[2]:5.0f} {cb:5.0f}   {sb[0] / sa[0]:5.2f}   "
                  f"{mods['A'] or '-':>6} {mods['B'] or '-':>6}")
            if outs.get("A") != outs.get("B"):
                notes.append(f"{label}: output of A and B differs")
        print("\n(ms, whole process: wall median, min, max; cpu = median user+system time of the process, which"
              " other load on the machine disturbs less; B/A = ratio of the wall medians; mods = modules imported)")
        for n in notes:
            print(f"note: {n}")
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=False)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
