"""Parse an engine log into `LogFacts`. Tolerant regexes, one per line format; never raises on any input.

Engine-neutral: each engine passes what it knows about its own lines as an `EngineLines` (its
`engines/<engine>/loglines.py::LINES`); the doctor collects them from the engine folders. Formats read by the engines:

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from specbench.logs.facts import EngineError, LogFacts
from specbench.logs.lineacc import Acc
from specbench.logs.normalize import Line, decode, normalize


def _no_version(lines: Sequence[str]) -> str | None:
    return None


@dataclass(frozen=True)
class EngineLines:
    """What one engine tells the parser about its log lines (`engines/<engine>/loglines.py::LINES`)."""

    name: str
    mark: re.Pattern[str]  # a line this engine prints: counted over the first lines, the most marks wrote the log
    trigger: re.Pattern[str]  # every line format `read` knows contains a match (the rest is skipped cheaply)
    read: Callable[[Acc, Line], bool]  # fold one line into the accumulator; True when it was one of its formats
    boot_keys: tuple[str, ...]  # substrings of the argument dump that begins a boot ...
    boot_start: re.Pattern[str]  # ... and its pattern
    weights_done: re.Pattern[str]  # weights loaded: after it (or an error), a new argument dump is a new boot
    version: Callable[[Sequence[str]], str | None] = _no_version  # the printed release, when the engine prints it
    other_rank: Callable[[Acc, Line], None] | None = None  # what another rank's line still gives (its argument dump)
    bulk_key: str = ""  # substring of the bulk line format (decode statistics) read on the fast path ...
    bulk_read: Callable[[Acc, str], None] | None = None  # ... by this
    fallback: bool = False  # reads every line no other engine claimed (author-condensed excerpts); wins mark ties


# ---------------------------------------------------------------- errors
_EXC = re.compile(r"^(?:[\w]+\.)*(?:\w*Error|\w*Exception|KeyboardInterrupt|SystemExit)\b(?::|$) ?(.*)")


def _ordered(engines: Sequence[EngineLines]) -> list[EngineLines]:
    return sorted(engines, key=lambda e: e.fallback)  # the fallback reader last


def split_boots(lines: list[Line], engines: Sequence[EngineLines]) -> list[list[Line]]:
    """A file can hold several boots (journalctl of a restarting service). A new boot starts at an argument dump
    once the current boot already loaded weights or failed."""
    keys = tuple(k for e in engines for k in e.boot_keys)
    boots: list[list[Line]] = [[]]
    seen_work = False
    for line in lines:
        t = line.text
        if seen_work and any(k in t for k in keys) and any(e.boot_start.search(t) for e in engines):
            boots.append([])
            seen_work = False
        boots[-1].append(line)
        if not seen_work and (("oad" in t and any(e.weights_done.search(t) for e in engines)) or _EXC.match(t)):
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


def _writer(marks: dict[str, int], engines: Sequence[EngineLines]) -> EngineLines | None:
    """The engine with the most marks; a tie goes to the fallback reader; none without any mark."""
    best = max(engines, key=lambda e: (marks.get(e.name, 0), e.fallback), default=None)
    return best if best is not None and marks.get(best.name, 0) > 0 else None


def facts_from_lines(lines: list[Line], engines: Sequence[EngineLines], boots: int = 1) -> LogFacts:
    """Fold one boot's cleaned lines into LogFacts. Per-rank values come from the lowest rank seen (TP0):
    other ranks print the same lines with their own numbers, interleaved."""
    acc = Acc()
    readers = _ordered(engines)
    trigger = re.compile("|".join(f"(?:{e.trigger.pattern})" for e in readers), re.I) if readers else None
    bulk = [(e.bulk_key, e.bulk_read, e.name) for e in readers if e.bulk_key and e.bulk_read is not None]
    p_stage, p_rank = _primary(lines)
    for idx, line in enumerate(lines):
        t = line.text
        fast = next(((read, name) for key, read, name in bulk if key in t), None)
        if fast is not None and not _other_rank(line, p_stage, p_rank):
            fast[0](acc, t)  # fast path: the bulk of a long log
            if idx < _MARK_LINES:
                acc.marks[fast[1]] = acc.marks.get(fast[1], 0) + 1
            continue
        if idx < _MARK_LINES:  # the engine is recognised from the start of the boot
            for e in readers:
                if e.mark.search(t):
                    acc.marks[e.name] = acc.marks.get(e.name, 0) + 1
        if _EXC.match(t) and len(t) < 4000:
            acc.errors.append(EngineError(message=t.strip(), line=line.no))
        if trigger is None or not trigger.search(t):
            continue
        if _other_rank(line, p_stage, p_rank):
            # other ranks: only errors (above) and the argument dump count
            for e in readers:
                if e.other_rank is not None:
                    e.other_rank(acc, line)
            continue
        for e in readers:
            if e.read(acc, line):
                break
    writer = _writer(acc.marks, readers)
    if writer is not None:
        printed = writer.version([ln.text for ln in lines])
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
        engine=writer.name if writer is not None else None,
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


def parse_text(raw: bytes | str, engines: Sequence[EngineLines]) -> LogFacts:
    """Whole log text -> facts of its last boot. Never raises."""
    lines = normalize(decode(raw))
    boots = split_boots(lines, engines)
    if not boots:
        return LogFacts(boots=0)
    return facts_from_lines(boots[-1], engines, boots=len(boots))
