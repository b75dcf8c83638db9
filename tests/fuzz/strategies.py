"""Hypothesis strategies of hostile inputs for the five categories: configs, launch commands, matrices, logs and
stores. Each draws a `Case` (harness.py): the files it needs are written under a fresh temporary folder, the argv
names them, and `must_fail` / the oracle say what a correct answer is."""

from __future__ import annotations

import json
import math
import os
import random
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from fuzz.harness import Case, Result

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "src" / "specbench" / "data" / "configs"
LOGS = sorted((ROOT / "tests" / "data" / "doctor_corpus").glob("*.log"))
HOSTILE: list[Any] = [True, False, 0, -1, 1, 3, 1e8, 100_000_000, 10**30, 1e30, math.inf, -math.inf, math.nan, "4096",
                      "no", "", "[/]", None, [], [1], ["x"], {}, {"a": 1}, 2.5, 4096.0]


def _tmp() -> Path:
    return Path(tempfile.mkdtemp(prefix="sbfuzz-"))


def _json_status(res: Result) -> dict[str, Any] | None:
    try:
        d = json.loads(res.stdout)
    except ValueError:
        return None
    return d if isinstance(d, dict) else None


# ------------------------------------------------------------------------------------------------ configs
POSITIVE = ("hidden_size", "num_hidden_layers", "vocab_size", "num_attention_heads", "num_key_value_heads",
            "head_dim", "intermediate_size", "max_position_embeddings")
BOOLS = ("tie_word_embeddings", "attention_bias")


def _config_bad(key: str, v: Any) -> bool:
    if key in POSITIVE:
        ok = isinstance(v, int) and not isinstance(v, bool) and 0 < v <= 1 << 20
        if key in ("num_attention_heads", "num_key_value_heads") and ok:
            return v not in (1, 2, 4, 8)  # must divide 32/8 the base's heads; other values may be refused
        return not ok
    if key in BOOLS:
        return v is not None and not isinstance(v, bool)
    if key == "architectures":
        return v is not None and not (isinstance(v, list) and all(isinstance(x, str) for x in v))
    if key == "quantization_config":
        return v not in (None, {}) and not isinstance(v, dict) or v == {"a": 1}
    if key == "torch_dtype":
        return v not in (None, "", "bfloat16", "float16")
    return False


@st.composite
def config_case(draw: st.DrawFn) -> Case:
    base_file = draw(st.sampled_from(sorted(CONFIGS.glob("*.json"))))
    cfg = json.loads(base_file.read_text())
    keys = list(POSITIVE + BOOLS) + ["architectures", "quantization_config", "torch_dtype"]
    edits = draw(st.lists(st.tuples(st.sampled_from(keys), st.sampled_from(HOSTILE + ["bfloat16", "float99",
                                                                                      {"quant_method": "weird"}])),
                          min_size=1, max_size=3, unique_by=lambda t: t[0]))
    level = cfg["text_config"] if isinstance(cfg.get("text_config"), dict) else cfg
    bad = False
    for k, v in edits:
        if v is None:
            level.pop(k, None)
            if k in ("hidden_size", "num_hidden_layers", "vocab_size"):
                bad = True
            continue
        level[k] = v
        bad = bad or _config_bad(k, v) or (k == "quantization_config" and v == {"quant_method": "weird"})
    d = _tmp()
    path = d / "config.json"
    path.write_text(json.dumps(cfg))  # NaN/Infinity written as the JSON extensions Python reads back
    engine = draw(st.sampled_from(["sglang", "vllm"]))
    cmd = (["python", "-m", "sglang.launch_server", "--model-path", "m"] if engine == "sglang" else ["vllm", "serve", "m"])
    what = f"{base_file.stem} with {edits!r}"

    def oracle(res: Result) -> str | None:
        d = _json_status(res)
        if d is None:
            return "exit 0 without the JSON contract"
        return None

    return Case("config", ["plan", "--json", "--no-fixes", "--model-config", str(path), "--", *cmd], what,
                must_fail=bad, oracle=oracle)


# ------------------------------------------------------------------------------------------------ launch commands
SGL_FLAGS = {"--page-size": "pos", "--mem-fraction-static": "frac", "--context-length": "pos", "--tp": "tp",
             "--max-running-requests": "pos", "--chunked-prefill-size": "any", "--dtype": "dtype",
             "--kv-cache-dtype": "kvdtype", "--speculative-algorithm": "spec", "--speculative-num-steps": "pos",
             "--max-total-tokens": "pos", "--cuda-graph-max-bs": "any"}
VLLM_FLAGS = {"--gpu-memory-utilization": "frac", "--max-model-len": "posauto", "--block-size": "pos",
              "--tensor-parallel-size": "tp", "--max-num-seqs": "pos", "--dtype": "dtype",
              "--kv-cache-dtype": "kvdtype", "--max-num-batched-tokens": "pos"}
