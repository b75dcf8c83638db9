"""Parse an engine log into `LogFacts`. Tolerant regexes, one per line format; never raises on any input.

Formats (file::function in the engine that prints them; real boots with each are kept in tests/data/):

SGLang 0.4.x-0.5.x
- `Memory baseline taken. mem usage=%.2f GB`                         distributed/bootstrap.py
- `Load weight begin. avail mem=%.2f GB`                              model_runner.py::load_model
- `Load weight end. [elapsed=%.2f s, ]type=X, [dtype=..., ][quant, ]avail mem=%.2f GB[, mem usage=%.2f GB].`
- `Mamba Cache is allocated. max_mamba_cache_size: K, conv_state size: xGB, ssm_state size: yGB
   [intermediate_ssm_state_cache size: zGB intermediate_conv_window_cache size: wGB ]`   memory_pool.py::MambaPool
- `KV Cache is allocated. [dtype: d, ]#tokens: N, K size: k GB, V size: v GB` (or `KV size:`; 2nd on a rank = draft)
- `Memory pool end. avail mem=%.2f GB`
- `max_total_num_tokens=N, chunked_prefill_size=.., max_prefill_tokens=.., max_running_requests=.., context_len=..,
   available_gpu_mem=x GB`                                            scheduler.py::init_model_worker
- `Capture cuda graph end. Time elapsed: t s. mem usage=m GB. avail mem=a GB.` (<= early 2026) and
  `Capture {target|draft} {decode|verify|prefill} CUDA graph end. bs=[..], elapsed=t s, mem usage=m GB, avail mem=a GB.`
- `max_running_requests is capped to N by the mamba state cache (max_mamba_cache_size=K, R state slots per request)`
- `Decode batch[.,] #running-req: n, ... mamba num: m, ... accept len: a, ... gen throughput (token/s): g, ...`
- `server_args=ServerArgs(...)`
vLLM 0.x
- `Loading model weights took x GB` (V0), `Model loading took x GiB [memory ]and t seconds` (V1)
- `total_gpu_memory (T GiB) x gpu_memory_utilization (u) = R GiB`; `model weights take ..; non_torch_memory takes ..;
   PyTorch activation peak memory takes ..; the rest of the memory reserved for KV Cache is K GiB.` (V0)
- `Available KV cache memory: K GiB`; `GPU KV cache size: N tokens`; `Maximum concurrency for L tokens per request: Cx`
- `# GPU blocks: n, # CPU blocks: m`; `Graph capturing finished in t secs, took g GiB`
- `SpecDecoding metrics: Mean acceptance length: a, ...`; `non-default args: {...}`

Author-condensed excerpts (`../shared/data/real-logs-dev.json`) drop words (`conv_state 0.12GB`, `K 5.22 GB`) or
paraphrase (`16 Mamba slots and 337292 KV token slots`); the tolerant patterns below read those too.
"""

from __future__ import annotations

import re

from specbench.engines.sglang.loglines import LOAD_END, SERVER_ARGS, runtime_line, sglang_line
from specbench.engines.vllm.loglines import V_LOAD, vllm_line
from specbench.logs.facts import EngineError, LogFacts
from specbench.logs.lineacc import Acc
from specbench.logs.normalize import Line, decode, normalize
from specbench.logs.serverargs import parse_sglang_server_args

_VLLM_MARK = re.compile(r"vLLM|vllm|KV cache size: [\d,]+ tokens|Model loading took|gpu_memory_utilization|"
                        r"Mamba cache blocks|max_num_seqs|GPU blocks:")
_SGL_MARK = re.compile(r"sglang|Load weight (?:begin|end)|KV Cache is allocated|Mamba Cache is allocated|"
                       r"max_total_num_tokens=|ServerArgs\(|Decode batch|TP\d|max_running_request is zero|"
                       r"Loaded weights leave no GPU memory|mem-fraction-static|max_mamba_cache_size|Mamba slots")

# Every format above contains one of these words; a line with none of them is skipped without running the rest.
_TRIGGER = re.compile(
    r"Load weight|Memory baseline|Mamba Cache|KV Cache|Memory pool end|max_total_num_tokens|capped to|"
    r"reduced from the requested|KV pool holds|Capture|server_args=|accept len|gen throughput|mamba num|fired up|"
    r"Uvicorn running|startup complete|KV token|Mamba slots|weight usage|each for K/V|max_mamba_cache_size|took|"
    r"total_gpu_memory|model weights take|KV cache|Maximum concurrency|GPU blocks|Mamba cache|SpecDecoding|"
    r"non-default args|LLM engine|server version|Starting vLLM|Free memory on device|Desired GPU|peak activation|"
    r"attention block size|GiB for KV|SWAKVPool|init engine|sglang|CUDA graph|Graph capturing|max_running_requests|"
    r"KV cache dtype",
    re.I)

