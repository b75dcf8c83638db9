"""Does the decision decide right? Simulated trials of the measurement process the truth server models (issue 34,
"Done when": with a true difference of 10 % or more the decision is correct in >= 95 % of trials and never
wrong-signed; at a true difference of 0 it says tie or undecided in >= 95 %; `repeats = {min, max}` stops).

The process, as the instant truth server (specbench/testing/instant_truth.py) and the runner produce it:
- two configurations, A (AR) and B, with a true throughput ratio r = B / A;
- every repeat of a cell measures `tokens` output tokens in `tokens / (T x drift_boot x noise_run)` seconds:
  noise_run = exp(N(0, cv_run)) (back-to-back noise inside one boot), drift_boot = exp(N(0, cv_boot)) (what a fresh
  boot of the same server changes: placement, clocks, the host's load), one draw per boot;
- the decision is the product's own: each side's pooled throughput and its standard error over the repeats
  (load/spread.py::pooled_rate, the ratio estimator), B against A by decide/verdict.py::compare with the tie margin
  (3 %) and the level of `looks` = max - min + 1 (Bonferroni over the looks), the question's open cells by
  decide/question.py::decide / Decision.open_idents;
- repeats until decided: `min` repeats each, then one more repeat of each open cell per round until none is open or
  the cells reached `max` (matrix/runner.py's rounds).
Boot modes: `across` (every repeat on a fresh boot: repeat_across_boots), `rounds` (the first `min` repeats on one
boot, each later round on a fresh boot: the runner's default), `one` (every repeat on one boot, fixed repeats: what
`repeats = N` measured before; its interval cannot see boot drift).

Outcome per trial: the verdict on the lead metric (throughput) of B against A: for r != 1 "correct" is the right
sign (faster for r > 1), "wrong" the other sign; for r = 1 the good outcomes are tie and undecided.

    .venv/bin/python benchmarks/decide_trials.py [--trials 4000] [--seed 1]
"""

from __future__ import annotations

import argparse
import math
import random
import time
from collections import Counter
from dataclasses import dataclass

from specbench.decide import Arm, decide
from specbench.load import spread as sp

TOKENS = 4096.0  # output tokens per repeat (e.g. 32 requests x 128 tokens)
T_AR = 1000.0  # AR tok/s


@dataclass(frozen=True)
class Condition:
    ratio: float
    cv_run: float
    cv_boot: float
    mode: str  # across | rounds | one
    rmin: int = 2
    rmax: int = 8


class Side:
    """One configuration's repeats: tokens and seconds per repeat, the boot of each."""

    def __init__(self, rng: random.Random, tput: float, c: Condition) -> None:
        self.rng, self.tput, self.c = rng, tput, c
        self.tokens: list[float] = []
        self.secs: list[float] = []
        self.boot_drift = math.exp(rng.gauss(0.0, c.cv_boot))  # the first boot

    def repeat(self, fresh_boot: bool) -> None:
        if fresh_boot:
            self.boot_drift = math.exp(self.rng.gauss(0.0, self.c.cv_boot))
        rate = self.tput * self.boot_drift * math.exp(self.rng.gauss(0.0, self.c.cv_run))
        self.tokens.append(TOKENS)
        self.secs.append(TOKENS / rate)

    def estimate(self) -> sp.Estimate:
        e = sp.pooled_rate(self.tokens, self.secs)
        assert e is not None
        return e


def trial(rng: random.Random, c: Condition) -> tuple[str, int]:
    """(the verdict of B against A, the repeats B ended with)."""
    a, b = Side(rng, T_AR, c), Side(rng, T_AR * c.ratio, c)
    looks = c.rmax - c.rmin + 1 if c.mode != "one" else 1
    for k in range(c.rmin):
        for s in (a, b):
            s.repeat(fresh_boot=(c.mode == "across" and k > 0))
    while True:
        d = decide([Arm("ar", {"throughput": a.estimate()}, is_ar=True, ident="a"),
                    Arm("b", {"throughput": b.estimate()}, ident="b")], looks=looks)
        st = next(s for s in d.standings if s.arm.ident == "b")
        verdict = st.verdict("throughput")
        if verdict == "best":  # B leads: its verdict against A is A's against B, mirrored
            other = next(s for s in d.standings if s.arm.ident == "a").vs_best["throughput"]
            assert other is not None
            verdict = {"slower": "faster", "faster": "slower"}.get(other.verdict, other.verdict)
        open_ = d.open_idents()
        if c.mode == "one" or not open_ or len(b.tokens) >= c.rmax:
            return str(verdict), len(b.tokens)
        for s, ident in ((a, "a"), (b, "b")):
            if ident in open_:
                s.repeat(fresh_boot=True)


def run(c: Condition, trials: int, seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    counts: Counter[str] = Counter()
    reps = 0
    at_max = 0
    for _ in range(trials):
        v, n = trial(rng, c)
        counts[v] += 1
        reps += n
        at_max += n >= c.rmax
    share = {k: counts[k] / trials for k in ("faster", "slower", "tie", "undecided")}
    if c.ratio == 1.0:
        good, wrong = share["tie"] + share["undecided"], share["faster"] + share["slower"]
    else:
        right = "faster" if c.ratio > 1 else "slower"
        good, wrong = share[right], share["slower" if right == "faster" else "faster"]
    return {**share, "good": good, "wrong": wrong, "mean_repeats": reps / trials, "at_max": at_max / trials}


CONDITIONS = [Condition(r, run_cv, boot_cv, mode)
              for mode in ("across", "rounds", "one")
              for run_cv, boot_cv in ((0.01, 0.0), (0.02, 0.01), (0.02, 0.02), (0.03, 0.03))
              for r in (1.0, 1.10, 1 / 1.10, 1.20)]
# the noisiest case again with room to decide: repeats = {min = 2, max = 12}
CONDITIONS += [Condition(r, 0.03, 0.03, mode, rmax=12) for mode in ("across", "rounds") for r in (1.0, 1.10, 1 / 1.10)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    print(f"{'mode':<7} {'max':>3} {'cv run':>6} {'cv boot':>7} {'true r':>6} {'good':>6} {'wrong':>6} {'tie':>5} "
          f"{'undec':>5} {'reps':>5} {'at max':>6}  target")
    t0 = time.perf_counter()
    for c in CONDITIONS:
        m = run(c, args.trials, args.seed)
        target = ">= 95% tie/undecided" if c.ratio == 1.0 else ">= 95% right sign, 0 wrong"
        met = m["good"] >= 0.95 and (c.ratio == 1.0 or m["wrong"] == 0.0)
        print(f"{c.mode:<7} {c.rmax if c.mode != 'one' else c.rmin:>3} {100 * c.cv_run:>5.0f}% {100 * c.cv_boot:>6.0f}% "
              f"{c.ratio:>6.3f} {100 * m['good']:>5.1f}% "
              f"{100 * m['wrong']:>5.2f}% {100 * m['tie']:>4.0f}% {100 * m['undecided']:>4.0f}% "
              f"{m['mean_repeats']:>5.2f} {100 * m['at_max']:>5.0f}%  {target}: {'met' if met else 'NOT met'}")
    print(f"{len(CONDITIONS)} conditions x {args.trials} trials in {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