FLAG_VALUES = ["nan", "inf", "-inf", "-1", "0", "1", "8", "1e30", "0.5", "abc", "[/]", "[bold]x[/]", "", "bfloat16",
               "float16", "fp8_e4m3", "float99", "EAGLE", "NOPE", "99999999999999999999", "4096", "0.0"]


def _flag_bad(kind: str, v: str) -> bool:
    try:
        f = float(v)
    except ValueError:
        f = math.nan
    if kind == "posauto" and v == "-1":  # vLLM: -1 = the largest length that fits
        return False
    if kind in ("pos", "tp", "posauto"):
        return not (v.isdigit() and 0 < int(v) < 1 << 40)
    if kind == "frac":
        return not (0 < f <= 1)
    if kind == "dtype":
        return v not in ("bfloat16", "float16", "auto")
    if kind == "kvdtype":
        return v not in ("bfloat16", "fp8_e4m3", "auto")
    if kind == "spec":
        return v not in ("EAGLE",)
    return False


@st.composite
def launch_case(draw: st.DrawFn) -> Case:
    engine = draw(st.sampled_from(["sglang", "vllm"]))
    table = SGL_FLAGS if engine == "sglang" else VLLM_FLAGS
    flags = draw(st.lists(st.tuples(st.sampled_from(sorted(table)), st.sampled_from(FLAG_VALUES)), min_size=1,
                          max_size=2, unique_by=lambda t: t[0]))
    as_json = draw(st.booleans())
    cmd = (["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B"] if engine == "sglang"
           else ["vllm", "serve", "Qwen/Qwen3-8B"])
    argv_flags = [w for f, v in flags for w in (f, v)]
    bad = any(_flag_bad(table[f], v) for f, v in flags)

    def oracle(res: Result) -> str | None:
        if not as_json:
            return None
        d = _json_status(res)
        if d is None:
            return "exit 0 without the JSON contract"
        if bad and d.get("status") == "ok":
            return f"planned ok: {flags}"
        return None

    # an invalid value may be refused (exit 2) or planned as a predicted failure (exit 0, status not ok)
    return Case("launch", ["plan", *(["--json"] if as_json else []), "--no-fixes", "--", *cmd, *argv_flags],
                f"{engine} {argv_flags}", oracle=oracle)


# ------------------------------------------------------------------------------------------------ matrices
MATRIX_KEYS = {"server.tp": "pos", "server.context_length": "pos", "server.mem_fraction_static": "frac",
               "client.concurrency": "pos", "client.num_requests": "pos", "client.request_rate": "rate",
               "client.slo_ttft_ms": "slo", "timeouts.ready_s": "fpos", "timeouts.request_s": "fpos",
               "client.warmup_requests": "nonneg"}
TOML_VALUES = ["true", "false", "0", "-1", "1", "2", "nan", "inf", "-inf", "1.5", '"x"', "[]", "[1, 1]", "[1, 2]",
               "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32]",
               "1e30", "100000000", '"inf"', "[0.5, 0.25]"]


def _toml_ok(kind: str, v: str) -> bool:
    vals = [x.strip() for x in v.strip("[]").split(",")] if v.startswith("[") else [v]
    if v.startswith("[") and (v == "[]" or len(set(vals)) != len(vals)):
        return False
    if v.startswith("[") and kind not in ("pos", "frac", "rate") or len(vals) > 1 and kind not in ("pos", "frac", "rate"):
        return False
    for x in vals:
        try:
            f = float(x)
        except ValueError:
            if kind == "rate" and x == '"inf"':
                continue
            return False
        if x in ("true", "false") or math.isnan(f):
            return False
        is_int = x.lstrip("-").isdigit()
        if kind == "pos" and not (is_int and f >= 1):
            return False
        if kind == "nonneg" and not (is_int and f >= 0):
            return False
        if kind == "frac" and not 0 < f <= 1:
            return False
        if kind == "rate" and not f > 0:
            return False
        if kind == "slo" and not 0 < f < math.inf:
            return False
        if kind == "fpos" and not (0 < f < math.inf and f <= 604800):
            return False
    return True


@st.composite
def matrix_case(draw: st.DrawFn) -> Case:
    edits = draw(st.lists(st.tuples(st.sampled_from(sorted(MATRIX_KEYS)), st.sampled_from(TOML_VALUES)), min_size=1,
                          max_size=4, unique_by=lambda t: t[0]))
    tables: dict[str, list[str]] = {}
    for k, v in edits:
        t, key = k.split(".")
        tables.setdefault(t, []).append(f"{key} = {v}")
    text = 'engine = "local"\n' + "".join(f"[{t}]\n" + "\n".join(lines) + "\n" for t, lines in tables.items())
    d = _tmp()
    (d / "m.toml").write_text(text)
    lengths = [len(v.split(",")) if v.startswith("[") and v != "[]" else 1 for _, v in edits]
    big = math.prod(lengths) > 10_000
    bad = big or not all(_toml_ok(MATRIX_KEYS[k], v) for k, v in edits)
    return Case("matrix", ["run", str(d / "m.toml"), "--dry-run", "--json", "--store", str(d / "s.db")],
                text.replace("\n", "; "), must_fail=bad)


