"""Held-out validation of the vLLM GPU fits: every fitted constant refitted without the log it is scored on.

    PYTHONPATH=src python benchmarks/vllm_gpu_kfold.py [--json] [--first N] [--write]

For each log of tests/data/vllm-gpu-corpus/logs.json, the logs of its thread and, when it names its card, every log
of that card are held out; the fitted constants are refitted from the rest with the rules of
engines/vllm/gpu_fit.py (`fit_vllm_totals`, `fit_driver_gap`, `fit_graph_price`, `fit_gdn_copies`), patched in
for that one evaluation, and the held-out log is put to benchmarks/vllm_gpu_corpus.py's checks (pool, requested,
activation, budget scored at 5%; graph, cold reported), and, for the logs printing a capture count N, the price line's
estimate at that N against the logged one (graph_price, reported). A held-out card is priced as a card without a log is:
nvidia-smi's total less the refitted median gap. In-sample: the same checks with the constants fitted on all the
logs given (the shipped ones, for the whole corpus).

Fitted (refitted per fold): VLLM_TOTALS, DRIVER_GAP_MIB, GRAPH_SHARED_GIB, GRAPH_GIB_PER_GRAPH, GDN_FP32_COPIES.
From the engine's code, not refitted: R = ceil(T u), the capture sizes and graph counts, the forward's tensor counts
(HIDDEN_COPIES, MLP_COPIES: the MLP's and the residual stream's tensors, checked against vllm#10517), the dummy
sampler's bytes per logit (SAMPLER_BYTES_PER_LOGIT: its dtypes, checked against vllm#50722), the pool layout; and
NON_TORCH_GIB (0.1 GiB, one measured breakdown outside this corpus).

--first N: only the first N records (the corpus before it grew: 35). --write: store the held-out figures in
engines/vllm/gpu_fit.py (KFOLD, the plan's `budget.terms` expected errors).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.util
import json
import re
import statistics
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench.engines.vllm import gpu_fit

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "tests" / "data" / "vllm-gpu-corpus" / "logs.json"
GPU_FIT = ROOT / "src" / "specbench" / "engines" / "vllm" / "gpu_fit.py"
CHECKS = ("requested", "activation", "budget", "pool", "cold", "graph", "graph_price")
SCORED = ("requested", "activation", "budget", "pool")


def corpus_bench() -> Any:
    spec = importlib.util.spec_from_file_location("vllm_gpu_corpus", ROOT / "benchmarks" / "vllm_gpu_corpus.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@dataclass(frozen=True)
class Fit:
    totals: dict[str, float]
    gap_mib: int
    graph_shared_gib: float
    graph_gib_per_graph: float
    gdn_copies: int


@contextlib.contextmanager
def patched(fit: Fit) -> Iterator[None]:
    """The fitted constants of gpu_fit.py replaced for the duration (the planner reads them at call time)."""
    names = ("VLLM_TOTALS", "DRIVER_GAP_MIB", "GRAPH_SHARED_GIB", "GRAPH_GIB_PER_GRAPH", "GDN_FP32_COPIES")
    old = {n: getattr(gpu_fit, n) for n in names}
    new = {"VLLM_TOTALS": {c: gpu_fit.VllmTotal(g, "k-fold refit") for c, g in fit.totals.items()},
           "DRIVER_GAP_MIB": fit.gap_mib, "GRAPH_SHARED_GIB": fit.graph_shared_gib,
           "GRAPH_GIB_PER_GRAPH": fit.graph_gib_per_graph, "GDN_FP32_COPIES": fit.gdn_copies}
    try:
        for n, v in new.items():
            setattr(gpu_fit, n, v)
        yield
    finally:
        for n, v in old.items():
            setattr(gpu_fit, n, v)


def gdn_points(logs: Sequence[Mapping[str, Any]], bench: Any) -> dict[str, tuple[float, float, float]]:
    """Per log with an activation check on a Gated-DeltaNet model: (the planner's activation at 0 and at 1 fp32
    value copy, the log's transient peak), the input of gpu_fit.fit_gdn_copies."""
    out: dict[str, tuple[float, float, float]] = {}
    old = gpu_fit.GDN_FP32_COPIES
    try:
        acts = []
        for k in (0, 1):
            gpu_fit.GDN_FP32_COPIES = k
            acts.append({r["id"]: (r["got"], r["want"]) for r in bench.log_checks(list(logs))
                         if r["check"] == "activation" and r["ok"] is not None and r["got"] is not None})
    finally:
        gpu_fit.GDN_FP32_COPIES = old
    for i, (a0, want) in acts[0].items():
        a1 = acts[1].get(i, (a0, want))[0]
        if a1 > a0:
            out[i] = (a0, a1, want)
    return out


def refit(logs: Sequence[Mapping[str, Any]], points: Mapping[str, tuple[float, float, float]]) -> Fit:
    totals = gpu_fit.fit_vllm_totals(logs)
    shared, per = gpu_fit.fit_graph_price(logs)
    ids = {e["id"] for e in logs}
    return Fit(totals, gpu_fit.fit_driver_gap(totals), shared, per,
               gpu_fit.fit_gdn_copies([p for i, p in sorted(points.items()) if i in ids]))


def held_out(e: Mapping[str, Any], logs: Sequence[Mapping[str, Any]]) -> set[str]:
    """The ids held out with `e`: its thread's logs, and its card's when it names the card."""
    card = e.get("gpu") if not e.get("gpu_note") else None
    return {o["id"] for o in logs
            if gpu_fit.thread_of(o) == gpu_fit.thread_of(e) or (card and o.get("gpu") == card)}


def price_rows(logs: Sequence[Mapping[str, Any]], fit: Fit, which: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """graph_price: "Estimated CUDA graph memory" from the price line at the log's own capture count N (the graph
    check less the capture-count rules: the price alone), reported."""
    rows = []
    for e in which:
        for n, est in gpu_fit.graph_points([e]):
            got = fit.graph_shared_gib + fit.graph_gib_per_graph * (n - 1)
            rows.append({"id": e["id"], "check": "graph_price", "want": est, "got": round(got, 4), "ok": None})
    return rows


def _error(r: Mapping[str, Any]) -> float | None:
    if r["got"] is None or not r["want"]:
        return None
    return (float(r["got"]) - float(r["want"])) / float(r["want"])


def evaluate(logs: Sequence[Mapping[str, Any]], bench: Any) -> dict[str, list[dict[str, Any]]]:
    """{'in': rows, 'out': rows}: each row a check of one scored log with its relative error."""
    points = gdn_points(logs, bench)
    scored = [e for e in logs if e.get("score") is not False]
    with patched(refit(logs, points)):
        rows_in = bench.log_checks(scored)
    rows_out = []
    for e in scored:
        out = held_out(e, logs)
        fit = refit([o for o in logs if o["id"] not in out], points)
        with patched(fit):
            for r in bench.log_checks([e]):
                rows_out.append({**r, "held_out": len(out), "gdn_copies": fit.gdn_copies,
                                 "gap_mib": fit.gap_mib})
    rows_in += price_rows(logs, refit(logs, points), scored)
    for e in scored:
        out = held_out(e, logs)
        rows_out += [{**r, "held_out": len(out)}
                     for r in price_rows(logs, refit([o for o in logs if o["id"] not in out], points), [e])]
    res = {}
    for key, rows in (("in", rows_in), ("out", rows_out)):
        res[key] = [{**r, "error": _error(r)} for r in rows if r["check"] in CHECKS and _error(r) is not None]
    return res


def summary(rows: Sequence[Mapping[str, Any]], checks: Sequence[str]) -> dict[str, Any]:
    errs = [abs(r["error"]) for r in rows if r["check"] in checks]
    if not errs:
        return {"n": 0}
    return {"n": len(errs), "median_pct": round(100 * statistics.median(errs), 1),
            "max_pct": round(100 * max(errs), 1),
            "within_5pct": round(sum(x <= 0.05 + 1e-9 for x in errs) / len(errs), 2)}


def table(res: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, dict[str, Any]]:
    groups: dict[str, tuple[str, ...]] = {c: (c,) for c in CHECKS}
    groups["kv"] = ("budget", "pool")
    groups["scored"] = SCORED
    return {g: {"in": summary(res["in"], cs), "out": summary(res["out"], cs)} for g, cs in groups.items()}


def write(tab: Mapping[str, Mapping[str, Any]], n_logs: int) -> None:
    """Rewrite gpu_fit.py's KFOLD block (between its BEGIN / END markers) with the held-out figures."""
    lines = ["# BEGIN k-fold (written by benchmarks/vllm_gpu_kfold.py --write)",
             f'KFOLD_DATE = "{datetime.date.today().isoformat()}"',
             'KFOLD_COMMAND = "PYTHONPATH=src python benchmarks/vllm_gpu_kfold.py --write"',
             f"KFOLD_LOGS = {n_logs}", "KFOLD: dict[str, HeldOut] = {"]
    for g, v in tab.items():
        o = v["out"]
        if o.get("n"):
            lines.append(f'    "{g}": HeldOut({o["n"]}, {o["median_pct"]}, {o["max_pct"]}, {o["within_5pct"]}),')
    lines += ["}", "# END k-fold"]
    src = GPU_FIT.read_text()
    new = re.sub(r"# BEGIN k-fold.*?# END k-fold", "\n".join(lines), src, flags=re.S)
    if new == src and "# BEGIN k-fold" not in src:
        raise SystemExit("gpu_fit.py has no '# BEGIN k-fold' block")
    GPU_FIT.write_text(new)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--first", type=int, default=None, help="only the first N records (the corpus before growth)")
    ap.add_argument("--write", action="store_true", help="store the held-out figures in engines/vllm/gpu_fit.py")
    a = ap.parse_args()
    logs = json.loads(LOGS.read_text())[: a.first]
    bench = corpus_bench()
    res = evaluate(logs, bench)
    tab = table(res)
    if a.write:
        write(tab, len(logs))
    if a.json:
        print(json.dumps({"logs": len(logs), "table": tab, "rows": res}, indent=1, default=str))
        return 0
    full = refit(logs, gdn_points(logs, bench))
    print(f"vLLM GPU k-fold (leave one log out, with its thread and its card): {len(logs)} logs; fitted on all: "
          f"gap {full.gap_mib} MiB, graph {full.graph_shared_gib} + {full.graph_gib_per_graph} x (N - 1) GiB, "
          f"GDN copies {full.gdn_copies}, totals {full.totals}")
    print(f"  {'check':10} {'n':>3} {'in: median':>10} {'max':>7} {'<=5%':>5} | {'out: median':>11} {'max':>7} "
          f"{'<=5%':>5}")
    for g, v in tab.items():
        i, o = v["in"], v["out"]
        if not o.get("n"):
            continue
        print(f"  {g:10} {o['n']:>3} {i.get('median_pct', '-')!s:>9}% {i.get('max_pct', '-')!s:>6}% "
              f"{i.get('within_5pct', '-')!s:>5} | {o['median_pct']!s:>10}% {o['max_pct']!s:>6}% "
              f"{o['within_5pct']!s:>5}")
    print("  held out (out-of-sample errors):")
    for r in res["out"]:
        print(f"    {r['check']:10} {r['id']:48} want {r['want']!s:>9} got {r['got']!s:>9} "
              f"{100 * r['error']:+6.1f}%  (held out {r['held_out']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
