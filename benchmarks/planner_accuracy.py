"""Planner accuracy on real logs: every log fixture the planner can evaluate, predicted vs logged.

Sources, all in the repo:
- `tests/data/incident/*.log` (the seed incident rebuilt from the scenario's numbers, SGLang <= 0.5.12 format);
- `tests/data/sglang-*/*.log` (whole logs of real SGLang boots on an H200 with dummy weights; tools/gpu/);
- `tests/data/real-logs-dev.json` (excerpts of public logs): the cases whose config is bundled.
For each: the planner gets the log's measured free memory before load and weights (as `specbench plan
--from-log` does) and predicts KV tokens, Mamba slots and max_running_requests. Prints a table and the share of
cases within 2% (KV tokens) / exact (slots, requests, failure).

Run: .venv/bin/python benchmarks/planner_accuracy.py [--gpu h200]
"""

from __future__ import annotations

import glob
import json
import sys
from pathlib import Path

from specbench.contracts_inputs import PlanOptions
from specbench.doctor.doctor import diagnose_file
from specbench.doctor.replan import facts_for_plan
from specbench.errors import UserError
from specbench.plan.api import plan_command

ROOT = Path(__file__).resolve().parents[1]


def _gpu_for(path: str) -> str:
    return "rtx-pro-6000" if "incident" in path else "h200"


def _recorded_configs(path: str) -> dict:
    """Boot records from tools/gpu/ name the bundled configs the model folders were made from."""
    import re
    text = Path(path).read_text(errors="replace")
    m = re.search(r"^# bundled configs \(src/specbench/data/configs\): (.*)$", text, re.M)
    if not m:
        return {}
    cfg = dict(kv.split("=", 1) for kv in m.group(1).split())
    return {"model_config": cfg.get("model_config", "").removesuffix(".json") or None,
            "draft_config": cfg["draft_config"].removesuffix(".json") if "draft_config" in cfg else None}


def _recorded_argv(path: str) -> list[str] | None:
    import re
    import shlex
    m = re.search(r"^# command: (.*)$", Path(path).read_text(errors="replace"), re.M)
    return shlex.split(m.group(1)) if m else None


def log_cases() -> list[dict]:
    out = []
    for path in sorted(glob.glob(str(ROOT / "tests/data/incident/*.log")) + glob.glob(str(ROOT / "tests/data/sglang-*/*.log"))):
        name = str(Path(path).relative_to(ROOT / "tests/data"))
        try:
            d = diagnose_file(path).to_json()
            f = d["facts"]
            argv = _recorded_argv(path)
            cfg = _recorded_configs(path)
            if argv is not None:  # a device boot record: the exact command, version from the folder name
                version = Path(path).parent.name.removeprefix("sglang-")
                x = {"argv": argv, "engine_version": version, "avail_before_load_gib": f.get("avail_before_load_gib"),
                     "weights_gib": f.get("weights_gib"), "draft_weights_gib": f.get("draft_weights_gib")}
            else:
                x = facts_for_plan(path)
            r = plan_command(x["argv"], PlanOptions(gpu=_gpu_for(path), engine_version=x["engine_version"],
                                                    avail_before_load_gib=x["avail_before_load_gib"],
                                                    weights_gib=x["weights_gib"],
                                                    draft_weights_gib=x["draft_weights_gib"], fixes=False,
                                                    **cfg))
        except UserError as exc:
            out.append({"case": name, "skip": str(exc)})
            continue
        out.append({"case": name, "logged_status": d["status"], "plan_status": r["status"],
                    "kv": (r["kv_tokens"], f.get("kv_tokens")),
                    "slots": (r["max_mamba_cache_size"], f.get("max_mamba_cache_size")),
                    "mrr": (r["max_running_requests"] if r["status"] == "ok" else 0,
                            f.get("max_running_requests") if d["status"] == "started" else 0)})
    return out


