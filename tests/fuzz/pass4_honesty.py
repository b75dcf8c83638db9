"""Pass 4 of the fuzz, servers (issue 37 item 4, load/honesty.py): `specbench run` of a tiny matrix against the instant
server (a real local HTTP server on 127.0.0.1, testing/instant_server.py) lying or honest in one way per variant,
for each API; each case reads the cells back through `specbench export` (what the report and a user see) and its
oracle, written before the run, says what that variant's cell must be:

- honest in an odd way (JSON spelled with spaces or every other way, events without text between tokens, both,
  speculative steps with empty events between): `done`, every request measured, the tokens the client sent and
  the ones it received;
- lying (an answer naming another model than the one asked, the model switched mid-run, one answer to every prompt,
  prompt_tokens not the prompt sent): never `done`, the reason naming the lie.

The matrices run as `cases` builds its list (one `specbench run` per API, every variant a server of it); the run's
exit status and stderr are checked by every case of it (no traceback: 0 where all is honest, 1 where cells failed)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from fuzz.harness import Case, Result

N, PROMPT, OUT = 6, 24, 16  # requests per cell, prompt and output tokens each

HONEST: dict[str, dict[str, object]] = {
    "honest": {},
    "spaces": {"--json-style": "spaces"},
    "loose": {"--json-style": "loose"},
    "empty": {"--empty-events": True},
    "empty-spaces": {"--empty-events": True, "--json-style": "spaces"},
    "empty-loose": {"--empty-events": True, "--json-style": "loose"},
    "empty-spec": {"--empty-events": True, "--accept-rates": "0.8,0.5"},
    "spaces-spec": {"--json-style": "spaces", "--accept-rates": "0.9,0.6,0.3"},
}
LIES: dict[str, tuple[dict[str, object], str]] = {  # label -> (flags, what the reason must say)
    "answer-model": ({"--answer-model": "other-model"}, "names model 'other-model'"),
    "answer-model-loose": ({"--answer-model": "other-model", "--json-style": "loose"}, "names model 'other-model'"),
    # caught per request (the answer names it) or after the cell (/v1/models changed): both name the new model
    "switch": ({"--switch-model": "other-model", "--switch-after": 4}, "'other-model'"),
    "same": ({"--same-answer": True}, "same answer"),
    "same-spaces": ({"--same-answer": True, "--json-style": "spaces"}, "same answer"),
    "same-empty": ({"--same-answer": True, "--empty-events": True}, "same answer"),
    "ptok-low": ({"--prompt-tokens-lie": 3}, "prompt_tokens=3"),
    "ptok-high": ({"--prompt-tokens-lie": 5000}, "prompt_tokens=5000"),
    "usage-lie": ({"--usage-scale": 2}, "completion_tokens=32"),
}
# /generate names no model and streams no separate empty events: those variants say nothing there
NOT_ON_GENERATE = {"answer-model", "answer-model-loose", "empty", "empty-spaces", "empty-loose", "empty-spec",
                   "same-empty"}
# a model switched mid-run on /generate: its answers name no model, so the runner's /v1/models re-check after the
# cell (matrix/served_model.py::model_changed) says it
ON_GENERATE_SAYS = {"switch": "/v1/models changed during the cell"}


def _matrix(path: Path, api: str, port: int, tok: Path, labels: list[str]) -> Path:
    from run_helpers import _matrix_head

    flags = {**HONEST, **{k: v for k, (v, _) in LIES.items()}}
    cmd = [sys.executable, "-m", "specbench.testing.instant_server", "--step-ms", "1"]
    head = _matrix_head(f"honesty-{api}", cmd, port, tok, ready_s=30, stop_s=5).replace(
        "tokenizer = ", f'api = "{api}"\ntokenizer = ')
    variants = "".join(f'\n[[server.spec]]\nlabel = "{k}"\nalgorithm = "draft_model"\n'
                       f"flags = {json.dumps(flags[k]).replace(':', ' =')}\n" for k in labels)
    path.write_text(head + variants + f"""
[client]
concurrency = 3
prompt_tokens = {PROMPT}
output_tokens = {OUT}
num_requests = {N}
warmup_requests = 1
""")
    return path


def _cell(res: Result, label: str) -> dict[str, object] | str:
    try:
        rows = json.loads(res.stdout)
    except ValueError:
        return f"export printed no JSON: {res.stdout[:200]!r}"
    mine = [r for r in rows if r.get("label") == label]
    return mine[0] if len(mine) == 1 else f"{len(mine)} cells labelled {label!r}"


def _honest(label: str, run_rc: int, run_err: str) -> Callable[[Result], str | None]:
    def oracle(res: Result) -> str | None:
        if "Traceback" in run_err or run_rc not in (0, 1):
            return f"specbench run ended {run_rc}: {run_err[-300:]}"
        cell = _cell(res, label)
        if isinstance(cell, str):
            return cell
        if cell["status"] != "done":
            return f"an honest server ({label}) was not measured: {cell['status']}: {cell['reason']}"
        got = (cell.get("metrics.completed"), cell.get("metrics.total_output_tokens"),
               cell.get("metrics.total_input_tokens"))
        if got != (N, N * OUT, N * PROMPT):
            return f"{label}: (completed, output tokens, input tokens) {got}, not {(N, N * OUT, N * PROMPT)}"
        return None
    return oracle


def _lie(label: str, says: str, run_rc: int, run_err: str) -> Callable[[Result], str | None]:
    def oracle(res: Result) -> str | None:
        if "Traceback" in run_err or run_rc != 1:
            return f"specbench run ended {run_rc} (cells failed must end 1): {run_err[-300:]}"
        cell = _cell(res, label)
        if isinstance(cell, str):
            return cell
        if cell["status"] not in ("failed", "partial"):
            return f"a lying server ({label}) ended {cell['status']}"
        if says not in str(cell["reason"]):
            return f"{label}: the reason does not say {says!r}: {cell['reason']}"
        return None
    return oracle


def cases(tmp: Path) -> list[Case]:
    from proc_helpers import free_port
    from run_helpers import cli, make_tokenizer

    tok = make_tokenizer(tmp / "tok")
    out: list[Case] = []
    for api in ("completions", "chat", "generate"):
        labels = [k for k in (*HONEST, *LIES) if not (api == "generate" and k in NOT_ON_GENERATE)]
        m = _matrix(tmp / f"{api}.toml", api, free_port(), tok, labels)
        store = tmp / f"{api}.sqlite"
        run = cli("run", str(m), "--store", str(store), "--no-progress", timeout=170)
        export = ["export", str(store), "--format", "json"]
        for k in labels:
            if k in HONEST:
                out.append(Case("honest", export, f"{api}: {k} server measured", oracle=_honest(k, run.returncode,
                                                                                                 run.stderr)))
            else:
                says = ON_GENERATE_SAYS.get(k, LIES[k][1]) if api == "generate" else LIES[k][1]
                out.append(Case("lie", export, f"{api}: {k} server never done",
                                oracle=_lie(k, says, run.returncode, run.stderr)))
    return out
