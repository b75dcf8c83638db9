"""Plausible-but-wrong inputs (#23), beside the hostile ones of strategies.py: what an operator writes by mistake.

- `p-config`: a real bundled config.json with one field changed to a value of the right look but the wrong meaning
  (a count as a string, a unit slip, MoE top-k 0, 3-bit AWQ, heads that do not divide, a drafter that cannot serve
  the target);
- `p-launch`: a real launch command with one flag in the wrong unit (a percentage for a fraction, `128k` where a
  plain count is read, a TP that does not divide the heads);
- `p-matrix`: a valid matrix with one value of the wrong type or unit (`"900"` for 900, 85 for 0.85, milliseconds
  for seconds, a missing tokenizer or dataset path);
- `p-logs`: a real engine log as it arrives from elsewhere: CRLF line ends, ANSI colours, multi-rank prefixes, cut at
  a line end, gzip-compressed, or another release's version string. The oracle: the doctor's status and failure
  kind are those of the clean log (a colour code must not change a diagnosis);
- `p-stores`: a real store with one field of one row changed (a metric as text, a status no run writes, a JSON
  column holding a list, a negative latency).
Each draws a `Case` (harness.py) whose `must_fail` / oracle say what a correct answer is.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from fuzz.harness import Case, Result, run_cli
from fuzz.strategies import CONFIGS, LATE, LOGS, READY, ROOT, _json_status, _tmp

# ------------------------------------------------------------------------------------------------ configs
# (field, wrong value, must the plan refuse it or predict a failure?) The value keeps a plausible look.
_MOE = ("num_experts_per_tok", "moe_topk", "num_experts_per_token")


def _config_edits(cfg: dict[str, Any]) -> list[tuple[str, Any, bool]]:
    level = cfg["text_config"] if isinstance(cfg.get("text_config"), dict) else cfg
    out: list[tuple[str, Any, bool]] = []
    for key in ("hidden_size", "num_hidden_layers", "vocab_size", "num_attention_heads", "intermediate_size"):
        if isinstance(level.get(key), int):
            out.append((key, str(level[key]), True))  # "4096": a count written as a string
            out.append((key, float(level[key]) + 0.5, True))  # 4096.5: no count
    if isinstance(level.get("max_position_embeddings"), int):
        out.append(("max_position_embeddings", f"{level['max_position_embeddings'] // 1024}k", True))
    if isinstance(level.get("num_attention_heads"), int) and isinstance(level.get("num_key_value_heads"), int):
        h = level["num_attention_heads"]
        bad = next((k for k in (3, 5, 7, 11, 13) if h % k), None)
        if bad:
            out.append(("num_key_value_heads", bad, True))  # KV heads that do not divide the heads
    for k in _MOE:
        if isinstance(level.get(k), int):
            out.append((k, 0, True))  # MoE top-k 0: every token routed to no expert
    out.append(("torch_dtype", "bf16", False))  # a common spelling: read or refused, never a crash
    out.append(("quantization_config", {"quant_method": "awq", "bits": 3, "group_size": 128, "zero_point": True},
                True))  # 3-bit AWQ: no AWQ kernel serves it
    out.append(("quantization_config", {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True},
                False))
    return out


@st.composite
def p_config_case(draw: st.DrawFn) -> Case:
    base = draw(st.sampled_from(sorted(p for p in CONFIGS.glob("*.json") if "__hf_quant_config" not in p.name)))
    cfg = json.loads(base.read_text())
    edits = _config_edits(cfg)
    key, value, bad = draw(st.sampled_from(edits))
    level = cfg["text_config"] if isinstance(cfg.get("text_config"), dict) else cfg
    if key == "quantization_config":  # where a checkpoint writes it: the top level, whatever nests the text config
        level.pop(key, None)
        cfg[key] = value
    else:
        level[key] = value
    d = _tmp()
    (d / "config.json").write_text(json.dumps(cfg))
    engine = draw(st.sampled_from(["sglang", "vllm"]))
    cmd = (["python", "-m", "sglang.launch_server", "--model-path", "m"] if engine == "sglang"
           else ["vllm", "serve", "m"])

    def oracle(res: Result) -> str | None:
        j = _json_status(res)
        if j is None:
            return "exit 0 without the JSON contract"
        if bad and j.get("status") == "ok" and not any(key in str(w) for w in j.get("warnings") or ()):
            return f"planned ok with {key} = {value!r}, without a warning naming it"
        return None

    return Case("p-config", ["plan", "--json", "--no-fixes", "--gpu", "H200", "--model-config",
                             str(d / "config.json"), "--", *cmd], f"{base.stem}: {key} = {value!r} ({engine})",
                oracle=oracle)


# ------------------------------------------------------------------------------------------------ drafters
DRAFT_EDITS = (("hidden_size", lambda v: v // 2 if isinstance(v, int) else 1024, True),
               ("vocab_size", lambda v: v + 1000 if isinstance(v, int) else 1000, True),
               ("architectures", lambda v: ["BertForMaskedLM"], True),
               ("num_hidden_layers", lambda v: 1, False))


DRAFT_TARGETS = [CONFIGS / f"{n}.json" for n in (
    "meta-llama__Llama-3.1-8B-Instruct", "Qwen__Qwen3-8B", "meta-llama__Llama-3.1-70B-Instruct", "Qwen__Qwen3-32B",
    "Qwen__Qwen2.5-7B-Instruct", "mistralai__Mistral-7B-Instruct-v0.3", "meta-llama__Llama-3.3-70B-Instruct")]


@st.composite
def p_draft_case(draw: st.DrawFn) -> Case:
    base = draw(st.sampled_from(DRAFT_TARGETS))
    target = json.loads(base.read_text())
    draft = dict(target)
    key, fn, bad = draw(st.sampled_from(DRAFT_EDITS))
    draft[key] = fn(draft.get(key))
    draft["num_hidden_layers"] = 1 if key != "num_hidden_layers" else draft["num_hidden_layers"]
    d = _tmp()
    (d / "draft.json").write_text(json.dumps(draft))
    engine = draw(st.sampled_from(["sglang", "vllm"]))
    tp = draw(st.sampled_from(["1", "2", "4", "8"]))
    cmd = (["python", "-m", "sglang.launch_server", "--model-path", "m", "--tp", tp, "--speculative-algorithm",
            draw(st.sampled_from(["EAGLE3", "EAGLE"])),
            "--speculative-draft-model-path", "d", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
            "--speculative-num-draft-tokens", "4"] if engine == "sglang"
           else ["vllm", "serve", "m", "--tensor-parallel-size", tp, "--speculative-config",
                 json.dumps({"method": draw(st.sampled_from(["eagle3", "eagle"])), "model": "d",
                             "num_speculative_tokens": 3})])

    def oracle(res: Result) -> str | None:
        j = _json_status(res)
        if j is None:
            return "exit 0 without the JSON contract"
        if bad and j.get("status") == "ok" and not j.get("warnings"):
            return f"a drafter with {key} = {draft[key]!r} planned ok without a word"
        return None

    return Case("p-draft", ["plan", "--json", "--no-fixes", "--gpu", "H200", "--model-config", str(base),
                            "--draft-config", str(d / "draft.json"), "--", *cmd],
                f"{base.stem} drafter: {key} = {draft[key]!r} ({' '.join(cmd[-8:])})", oracle=oracle)


# ------------------------------------------------------------------------------------------------ launch commands
# (engine, flag, wrong value, must it fail?)
LAUNCH_SLIPS: tuple[tuple[str, str, str, bool], ...] = (
    ("sglang", "--mem-fraction-static", "85", True), ("sglang", "--mem-fraction-static", "0.85 ", False),
    ("sglang", "--context-length", "128k", True), ("sglang", "--tp", "3", True), ("sglang", "--tp", "2.0", True),
    ("sglang", "--max-running-requests", "1e3", True), ("sglang", "--page-size", "16.5", True),
    ("sglang", "--dtype", "bf16", True), ("sglang", "--kv-cache-dtype", "fp8", False),
    ("vllm", "--gpu-memory-utilization", "90", True), ("vllm", "--gpu-memory-utilization", "0.9", False),
    ("vllm", "--max-model-len", "32k", False), ("vllm", "--max-model-len", "32.5K", True),
    ("vllm", "--tensor-parallel-size", "3", True), ("vllm", "--max-num-seqs", "1e3", True),
    ("vllm", "--block-size", "17", False), ("vllm", "--dtype", "bf16", True), ("vllm", "--kv-cache-dtype", "fp8", False),
)


@st.composite
def p_launch_case(draw: st.DrawFn) -> Case:
    engine, flag, value, bad = draw(st.sampled_from(LAUNCH_SLIPS))
    model = draw(st.sampled_from(["Qwen/Qwen3-8B", "meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-32B",
                                  "Qwen/Qwen2.5-7B-Instruct", "mistralai/Mistral-7B-Instruct-v0.3",
                                  "meta-llama/Llama-3.1-70B-Instruct", "Qwen/Qwen3-30B-A3B"]))
    gpu = draw(st.sampled_from(["H200", "H100", "A100-80GB", "L40S"]))
    cmd = (["python", "-m", "sglang.launch_server", "--model-path", model] if engine == "sglang"
           else ["vllm", "serve", model])

    def oracle(res: Result) -> str | None:
        j = _json_status(res)
        if j is None:
            return "exit 0 without the JSON contract"
        if bad and j.get("status") == "ok":
            return f"planned ok with {flag} {value}"
        return None

    return Case("p-launch", ["plan", "--json", "--no-fixes", "--gpu", gpu, "--", *cmd, flag, value],
                f"{engine} {model} on {gpu} {flag} {value!r}", oracle=oracle)


# ------------------------------------------------------------------------------------------------ matrices
_BASE_MATRIX = """name = "plausible"
engine = "openai"
command = ["python3", "-m", "specbench.testing.instant_server"]
port = 30123
tokenizer = "{tok}"