# ------------------------------------------------------------------------------------------------ logs
# what makes the doctor's "started" without a ready line (doctor/lastboot.py::boot_status): serving records, a failure,
# a cap, or one of the engines' last start-up steps (engines/*/loglines.py::LATE_BOOT: vLLM's KV cache size, "# GPU
# blocks: N" (V0), "Maximum concurrency", graph capture; SGLang's cuda graph capture, "Tree cache initialized"). The
# doctor then says the log ends before the engine said it serves (facts.ready false).
LATE = ("#running-req", "gen throughput", "accept len", "cuda graph", "kv cache", "capturing", "avg prompt throughput",
        "max_total_num_tokens", "num_gpu_blocks", "gpu blocks: ", "maximum concurrency", "tree cache initialized",
        "Running:", "KV tokens", "token slots", "ValueError", "Error", "exceeds", "capped")
READY = ("The server is fired up", "Uvicorn running on", "Application startup complete", "Starting vLLM API server",
         "init engine (profile, create kv cache, warmup model) took")


@st.composite
def log_case(draw: st.DrawFn) -> Case:
    d = _tmp()
    kind = draw(st.sampled_from(["cut", "cut", "cut", "bytes", "longline", "nan", "fifo", "dir", "devzero", "empty"]))
    path = d / "x.log"
    if kind in ("cut", "nan", "longline"):  # the name gets the source log and the cut
        src_path = draw(st.sampled_from(LOGS))
        src = src_path.read_bytes()
        at = draw(st.integers(0, len(src)))
        kind += f" {src_path.name}[:{at}]"
        data = src[:at]
        if kind.startswith("nan"):
            data = data.replace(b"0.", b"nan", 3).replace(b"GB", b"inf GB", 2)
        if kind.startswith("longline"):
            data += b"A" * draw(st.integers(1, 3 << 20)) + b"\n" + src[at:]
        path.write_bytes(data)
    elif kind == "bytes":
        path.write_bytes(draw(st.binary(max_size=4096)))
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "dir":
        path = d
    elif kind == "devzero":
        path = Path("/dev/zero")
    else:
        path.write_bytes(b"")
    text = path.read_bytes() if path.is_file() else b""
    # the doctor's "started" (doctor/lastboot.py::boot_status) also counts serving records and the last start-up steps
    ready = any(m.encode().lower() in text.lower() for m in READY + LATE)

    def oracle(res: Result) -> str | None:
        j = _json_status(res)
        if j is None:
            return "exit 0 without the JSON contract"
        if j.get("status") == "started" and not ready:
            return "a log without a ready line reported as started"
        return None

    return Case("logs", ["doctor", "--json", str(path)], f"{kind} {path.name}", must_fail=kind in ("fifo", "dir",
                "devzero"), oracle=oracle)


# ------------------------------------------------------------------------------------------------ stores
_STORE_CACHE: dict[str, bytes] = {}


def _good_store() -> bytes:
    if "s" not in _STORE_CACHE:
        from specbench.testing.synthetic import write_store

        p = _tmp() / "good.db"
        write_store(p, tps=(1,), concurrencies=(1, 2))
        _STORE_CACHE["s"] = p.read_bytes()
    return _STORE_CACHE["s"]


@st.composite
def store_case(draw: st.DrawFn) -> Case:
    d = _tmp()
    path = d / "s.db"
    good = _good_store()
    kind = draw(st.sampled_from(["truncate", "flip", "random", "foreign", "empty", "header"]))
    if kind == "truncate":
        path.write_bytes(good[: draw(st.integers(0, len(good) - 1))])
    elif kind == "flip":
        b = bytearray(good)
        rng = random.Random(draw(st.integers(0, 2**32)))
        for _ in range(draw(st.integers(1, 64))):
            b[rng.randrange(len(b))] = rng.randrange(256)
        path.write_bytes(bytes(b))
    elif kind == "random":
        path.write_bytes(draw(st.binary(min_size=1, max_size=8192)))
    elif kind == "foreign":
        con = sqlite3.connect(path)
        con.execute("create table cells (x int)")
        con.execute("create table other (y text)")
        con.commit()
        con.close()
    elif kind == "header":
        path.write_bytes(good[:100] + b"\x00" * 4096)
    else:
        path.write_bytes(b"")
    cmd = draw(st.sampled_from(["report", "export", "export-json"]))
    argv = {"report": ["report", str(path), "--out", str(d / "r")], "export": ["export", str(path)],
            "export-json": ["export", str(path), "-f", "json"]}[cmd]
    return Case("stores", argv, f"{kind} store, {cmd}")


CATEGORIES = {"config": config_case, "launch": launch_case, "matrix": matrix_case, "logs": log_case,
              "stores": store_case}
