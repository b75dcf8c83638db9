"""Truth vs stored: `specbench run` against the instant server's ground-truth mode (testing/instant_truth.py), one
table of what the server really did beside what the store says, and what each lying server ends as.

The truth: every step STEP_MS, at most CAP requests at once, draft position i accepted with RATES[i] given the ones
before (chain drafting, seeded), the prefill step yields 1 token. So TPOT (AR, alone) = STEP_MS; tokens per verify
step = 1 + sum_i prod_{j<=i} r_j; decode time per token = STEP_MS / that; effective concurrency = min(c, CAP).
The tests (tests/process/test_truth_*.py) assert the same with stated tolerances; this prints the numbers.

    .venv/bin/python benchmarks/ground_truth.py            # ~1.5 min; markdown on stdout
"""

from __future__ import annotations

import json
import socket
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from specbench.testing.instant_truth import (  # noqa: E402
    SATURATION,
    acceptance_per_pos,
    saturation_matrix,
    step_model,
    tokens_per_step,
)

STEP_MS, CAP, RATES = 10.0, 2, (0.8, 0.6, 0.4)
LIES = {"honest": {}, "usage x10": {"--usage-scale": 10}, "usage x1/4": {"--usage-scale": 0.25},
        "usage negative": {"--usage-scale": -1}, "usage +3": {"--usage-offset": 3}, "early EOS at 1/4": {"--early-eos": 0.25},
        "wrong /v1/models": {"--models-name": "another-model"},
        "cap said 1 runs 4": {"--max-running": 4, "--report-cap": 1},
        "accepted x3 on metrics": {"--accept-rates": "0.8,0.6,0.4", "--accepted-scale": 3}}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _head(name: str, cmd: list[str], tok: Path, api: str = "auto") -> str:
    return (f'name = "{name}"\nengine = "openai"\ncommand = {json.dumps(cmd)}\nport = {_port()}\n'
            f'tokenizer = "{tok}"\napi = "{api}"\n[timeouts]\nready_s = 30\nstop_s = 5\nport_free_s = 10\n')


def _variant(label: str, flags: dict[str, Any]) -> str:
    body = ", ".join(f'"{k}" = {json.dumps(v)}' for k, v in flags.items())
    return f'\n[[server.spec]]\nlabel = "{label}"\nalgorithm = "draft_model"\nflags = {{ {body} }}\n'


def _run(matrix: Path) -> list[dict[str, Any]]:
    store = matrix.with_suffix(".sqlite")
    subprocess.run([sys.executable, "-m", "specbench", "run", str(matrix), "--store", str(store), "--no-progress"],
                   cwd=ROOT, capture_output=True, text=True, timeout=600, env=None)
    con = sqlite3.connect(store)
    try:
        return [{"label": label, "client": json.loads(c), "status": st, "reason": reason,
                 "m": json.loads(mj) if mj else {}}
                for label, c, st, reason, mj in con.execute(
                    "SELECT label, client_json, status, reason, metrics_json FROM cells ORDER BY rowid")]
    finally:
        con.close()


def saturation(work: Path, tok: Path) -> None:
    """The batch-dependent step (instant_truth.SATURATION): per concurrency the model's step and throughput, the
    step the server really took at that width, and what the store says (TPOT, throughput, the flags)."""
    cmd, body = saturation_matrix(str(work))
    m = work / "saturation.toml"
    m.write_text(_head("saturation", cmd, tok) + body)
    cells = _run(m)
    truth = json.loads((work / "closed.json").read_text())["step_ms_by_running"]
    t = SATURATION
    print(f"\n# saturation: step = {t['step_ms']} + {t['per_running_ms']} x running ms, cap {t['cap']}, "
          f"{t['output_tokens']} output tokens, AR\n")
    print("| cell | running | step ms: model / realized | TPOT ms stored | tok/s: model / n over realized step | "
          "tok/s stored | queued | peak in flight | oversaturated |\n|---|---|---|---|---|---|---|---|---|")
    for c in cells:
        conc, rate, x = c["client"]["concurrency"], c["client"].get("request_rate", "inf"), c["m"]
        want = step_model(t["step_ms"], t["per_running_ms"], conc, int(t["cap"]))
        n = int(want["running"])
        real = truth.get(str(n), [0, None])[1] if c["label"] == "closed" else None
        model = (f"{want['tpot_ms']:.1f} / {real:.2f}" if real else "-")
        thr = (f"{want['output_tokens_per_s']:.0f} / {1000 * n / real:.0f}" if real else "-")
        print(f"| {c['label']} c={conc} rate={rate} | {n if real else '-'} | {model} | {x['tpot_ms_mean']:.2f} | {thr} | "
              f"{x['output_throughput']:.0f} | {x['queued']} | {x['peak_in_flight']} | {x['oversaturated']} |")


