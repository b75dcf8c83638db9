"""Score the planner on the public command corpus (tests/data/command_corpus/commands*.json) as a new user offline
would meet it: no HF cache, no Hub, only what specbench bundles.

Three figures (issue 26):
- verdicts: among the commands whose source states whether the server started (`stated.started`), the share the
  plan gets right (`status == "ok"` iff started; a command that cannot be planned counts as wrong);
- numbers: among stated engine numbers (`kv_tokens`, `available_kv_cache_gib`, `weights_gib_per_gpu`,
  `max_model_len`), the share the plan puts within 5 %;
- models: among the distinct models (and drafters) the commands name, the share resolved offline.

    PYTHONPATH=src python benchmarks/command_corpus_score.py [--json] [--list] [--with-configs]

Run it with another checkout's `src` first on PYTHONPATH to score that version side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "data" / "command_corpus"
GPUS = {"A100": "A100 80GB", "H100": "H100 80GB", "H100 80GB HBM3": "H100 80GB", "H20": "H20", "8x H20": "H20",
        "B200": "B200", "4xB200": "B200", "H200": "H200", "A800": "A800", "RTX 4090": "RTX 4090",
        "RTX 5090": "RTX 5090", "RTX 3090": "RTX 3090", "L40S": "L40S", "H800": "H800", "MI300X": "MI300X",
        "RTX PRO 6000": "RTX PRO 6000 Blackwell", "B300": "B300", "GB200": "GB200", "L4": "L4"}
NUMBERS = {"kv_tokens": "kv_tokens", "available_kv_cache_gib": "available_kv_gib",
           "weights_gib_per_gpu": "weights_gib", "max_model_len": "max_model_len"}


def entries() -> list[dict]:
    out: list[dict] = []
    for f in sorted(CORPUS.glob("commands*.json")):
        out += json.loads(f.read_text(encoding="utf-8"))
    return out


def _gpu(e: dict) -> str:
    g = (e.get("gpu") or "").strip()
    return GPUS.get(g) or next((v for k, v in GPUS.items() if k in g), "H200")


def _cache_configs(home: Path) -> None:
    """`--with-configs`: the corpus' own config copies (configs/, SOURCES.md there) in the HF cache under their ids,
    as tests/golden/test_command_corpus.py plans them (a user who downloaded those configs once)."""
    import shutil

    for e in entries():
        src = e.get("config_source")
        model = e.get("model") or ""
        if not src or model.startswith(("/", ".")) or model.count("/") != 1:
            continue
        cfg = CORPUS / "configs" / Path(src).name
        snap = home / "hub" / ("models--" + model.replace("/", "--")) / "snapshots" / ("0" * 40)
        snap.mkdir(parents=True, exist_ok=True)
        shutil.copy(cfg, snap / "config.json")
        hq = cfg.with_name(cfg.stem + "__hf_quant_config.json")
        if hq.exists():
            shutil.copy(hq, snap / "hf_quant_config.json")
        (snap.parents[1] / "refs").mkdir(exist_ok=True)
        (snap.parents[1] / "refs" / "main").write_text("0" * 40)


def score(with_configs: bool = False) -> dict:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="specbench-score-hf-")
    os.environ.pop("HF_HUB_CACHE", None)
    if with_configs:
        _cache_configs(Path(os.environ["HF_HOME"]))
    from specbench.contracts_inputs import PlanOptions
    from specbench.errors import UserError
    from specbench.plan.api import plan_command
    from specbench.specs.resolve import resolve_model

    rows, verdicts, numbers, models = [], [], [], {}
    for e in entries():
        opts = {"gpu": _gpu(e), "fixes": False}
        if e.get("gpu_mem_gib"):
            opts = {"gpu_mem_gib": e["gpu_mem_gib"], "fixes": False}
        try:
            p, err = plan_command(e["command"], PlanOptions(**opts)), None
        except UserError as exc:
            p, err = None, str(exc)
        stated = e.get("stated") or {}
        if "started" in stated:
            verdicts.append(p is not None and (p["status"] == "ok") == bool(stated["started"]))
        for key, pkey in NUMBERS.items():
            if key in stated and isinstance(stated[key], (int, float)):
                got = (p or {}).get(pkey)
                numbers.append(got is not None and abs(got - stated[key]) <= 0.05 * abs(stated[key]))
        for role in ("model", "draft_model"):
            name = e.get(role)
            if name and name not in models:
                try:
                    resolve_model(name)
                    models[name] = True
                except UserError:
                    models[name] = False
        rows.append({"id": e["id"], "status": p["status"] if p else None, "error": err,
                     "stand_in": bool(p and p.get("model_stand_in")), "stated": stated})
    frac = lambda xs: (sum(xs), len(xs))  # noqa: E731
    return {"commands": len(rows), "verdicts": frac(verdicts), "numbers": frac(numbers),
            "models": frac(list(models.values())), "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--with-configs", action="store_true", help="the corpus' config copies in the HF cache")
    a = ap.parse_args()
    s = score(a.with_configs)
    if a.json:
        print(json.dumps(s, indent=1))
        return
    if a.list:
        for r in s["rows"]:
            print(f"{r['id'][:64]:64} {r['status'] or 'ERROR':6} {'stand-in' if r['stand_in'] else '':8} "
                  f"{json.dumps(r['stated'])[:50]:50} {(r['error'] or '')[:80]}")
    for k in ("verdicts", "numbers", "models"):
        ok, n = s[k]
        print(f"{k:9} {ok}/{n}" + (f" = {ok / n:.0%}" if n else ""))
    print(f"commands  {s['commands']}  (specbench from {sys.modules['specbench'].__file__})")


if __name__ == "__main__":
    main()