def run_store_cases() -> list[dict]:
    """Servers launched by `specbench run` on the device: the command from the store, the log beside it."""
    import sqlite3
    out = []
    for db in sorted(glob.glob(str(ROOT / "tests/data/h200-run-*/*.db"))):
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        version = Path(db).parent.name.split("sglang-")[-1]
        for sid, cmd in con.execute("select server_id, command_json from servers"):
            log = Path(db).parent / f"{sid}-boot1.log"
            d = diagnose_file(log).to_json()
            f = d["facts"]
            r = plan_command(json.loads(cmd), PlanOptions(
                gpu="h200", engine_version=version, model_config="Qwen/Qwen3.6-27B-bf16-derived",
                avail_before_load_gib=f["avail_before_load_gib"], weights_gib=f["weights_gib"],
                draft_weights_gib=f["draft_weights_gib"], fixes=False))
            out.append({"case": str(log.relative_to(ROOT / "tests/data")), "logged_status": d["status"],
                        "plan_status": r["status"], "kv": (r["kv_tokens"], f.get("kv_tokens")),
                        "slots": (r["max_mamba_cache_size"], f.get("max_mamba_cache_size")),
                        "mrr": (r["max_running_requests"], f.get("max_running_requests"))})
    return out


def dev_cases() -> list[dict]:
    data = {c["id"]: c for c in json.loads((ROOT / "tests/data/real-logs-dev.json").read_text())}
    out = []
    o = data["qwen3-8b-b200-tp1-reference"]["observed"]
    r = plan_command("python -m sglang.launch_server --model-path Qwen/Qwen3-8B --page-size 64",
                     PlanOptions(gpu="b200", avail_before_load_gib=o["avail_mem_before_load_gb"],
                                 weights_gib=o["weight_mem_gb"], fixes=False))
    out.append({"case": "dev:qwen3-8b-b200-tp1-reference", "logged_status": "started", "plan_status": r["status"],
                "kv": (r["kv_tokens"], o["kv_tokens"]), "slots": (None, None), "mrr": (None, None)})
    o = data["sglang-qwopus36-27b-fp8-rtx6000ada-capped9"]["observed"]
    r = plan_command("python -m sglang.launch_server --model-path Qwen/Qwen3.5-27B --max-running-requests 32 "
                     f"--max-mamba-cache-size {o['max_mamba_cache_size']}",
                     PlanOptions(gpu="rtx-6000-ada", engine_version="0.5.19", weights_gib=27.5, fixes=False))
    out.append({"case": "dev:qwopus36-27b-capped9 (slots given)", "logged_status": "started",
                "plan_status": r["status"], "kv": (None, None), "slots": (None, None),
                "mrr": (r["max_running_requests"], o["max_running_requests"])})
    r = plan_command("python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8 --dp 8 "
                     "--enable-dp-attention --max-running-requests 1", PlanOptions(gpu="h200", engine_version="0.5.12",
                                                                                  fixes=False))
    out.append({"case": "dev:fail-dp-attention-max-running-lt-dp", "logged_status": "failed",
                "plan_status": r["status"], "kv": (None, None), "slots": (None, None), "mrr": (0, 0)})
    return out


def main() -> int:
    rows = log_cases() + run_store_cases() + dev_cases()
    n = ok_kv = ok_slots = ok_mrr = ok_status = 0
    n_kv = n_slots = n_mrr = 0
    print(f"{'case':58s} {'status plan/log':>16s} {'KV plan/log (err)':>28s} {'slots plan/log':>15s} {'mrr plan/log':>13s}")
    for c in rows:
        if "skip" in c:
            print(f"{c['case']:58s} skipped: {c['skip']}")
            continue
        n += 1
        st_ok = (c["plan_status"] == "ok") == (c["logged_status"] == "started")
        ok_status += st_ok
        kv = c["kv"]
        kv_s = "-"
        if kv[0] is not None and kv[1]:
            n_kv += 1
            err = kv[0] / kv[1] - 1
            ok_kv += abs(err) <= 0.02
            kv_s = f"{kv[0]:,}/{kv[1]:,} ({err:+.2%})"
        sl = c["slots"]
        sl_s = "-"
        if sl[1] is not None:
            n_slots += 1
            ok_slots += sl[0] == sl[1]
            sl_s = f"{sl[0]}/{sl[1]}"
        mr = c["mrr"]
        mr_s = "-"
        if mr[1] is not None and mr[0] is not None:
            n_mrr += 1
            ok_mrr += mr[0] == mr[1]
            mr_s = f"{mr[0]}/{mr[1]}"
        print(f"{c['case']:58s} {c['plan_status'] + '/' + c['logged_status']:>16s} {kv_s:>28s} {sl_s:>15s} {mr_s:>13s}")
    print(f"\ncases evaluated: {n}; status agrees: {ok_status}/{n}; KV within 2%: {ok_kv}/{n_kv}; "
          f"Mamba slots exact: {ok_slots}/{n_slots}; max_running_requests exact: {ok_mrr}/{n_mrr}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
