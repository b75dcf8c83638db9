"""`specbench report` on a 20,000-cell store: wall time and peak RSS, this checkout side by side with an older one.

    python benchmarks/report_scale.py [--concurrencies 100] [--old-ref f125733] [--keep DIR] [--done-logs]

Builds a synthetic store (specbench/testing/synthetic.py: 4 TP sizes x 50 configurations x 100 concurrencies = 20,000
cells, 16 requests each, runner-derived keys filled as `specbench run` leaves them; done cells carry no log, as
`specbench run` stores none for them; `--done-logs` gives each one, and the report then writes 20,000 log files), then runs `specbench report` on
it in a fresh process per code path and reports seconds and the child's peak resident memory (getrusage
ru_maxrss). `--old-ref` takes the sources of that git revision (`git archive`) for the side-by-side run. Target
(issue 23): under 10 s and 500 MiB. Not a test: the figures go to benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def build(path: Path, concurrencies: int, done_logs: bool = False) -> Path:
    sys.path.insert(0, str(ROOT / "src"))
    from specbench.matrix.runner import fill_speedups
    from specbench.matrix.store import Store
    from specbench.testing.synthetic import write_store

    labels = ("ar", *(f"ddtree-b{i}" for i in range(1, 50)))
    write_store(path, tps=(1, 2, 4, 8), labels=labels, concurrencies=tuple(range(1, concurrencies + 1)),
                failing_server=None, failing_cell=None, done_logs=done_logs)
    with Store(path) as st:
        fill_speedups(st)  # what a finished `specbench run` leaves in the store
    return path


def run_report(src: Path, store: Path, out: Path, pyc: Path) -> tuple[float, float, float, int]:
    """(wall seconds, CPU seconds, peak RSS MiB of the child, return code) of `specbench report STORE --out OUT`
    (CPU seconds: what a busy shared machine does not inflate). Bytecode is compiled beforehand into `pyc` (as for
    an installed package; this machine sets PYTHONDONTWRITEBYTECODE=1, which would compile every module each run)."""
    env = {**os.environ, "PYTHONPATH": str(src), "MPLBACKEND": "Agg", "PYTHONPYCACHEPREFIX": str(pyc)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(src)], env=env, check=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    code = f"import resource, runpy, sys; sys.argv = ['specbench', 'report', {str(store)!r}, '--out', {str(out)!r}]\n" \
           "try:\n    runpy.run_module('specbench', run_name='__main__')\nexcept SystemExit as e:\n" \
           "    code = e.code\nelse:\n    code = 0\n" \
           "r = resource.getrusage(resource.RUSAGE_SELF)\n" \
           "print('MAXRSS_KB', r.ru_maxrss, r.ru_utime + r.ru_stime, file=sys.stderr)\nsys.exit(code)"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    secs = time.perf_counter() - t0
    line = next((ln.split() for ln in r.stderr.splitlines() if ln.startswith("MAXRSS_KB")), None)
    rss = int(line[1]) if line else resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss - before
    cpu = float(line[2]) if line else float("nan")
    if r.returncode:
        print(r.stderr[-2000:], file=sys.stderr)
    return secs, cpu, rss / 1024.0, r.returncode


def old_sources(ref: str, into: Path) -> Path:
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "src"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "src"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrencies", type=int, default=100, help="concurrencies per configuration (100: 20,000 cells)")
    ap.add_argument("--old-ref", default=None, help="git revision to run side by side (e.g. f125733)")
    ap.add_argument("--done-logs", action="store_true",
                    help="give every done cell a log (specbench run keeps logs of failed/partial cells only): the "
                         "report then writes 20,000 log files, kernel time on a slow file system")
    ap.add_argument("--keep", type=Path, default=None, help="folder for the store and the reports (default: a temp dir)")
    a = ap.parse_args()
    work = a.keep or Path(tempfile.mkdtemp(prefix="report-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    store = work / ("scale-logs.db" if a.done_logs else "scale.db")
    if not store.exists():
        t0 = time.perf_counter()
        build(store, a.concurrencies, a.done_logs)
        print(f"built {store} in {time.perf_counter() - t0:.1f} s ({store.stat().st_size / 2**20:.0f} MiB)")
    paths = [("this checkout", ROOT / "src")]
    if a.old_ref:
        paths.append((a.old_ref, old_sources(a.old_ref, work / f"old-{a.old_ref}")))
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"{'code':<16} {'wall s':>8} {'CPU s':>8} {'peak RSS MiB':>13}  rc")
    for name, src in paths:
        out = work / f"report-{name.replace(' ', '-')}"
        secs, cpu, rss, rc = run_report(src, store, out, work / f"pyc-{name.replace(' ', '-')}")
        print(f"{name:<16} {secs:8.1f} {cpu:8.1f} {rss:13.0f}  {rc}", flush=True)


if __name__ == "__main__":
    main()
