"""Run the fuzz strategies (tests/fuzz/strategies.py) through the real CLI and print the category table.

    PYTHONPATH=src .venv/bin/python tools/fuzz_report.py [--strategy hostile|plausible|all|pass4] [--n 130]
        [--only config,logs] [--show 5] [--seed 0]

Two strategies: `hostile` (tests/fuzz/strategies.py: garbage values, broken files) and `plausible`
(tests/fuzz/plausible.py: what an operator writes by mistake: valid TOML with one wrong type or unit, real configs
and commands with one field changed, logs of other releases, CRLF / ANSI / multi-rank / cut / gzip logs, stores
with one field changed).

Each example runs in a forked child with a memory cap and a timeout (tests/fuzz/harness.py) and is classified as
a one-line error, correct handling, traceback, hang or silent wrong result. Exit status 1 when any example is a
traceback, a hang or a silent wrong result.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402

from fuzz.harness import run_all, run_case  # noqa: E402
from fuzz.plausible import PLAUSIBLE  # noqa: E402
from fuzz.strategies import CATEGORIES as HOSTILE  # noqa: E402

STRATEGIES = {"hostile": HOSTILE, "plausible": PLAUSIBLE, "all": {**HOSTILE, **PLAUSIBLE}}
CATEGORIES = STRATEGIES["all"]
# Pass 4 (issue 37): fixed lists of plausible-but-wrong inputs, one module per area (tests/fuzz/pass4_<area>.py, each
# `cases(tmp) -> list[Case]` with its oracle written before the run); every case runs, `--n` does not apply
PASS4 = sorted(p.stem for p in (Path(__file__).resolve().parents[1] / "tests" / "fuzz").glob("pass4_*.py"))


def run_pass4(module: str, show: int) -> tuple[Counter[str], list[str]]:
    import importlib
    import tempfile

    mod = importlib.import_module(f"fuzz.{module}")
    runner = getattr(mod, "run", run_case)  # a module whose cases need more than run_case gives (an env) has its own
    with tempfile.TemporaryDirectory(prefix=f"fuzz-{module}-") as tmp:
        counts, bad = run_all(mod.cases(Path(tmp)), runner)
    return counts, [f"{module}: {b[:400]}" for b in bad[:show]]


def run_category(name: str, n: int, seed: int) -> tuple[Counter[str], list[str]]:
    counts: Counter[str] = Counter()
    bad: list[str] = []

    @settings(max_examples=n, deadline=None, database=None, derandomize=seed == 0,
              suppress_health_check=list(HealthCheck), phases=[Phase.generate])
    @given(CATEGORIES[name]())
    def one(case: object) -> None:
        cls, why, _ = run_case(case)  # type: ignore[arg-type]
        counts[cls] += 1
        if cls in ("traceback", "hang", "wrong"):
            bad.append(f"{name}: {cls}: {why} <- {case.what[:300]}")  # type: ignore[attr-defined]

    one()
    return counts, bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--strategy", choices=sorted([*STRATEGIES, "pass4"]), default="hostile")
    ap.add_argument("--n", type=int, default=120, help="examples per category (default 120: 600 hostile, 720 "
                                                       "plausible)")
    ap.add_argument("--only", default="", help="comma-separated categories")
    ap.add_argument("--show", type=int, default=10, help="failing examples to print per category")
    ap.add_argument("--seed", type=int, default=0, help="0: the same examples every run")
    a = ap.parse_args()
    pool = PASS4 if a.strategy == "pass4" else STRATEGIES[a.strategy]
    names = [c for c in (a.only.split(",") if a.only else pool)]
    rows, problems, t0 = [], [], time.monotonic()
    for name in names:
        counts, bad = run_pass4(name, a.show) if name in PASS4 else run_category(name, a.n, a.seed)
        rows.append((name, counts))
        problems += bad[: a.show]
    head = f"{'category':14} {'inputs':>7} {'one-line errors':>16} {'correct':>8} {'tracebacks':>11} {'hangs':>6} " \
           f"{'silent wrong':>13}"
    print(head)
    total: Counter[str] = Counter()
    for name, c in rows:
        total.update(c)
        print(f"{name:14} {sum(c.values()):7} {c['error']:16} {c['correct']:8} {c['traceback']:11} {c['hang']:6} "
              f"{c['wrong']:13}")
    print(f"{'total':14} {sum(total.values()):7} {total['error']:16} {total['correct']:8} {total['traceback']:11} "
          f"{total['hang']:6} {total['wrong']:13}   ({time.monotonic() - t0:.0f} s)")
    for p in problems:
        print(p)
    return 1 if total["traceback"] or total["hang"] or total["wrong"] else 0


if __name__ == "__main__":
    sys.exit(main())