# ---------------------------------------------------------------- errors
_EXC = re.compile(r"^(?:[\w]+\.)*(?:\w*Error|\w*Exception|KeyboardInterrupt|SystemExit)\b(?::|$) ?(.*)")
_BOOT_START = re.compile(r"server_args=ServerArgs\(|non-default args: \{|Initializing a V\d LLM engine")


def split_boots(lines: list[Line]) -> list[list[Line]]:
    """A file can hold several boots (journalctl of a restarting service). A new boot starts at an argument dump
    once the current boot already loaded weights or failed."""
    boots: list[list[Line]] = [[]]
    seen_work = False
    for line in lines:
        t = line.text
        if seen_work and ("ServerArgs(" in t or "non-default args" in t or "LLM engine" in t) \
                and _BOOT_START.search(t):
            boots.append([])
            seen_work = False
        boots[-1].append(line)
        if not seen_work and (("oad" in t and (LOAD_END.search(t) or V_LOAD.search(t))) or _EXC.match(t)):
            seen_work = True
    return [b for b in boots if b]


def _primary(lines: list[Line]) -> tuple[int | None, int | None]:
    """(stage, rank) whose numbers we report: pipeline stage 0 (or none), lowest TP rank."""
    keys = sorted({(ln.stage if ln.stage is not None else -1, ln.rank if ln.rank is not None else -1)
                   for ln in lines if ln.rank is not None or ln.stage is not None})
    if not keys:
        return None, None
    stage, rank = keys[0]
    return (None if stage < 0 else stage), (None if rank < 0 else rank)


def _other_rank(line: Line, stage: int | None, rank: int | None) -> bool:
    return (line.rank is not None and rank is not None and line.rank != rank) or \
        (line.stage is not None and stage is not None and line.stage != stage)


_MARK_LINES = 5000


def facts_from_lines(lines: list[Line], boots: int = 1) -> LogFacts:
    """Fold one boot's cleaned lines into LogFacts. Per-rank values come from the lowest rank seen (TP0):
    other ranks print the same lines with their own numbers, interleaved."""
    acc = Acc()
    p_stage, p_rank = _primary(lines)
    for idx, line in enumerate(lines):
        t = line.text
        if "Decode batch" in t and not _other_rank(line, p_stage, p_rank):
            runtime_line(acc, t)  # fast path: the bulk of a long log
            if idx < _MARK_LINES:
                acc.sgl_marks += 1
            continue
        if idx < _MARK_LINES:  # the engine is recognised from the start of the boot
            acc.sgl_marks += bool(_SGL_MARK.search(t))
            acc.vllm_marks += bool(_VLLM_MARK.search(t))
        if _EXC.match(t) and len(t) < 4000:
            acc.errors.append(EngineError(message=t.strip(), line=line.no))
        if not _TRIGGER.search(t):
            continue
        if _other_rank(line, p_stage, p_rank):
            # other ranks: only errors (above) and the server-args dump count
            m = SERVER_ARGS.search(line.text)
            if m and not acc.server_args:
                acc.server_args = parse_sglang_server_args(m.group(1))
            continue
        if not vllm_line(acc, line):
            sglang_line(acc, line)
    if acc.vllm_marks > acc.sgl_marks:
        engine: str | None = "vllm"
    elif acc.sgl_marks:
        engine = "sglang"
    else:
        engine = None
    if engine is not None:
        from specbench.engines.base import engine as engine_named

        printed = engine_named(engine).version_from_log([ln.text for ln in lines])
        if printed:
            acc.first("engine_version", printed)
    # pending captures that never ended are kept: an OOM during capture leaves exactly that trace
    graphs = list(acc.graphs) + list(acc.pending_graph.values())
    v = acc.v
    if v.get("max_running_requests") is None and v.get("mamba_cap_requests") is not None:
        v["max_running_requests"] = v["mamba_cap_requests"]
    known = set(LogFacts.__dataclass_fields__)
    kwargs = {k: val for k, val in v.items() if k in known}
    return LogFacts(
        engine=engine,
        graphs=tuple(sorted(graphs, key=lambda g: g.line)),
        accept_lengths=tuple(acc.lists.get("accept_lengths", ())),
        gen_throughputs=tuple(acc.lists.get("gen_throughputs", ())),
        running_requests=tuple(acc.lists.get("running_requests", ())),
        mamba_num=tuple(acc.lists.get("mamba_num", ())),
        acceptance_rates_pct=tuple(acc.lists.get("acceptance_rates_pct", ())),
        server_args=acc.server_args,
        errors=tuple(acc.errors),
        ranks=tuple(sorted({ln.rank for ln in lines if ln.rank is not None})),
        boots=boots,
        lines=len(lines),
        **kwargs,
    )


def parse_text(raw: bytes | str) -> LogFacts:
    """Whole log text -> facts of its last boot. Never raises."""
    lines = normalize(decode(raw))
    boots = split_boots(lines)
    if not boots:
        return LogFacts(boots=0)
    return facts_from_lines(boots[-1], boots=len(boots))