[timeouts]
ready_s = 900
request_s = 600

[server]
tp = 1

[[server.spec]]
label = "ar"

[client]
concurrency = [1, 2]
prompt_tokens = 64
output_tokens = 16
num_requests = 4
"""
# (table.key, wrong value as TOML, must it fail?)
MATRIX_SLIPS: tuple[tuple[str, str, bool], ...] = (
    ("timeouts.ready_s", '"900"', True), ("timeouts.ready_s", "900000", True), ("timeouts.ready_s", "0", True),
    ("timeouts.request_s", "-1", True), ("server.tp", '"1"', True), ("server.tp", "1.0", True),
    ("server.tp", "[1, 1]", True), ("server.mem_fraction_static", "85", True),
    ("server.mem_fraction_static", "0.85", False), ("client.concurrency", "1.0", True),
    ("client.concurrency", '"1"', True), ("client.prompt_tokens", '"1k"', True), ("client.request_rate", '"10/s"', True),
    ("client.request_rate", "0", True), ("client.request_rate", '"inf"', False), ("client.num_requests", "0", True),
    ("client.output_tokens", "16.0", True), ("client.dataset", '"no-such-dataset.jsonl"', True),
    ("port", '"30123"', True), ("port", "300000", True), ("tokenizer", '"./no-such-tokenizer"', True),
    ("client.warmup_requests", "-1", True), ("client.concurrency", "[2, 1]", False),
)


def _set_toml(text: str, dotted: str, value: str) -> str:
    table, _, key = dotted.rpartition(".")
    pat = re.compile(rf"^{re.escape(key)} = .*$", re.M)
    if not table:
        return pat.sub(f"{key} = {value}", text, count=1) if pat.search(text) else f"{key} = {value}\n" + text
    head = f"[{table}]\n"
    start = text.index(head) + len(head)
    end = text.find("\n[", start)
    end = len(text) if end < 0 else end + 1
    body = text[start:end]
    body = pat.sub(f"{key} = {value}", body, count=1) if pat.search(body) else f"{key} = {value}\n" + body
    return text[:start] + body + text[end:]


_TOK: list[str] = []


def _tokenizer() -> str:
    if not _TOK:
        from run_helpers import make_tokenizer

        _TOK.append(str(make_tokenizer(_tmp())))
    return _TOK[0]


@st.composite
def p_matrix_case(draw: st.DrawFn) -> Case:
    key, value, bad = draw(st.sampled_from(MATRIX_SLIPS))
    text = _BASE_MATRIX.replace("{tok}", _tokenizer())
    for other, choices in (("client.num_requests", ("4", "8", "16", "32")), ("client.prompt_tokens", ("32", "64", "128")),
                           ("client.concurrency", ("[1, 2]", "4", "[1, 8]"))):
        if other != key:
            text = _set_toml(text, other, draw(st.sampled_from(choices)))
    text = _set_toml(text, key, value)
    d = _tmp()
    (d / "m.toml").write_text(text)
    return Case("p-matrix", ["run", str(d / "m.toml"), "--dry-run", "--json"],
                f"{key} = {value} in " + text.split("[client]")[1].replace("\n", "; "), must_fail=bad, cwd=str(d))


# ------------------------------------------------------------------------------------------------ logs
_ANSI = re.compile(rb"\x1b\[[0-9;]*m")


def _crlf(b: bytes) -> bytes:
    return b.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")


def _ansi(b: bytes) -> bytes:
    lines = b.split(b"\n")
    return b"\n".join((b"\x1b[32mINFO\x1b[0m " + ln) if ln.startswith((b"INFO", b"[")) and i % 2 == 0 else ln
                      for i, ln in enumerate(lines))


def _ranks(b: bytes) -> bytes:
    return b"\n".join((b"(VllmWorker rank=0 pid=1234) " + ln) if ln.strip() else ln for ln in b.split(b"\n"))


LOG_TRANSFORMS = {"crlf": _crlf, "ansi": _ansi, "ranks": _ranks}
_BASELINE: dict[str, dict[str, Any] | None] = {}


def _doctor(path: Path) -> dict[str, Any] | None:
    key = str(path)
    if key not in _BASELINE:
        res = run_cli(["doctor", "--json", key])
        _BASELINE[key] = _json_status(res) if res.rc == 0 else None
    return _BASELINE[key]


def _summary(j: dict[str, Any] | None) -> tuple[Any, Any]:
    if j is None:
        return (None, None)
    return (j.get("status"), (j.get("failure") or {}).get("kind"))


@st.composite
def p_log_case(draw: st.DrawFn) -> Case:
    src = draw(st.sampled_from(LOGS))
    data = src.read_bytes()
    kind = draw(st.sampled_from(["crlf", "ansi", "ranks", "cut-line", "gzip", "release"]))
    d = _tmp()
    path = d / src.name
    expect: tuple[Any, Any] | None = None
    if kind in LOG_TRANSFORMS:
        path.write_bytes(LOG_TRANSFORMS[kind](data))
        expect = _summary(_doctor(src)) if kind != "ranks" else None  # a rank prefix may hide a line format
    elif kind == "cut-line":
        ends = [m.end() for m in re.finditer(rb"\n", data)] or [len(data)]
        path.write_bytes(data[: draw(st.sampled_from(ends))])
    elif kind == "gzip":
        path = d / (src.name + ".gz")
        path.write_bytes(gzip.compress(data))
    else:  # another release's version string
        swapped = re.sub(rb"\b0\.(\d+)\.(\d+)\b", lambda m: b"0.%d.%d" % (int(m.group(1)) + 1, int(m.group(2))),
                         data, count=3)
        path.write_bytes(swapped)
    return Case("p-logs", ["doctor", "--json", str(path)], f"{kind} {src.name}",
                oracle=log_oracle(kind, data, path.read_bytes(), expect))


def log_oracle(kind: str, data: bytes, text: bytes, expect: tuple[Any, Any] | None) -> Callable[[Result], str | None]:
    """The check of one changed log (`text`, made from the corpus log `data` by `kind`): a transform that keeps
    every line keeps the diagnosis (`expect`), and a log left with no ready line nor late start-up step is never
    called started."""
    src_ready = any(w.encode().lower() in data.lower() for w in READY + LATE)
    ready = not src_ready or any(w.encode().lower() in (gzip.decompress(text) if kind == "gzip" else text).lower()
                for w in READY + LATE)  # the doctor's "started" (doctor/lastboot.py::boot_status), as strategies.py
    # reads it; a clean log the doctor already calls started without such a line is the doctor's own reading, not this
    # cut's

    def oracle(res: Result) -> str | None:
        j = _json_status(res)
        if j is None:
            return "exit 0 without the JSON contract"
        if expect is not None and expect[0] is not None and _summary(j) != expect:
            return f"{kind} changed the diagnosis: {_summary(j)} instead of {expect}"
        if j.get("status") == "started" and not ready and kind != "release":
            return "a log without a ready line reported as started"
        return None

    return oracle


# ------------------------------------------------------------------------------------------------ stores
STORE_SLIPS: tuple[tuple[str, str], ...] = (
    ("metrics as text", "UPDATE cells SET metrics_json = '\"fast\"' WHERE rowid = 1"),
    ("metrics as a list", "UPDATE cells SET metrics_json = '[1, 2]' WHERE rowid = 1"),
    ("a metric as a string", "UPDATE cells SET metrics_json = json_set(metrics_json, '$.output_throughput', "
                             "'12 tok/s') WHERE rowid = 1"),
    ("an unknown status", "UPDATE cells SET status = 'weird' WHERE rowid = 1"),
    ("tp as text", "UPDATE cells SET tp = 'one' WHERE rowid = 1"),
    ("a negative ttft", "UPDATE requests SET ttft_s = -1.0 WHERE rowid = 1"),
    ("itl as an object", "UPDATE requests SET itl_json = '{\"a\": 1}' WHERE rowid = 1"),
    ("client as a number", "UPDATE cells SET client_json = '7' WHERE rowid = 1"),
    ("server as null text", "UPDATE cells SET server_json = 'null' WHERE rowid = 2"),
    ("a cell of no server", "UPDATE cells SET server_id = 'srv-nowhere' WHERE rowid = 1"),
    ("a NaN metric", "UPDATE cells SET metrics_json = replace(metrics_json, '\"output_throughput\": ', "
                     "'\"output_throughput\": NaN, \"x\": ') WHERE rowid = 1"),
    ("meta engine missing", "DELETE FROM meta WHERE key = 'engine'"),
    ("a plan as text", "UPDATE servers SET plan_json = '\"ok\"' WHERE rowid = 1"),
)
_GOOD: list[Path] = []


def _good_store() -> Path:
    if not _GOOD:
        from specbench.testing.synthetic import write_store

        _GOOD.append(write_store(_tmp() / "good.db", tps=(1,), concurrencies=(1, 2)))
    return _GOOD[0]


@st.composite
def p_store_case(draw: st.DrawFn) -> Case:
    what, sql = draw(st.sampled_from(STORE_SLIPS))
    d = _tmp()
    path = d / "s.db"
    shutil.copyfile(_good_store(), path)
    con = sqlite3.connect(path)
    try:
        con.execute(sql.replace("rowid = 1", f"rowid = {draw(st.integers(1, 8))}"))
        con.commit()
    finally:
        con.close()
    cmd = draw(st.sampled_from(["report", "export", "export-json", "export-jsonl"]))
    argv = {"report": ["report", str(path), "--out", str(d / "r")], "export": ["export", str(path)],
            "export-json": ["export", str(path), "-f", "json"],
            "export-jsonl": ["export", str(path), "-f", "jsonl"]}[cmd]
    return Case("p-stores", argv, f"{what} ({sql[-14:]}), {cmd}", extra={"timeout_s": 90.0 if cmd == "report" else 20.0})


PLAUSIBLE = {"p-config": p_config_case, "p-draft": p_draft_case, "p-launch": p_launch_case,
             "p-matrix": p_matrix_case, "p-logs": p_log_case, "p-stores": p_store_case}
_ = ROOT  # the repository root the strategies share
