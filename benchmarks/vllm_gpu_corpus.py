"""The public vLLM GPU logs of tests/data/vllm-gpu-corpus/ against the planner's vLLM GPU rules, and the vLLM part of
the command corpus (tests/data/command_corpus/) scored.

    PYTHONPATH=src python benchmarks/vllm_gpu_corpus.py [--json]

Log checks, each run only on the logs that print what it needs (tests/data/vllm-gpu-corpus/README.md):
  pool       "GPU KV cache size" planned from the log's own "Available KV cache memory" (--kv-cache-memory-bytes K):
             tokens within 5%
  requested  "Desired GPU memory utilization is (u, R GiB)" / "(u, R GiB)" of the start check from the planner's
             total for the card: R within 5%
  budget     "Available KV cache memory" from the planner's R and CUDA-graph estimate minus the terms the log states
             (weights or consumed memory, activation peak, non-torch): within 5%
  graph      "Estimated CUDA graph memory" against the planner's estimate for the launch: the ratio (reported)
  cold       "Available KV cache memory" planned from the command alone: the error (reported)
Command corpus (vLLM entries, the same set before and after a change): the model resolved offline (bundled configs
only), the stated outcome (started / failed) and the stated numbers within 5%.

Only the planner's public entry point (specbench.plan.api.plan_command) and its JSON keys are used, so the same
script measures an older tree (PYTHONPATH=<other tree>/src) for a before/after table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "tests" / "data" / "vllm-gpu-corpus" / "logs.json"
CORPUS = ROOT / "tests" / "data" / "command_corpus"
GIB = 1 << 30
TOL = 0.05
NON_TORCH_GIB = 0.1
# the card the planner is asked for per log / corpus entry (the catalog's names, specs/gpu.py)
CARDS = {"RTX 5090": "RTX 5090", "RTX 3090": "RTX 3090", "A100 80GB": "A100 80GB", "A100": "A100 80GB",
         "H100 80GB": "H100 80GB", "H100": "H100 80GB", "H100 80GB HBM3": "H100 80GB", "L4": "L4", "H200": "H200",
         "DGX Spark GB10": "DGX Spark GB10", "MI300X": "MI300X", "B200": "B200", "4xB200": "B200", "H20": "H20",
         "8x H20": "H20"}
# a stand-in config for logs whose model has no public config here: the budget terms R and the CUDA-graph
# estimate do not depend on the model's shapes (engines/vllm/gpu_fit.py), only the launch's batch shape
STAND_IN = ROOT / "src" / "specbench" / "data" / "configs" / "Qwen__Qwen3.6-27B-bf16-derived.json"


def _plan(cmd: str, gpu: str | None, version: str | None, config: str | None) -> dict[str, Any] | None:
    from specbench.contracts_inputs import PlanOptions
    from specbench.errors import UserError
    from specbench.plan.api import plan_command

    opts = PlanOptions(gpu=gpu or "H200", engine_version=version, model_config=config, fixes=False)
    try:
        return plan_command(cmd, opts)
    except UserError as exc:
        return {"status": "refused", "error": str(exc)}


def _within(got: float | None, want: float) -> bool:
    return got is not None and want != 0 and abs(got - want) / abs(want) <= TOL


def _release(e: dict[str, Any]) -> str | None:
    v = e.get("version")
    return v.split("rc")[0].split(".dev")[0] if v else None


def _cmd(e: dict[str, Any], extra: str = "") -> str:
    """The launch planned for a log: its command, else a stand-in model at the log's TP with the batch shape the
    record assumes (`launch_assumed`, said in its `assumption_note`)."""
    base = e.get("command") or f"vllm serve stand-in -tp {e.get('tp') or 1} {e.get('launch_assumed') or ''}".strip()
    if e.get("u") is not None and "--gpu-memory-utilization" not in base:
        base += f" --gpu-memory-utilization {e['u']}"
    return base + extra


def _config(e: dict[str, Any]) -> str:
    return str(ROOT / (e.get("config") or e.get("stand_in_config") or STAND_IN.relative_to(ROOT)))


def _transient(lg: dict[str, Any]) -> float | None:
    """The activation peak without the CUDA-graph estimate (the 0.3x summary line folds it in)."""
    if "peak_activation_gib" not in lg:
        return None
    extra = lg.get("cuda_graph_estimate_gib") or 0.0 if lg.get("peak_includes_graph_estimate") else 0.0
    return lg["peak_activation_gib"] - extra


def _row(e: dict[str, Any], check: str, want: float, got: float | None, scored: bool = True) -> dict[str, Any]:
    """One check; `ok` None when it is reported only (the check's kind, or the record's `score: false` with its
    `score_note`)."""
    scored = scored and e.get("score", True)
    return {"id": e["id"], "check": check, "want": want, "got": None if got is None else round(got, 4),
            "ok": _within(got, want) if scored else None}


def log_checks(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for e in logs:
        lg, gpu, ver, cfg = e["logged"], CARDS.get(e.get("gpu") or ""), _release(e), _config(e)
        if "available_kv_gib" in lg and "kv_tokens" in lg and e.get("config"):
            K = int(lg["available_kv_gib"] * GIB)
            p = _plan(_cmd(e, f" --kv-cache-memory-bytes {K}"), gpu, ver, cfg) or {}
            rows.append(_row(e, "pool", lg["kv_tokens"], p.get("kv_tokens")))
        if not gpu or e.get("u") is None:
            continue
        p = _plan(_cmd(e), gpu, ver, cfg) or {}
        b = p.get("budget") or {}
        if "requested_gib" in lg:
            rows.append(_row(e, "requested", lg["requested_gib"], b.get("requested_gib")))
        act = _transient(lg)
        if act is not None and b.get("activation_gib") is not None and (e.get("config") or e.get("stand_in_config")):
            rows.append(_row(e, "activation", act, b["activation_gib"]))
        held = lg.get("consumed_gib")  # weights + non-torch, as the 0.3x summary line counts them
        if held is None and lg.get("weights_gib") is not None:
            held = lg["weights_gib"] + lg.get("non_torch_gib", 0.1)
        own_shapes = bool(e.get("config") or e.get("stand_in_config"))  # the activation needs the model's shapes
        if "available_kv_gib" in lg and held is not None and b.get("requested_gib") is not None and own_shapes:
            # the planner's activation + CUDA-graph terms: its non-KV estimate less its non-torch (0.1 GiB,
            # engines/vllm/gpu.py::NON_TORCH_GIB), which the log's own number replaces
            got = b["requested_gib"] - held - (b["non_kv_gib"] - NON_TORCH_GIB)
            rows.append(_row(e, "budget", lg["available_kv_gib"], got))
        if "cuda_graph_estimate_gib" in lg and lg["cuda_graph_estimate_gib"] < 20 and (e.get("command")
                                                                                  or e.get("launch_assumed")):
            rows.append(_row(e, "graph", lg["cuda_graph_estimate_gib"], b.get("cuda_graph_gib"), scored=False))
        if "available_kv_gib" in lg and e.get("command") and e.get("config") and e.get("cold", True):
            got = b.get("kv_cache_memory_bytes")
            rows.append(_row(e, "cold", lg["available_kv_gib"], got / GIB if got is not None else None,
                             scored=False))
    return rows


# ------------------------------------------------------------------------------------------ the command corpus
STATED_KEYS = {"kv_tokens": "kv_tokens", "available_kv_cache_gib": "available_kv_gib",
               "weights_gib_per_gpu": "weights_gib", "max_model_len": "max_model_len"}


def _corpus_entries() -> list[dict[str, Any]]:
    out = []
    for f in sorted(CORPUS.glob("commands*.json")):
        out += [e for e in json.loads(f.read_text()) if e.get("engine") == "vllm"]
    return out


def _corpus_config(e: dict[str, Any]) -> str | None:
    src = e.get("config_source")
    if not src:
        return None
    if src.startswith("bundled:"):
        return src.split(":", 1)[1]
    path = CORPUS / "configs" / Path(src).name
    return str(path) if path.exists() else None


def corpus_score() -> dict[str, Any]:
    entries = _corpus_entries()
    resolved = verdicts = verdict_ok = numbers = numbers_ok = 0
    rows = []
    with tempfile.TemporaryDirectory() as empty:  # no HF cache: bundled configs only ("offline")
        old = {k: os.environ.get(k) for k in ("HF_HOME", "HF_HUB_OFFLINE", "HF_HUB_CACHE")}
        os.environ.update({"HF_HOME": empty, "HF_HUB_OFFLINE": "1"})
        os.environ.pop("HF_HUB_CACHE", None)
        try:
            offline = {e["id"]: _plan(e["command"], CARDS.get(e.get("gpu") or ""), e.get("version"), None)
                       for e in entries}
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    for e in entries:
        off = offline[e["id"]] or {}
        ok_res = off.get("status") in ("ok", "fails")
        resolved += ok_res
        p = _plan(e["command"], CARDS.get(e.get("gpu") or ""), e.get("version"), _corpus_config(e)) or {}
        row = {"id": e["id"], "resolved_offline": ok_res, "status": p.get("status")}
        st = e.get("stated") or {}
        if "started" in st:
            verdicts += 1
            hit = p.get("status") == ("ok" if st["started"] else "fails")
            verdict_ok += hit
            row["verdict_ok"] = hit
        for key, plan_key in STATED_KEYS.items():
            if key in st and isinstance(st[key], (int, float)):
                numbers += 1
                got = p.get(plan_key)
                hit = _within(float(got) if isinstance(got, (int, float, str)) and str(got).replace(".", "", 1)
                              .isdigit() else None, float(st[key]))
                numbers_ok += hit
                row[key] = {"want": st[key], "got": got, "ok": hit}
        rows.append(row)
    return {"entries": len(entries), "resolved_offline": resolved, "verdicts": verdicts, "verdicts_ok": verdict_ok,
            "numbers": numbers, "numbers_within_5pct": numbers_ok, "rows": rows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--corpus-only", action="store_true", help="only the command corpus (for an older tree)")
    a = ap.parse_args()
    out: dict[str, Any] = {"corpus": corpus_score()}
    if not a.corpus_only:
        rows = log_checks(json.loads(LOGS.read_text()))
        checked = [r for r in rows if r["ok"] is not None]
        kv = [r for r in checked if r["check"] in ("pool", "budget")]  # KV cache size / available KV memory
        out["logs"] = {"records": len(json.loads(LOGS.read_text())), "rows": rows,
                       "within_5pct": sum(r["ok"] for r in checked), "checked": len(checked),
                       "kv_within_5pct": sum(r["ok"] for r in kv), "kv_checked": len(kv),
                       "kv_logs": len({r["id"] for r in kv}), "kv_logs_ok": len({r["id"] for r in kv if r["ok"]})}
    if a.json:
        print(json.dumps(out, indent=1, default=str))
        return 0
    if "logs" in out:
        lg = out["logs"]
        print(f"vLLM GPU log corpus: {lg['records']} logs; 5% checks {lg['within_5pct']}/{lg['checked']}; "
              f"KV size / available KV memory {lg['kv_within_5pct']}/{lg['kv_checked']}")
        for r in lg["rows"]:
            mark = "" if r["ok"] is None else (" ok" if r["ok"] else " MISS")
            print(f"  {r['check']:9} {r['id']:48} want {r['want']!s:>10} got {r['got']!s:>10}{mark}")
    c = out["corpus"]
    print(f"command corpus (vLLM): {c['entries']} commands; resolved offline {c['resolved_offline']}; "
          f"verdicts {c['verdicts_ok']}/{c['verdicts']}; numbers within 5% {c['numbers_within_5pct']}/{c['numbers']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