def main() -> None:
    from specbench.models_gen.tokenizer import TokenizerSpec, train_tokenizer, write_tokenizer

    work = Path(tempfile.mkdtemp(prefix="ground-truth-"))
    tok = work / "tok"
    spec = TokenizerSpec(vocab_size=1024, corpus_lines=1500)
    write_tokenizer(train_tokenizer(spec), spec, tok)
    rates = ",".join(map(str, RATES))
    truth_cmd = [sys.executable, "-m", "specbench.testing.instant_server", "--step-ms", str(STEP_MS),
                 "--max-running", str(CAP)]
    client = ("\n[client]\nconcurrency = [1, 4]\nprompt_tokens = 24\noutput_tokens = 64\nnum_requests = 12\n"
              '\n[[override]]\nwhen = { algorithm = "draft_model" }\nclient = { concurrency = 1, warmup_requests = 0 }\n')
    rows: list[tuple[str, str, str]] = []
    for api, variants in (("chat", [("vllm counters", {"--accept-rates": rates}),
                                    ("sglang counters", {"--accept-rates": rates, "--metrics": "sglang"})]),
                          ("generate", [("sglang meta_info", {"--accept-rates": rates})])):
        m = work / f"truth-{api}.toml"
        files = {label: work / f"{api}-{i}.json" for i, (label, _) in enumerate(variants)}
        ar_file = work / f"{api}-ar.json"
        m.write_text(_head(f"truth-{api}", truth_cmd, tok, api)
                     + f'\n[[server.spec]]\nlabel = "ar"\nflags = {{ "--truth-file" = "{ar_file}" }}\n'
                     + "".join(_variant(label, {**f, "--truth-file": str(files[label])}) for label, f in variants)
                     + client)
        cells = {(c["label"], c["client"]["concurrency"]): c for c in _run(m)}
        ar = cells[("ar", 1)]["m"]
        real_step = json.loads(ar_file.read_text())["mean_step_ms"]
        rows.append((f"{api}: AR TPOT mean at c=1 (ms)", f"{STEP_MS:.2f} set, {real_step:.2f} realized",
                     f"{ar['tpot_ms_mean']:.2f}"))
        for label, _ in variants:
            x = cells[(label, 1)]["m"]
            reqs = [r for r in json.loads(files[label].read_text())["requests"] if r[0] == 64]
            real = 1 + sum(r[2] for r in reqs) / sum(r[1] for r in reqs)
            rows.append((f"{api}, {label}: accept length (tokens / verify step)",
                         f"{tokens_per_step(RATES):.3f} expected, {real:.3f} realized",
                         f"{x['accept_length_common']:.3f} ({x['accept_length_common_source']}; engine's own "
                         f"{x['accept_length_mean']:.3f})"))
            truth = json.loads(files[label].read_text())
            rows.append((f"{api}, {label}: decode ms per token at c=1",
                         f"{STEP_MS / tokens_per_step(RATES):.2f} expected, "
                         f"{truth['mean_step_ms'] / real:.2f} realized", f"{x['itl_per_token_ms_mean']:.2f}"))
            if x.get("acceptance_per_pos"):
                rows.append((f"{api}, {label}: acceptance per position",
                             ", ".join(f"{v:.2f}" for v in acceptance_per_pos(RATES)) + " expected; "
                             + ", ".join(f"{v / truth['verify_steps']:.2f}" for v in truth["per_pos"])
                             + " realized (the probe's step included)",
                             ", ".join(f"{v:.2f}" for v in x["acceptance_per_pos"])))
        four = cells[("ar", 4)]["m"]
        rows.append((f"{api}: c=4 on a cap of {CAP}: running cap / effective concurrency / queued",
                     f"{CAP} / {CAP} / True", f"{four['running_cap']} / {four['effective_concurrency']} / "
                                              f"{four['queued']}"))
        rows.append((f"{api}: output tokens of 12 requests (verified)", str(12 * 64), str(ar["total_output_tokens"])))
    lies = work / "lies.toml"
    lie_cmd = [sys.executable, "-m", "specbench.testing.instant_server", "--step-ms", "2", "--model", "instant"]
    lies.write_text(_head("lies", lie_cmd, tok, "completions") + "".join(_variant(k, v) for k, v in LIES.items())
                    + "\n[client]\nconcurrency = 2\nprompt_tokens = 24\noutput_tokens = 16\nnum_requests = 4\n"
                    + '\n[[override]]\nwhen = { spec = "cap said 1 runs 4" }\n'
                    + "client = { concurrency = 4, num_requests = 8 }\n")
    print(f"# ground truth: step {STEP_MS} ms, cap {CAP}, acceptance per position {RATES}\n")
    print("| quantity | truth | stored |\n|---|---|---|")
    for q, t, s in rows:
        print(f"| {q} | {t} | {s} |")
    print("\n| lying server | cell status | reason (start) |\n|---|---|---|")
    for c in _run(lies):
        print(f"| {c['label']} | {c['status']} | {(c['reason'] or '').split(' [')[0][:150]} |")
    saturation(work, tok)


if __name__ == "__main__":
    main()
