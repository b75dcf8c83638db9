"""vLLM line formats (V0 and V1, GPU and CPU builds) -> accumulator. See `parse.py` for the list of formats."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from specbench.logs.facts import GraphCapture
from specbench.logs.lineacc import GB, INT, NUM, Acc, find, to_float, to_int
from specbench.logs.normalize import Line
from specbench.logs.parse import EngineLines
from specbench.logs.serverargs import parse_keyvalues, parse_vllm_dict

# ---------------------------------------------------------------- vLLM
V_LOAD = re.compile(r"(?:Model loading took|Loading model weights took) " + NUM + GB, re.I)
_V_TOTAL = re.compile(r"total_gpu_memory \(" + NUM + GB + r"\) x gpu_memory_utilization \(" + NUM + r"\) = "
                      + NUM + GB)
SNUM = r"(-?\d+(?:\.\d+)?)"  # a profiled size can be negative (the profile left less than nothing for the KV cache)
# V0 0.6.x (worker/worker.py::Worker.determine_num_available_blocks): "Memory profiling results:
# total_gpu_memory=23.58GiB initial_memory_usage=15.34GiB peak_torch_memory=17.06GiB memory_usage_post_profile=15.35GiB
# non_torch_memory=0.35GiB kv_cache_size=3.81GiB gpu_memory_utilization=0.90"
_V_V0_PROFILE = re.compile(r"Memory profiling results: total_gpu_memory=" + NUM + r" ?GiB\b.*?non_torch_memory="
                           + SNUM + r" ?GiB\b.*?kv_cache_size=" + SNUM + r" ?GiB\b.*?gpu_memory_utilization=" + NUM)
_V_V0_BREAKDOWN = re.compile(
    r"model weights take " + NUM + GB + r"; non_torch_memory takes " + SNUM + GB
    + r"; PyTorch activation peak memory takes " + NUM + GB
    + r"; the rest of the memory reserved for KV Cache is " + SNUM + GB)
_V_AVAIL_KV = re.compile(r"Available KV cache memory: " + SNUM + GB)
# CPU (vllm/v1/worker/cpu_worker.py::CPUWorker.determine_available_memory@0.32.0):
# "Explicitly set (K/T) GiB for KV cache on node N." / "Auto set (K/T) GiB for KV cache ..."
_V_CPU_KV = re.compile(r"(?:Explicitly|Auto) set \(" + NUM + r"/" + NUM + r"\) ?GiB for KV cache")
_V_CPU_NONKV = re.compile(NUM + r" GiB memory was consumed by non-kv usages")
_V_KV_SIZE = re.compile(r"\b(GPU|CPU|XPU|[A-Z]{2,4}) KV cache size: " + INT + r" tokens")
_V_CONC = re.compile(r"Maximum concurrency for " + INT + r" tokens per request: " + NUM + r"x")
# V0: "# GPU blocks: N, # CPU blocks: M" (gpu_executor.py, llm_engine.py), "# cuda blocks: N" / "# CUDA blocks: N"
# (executor_base.py, 0.7-0.8: the device name), "GPU blocks: N" in condensed pastes
_V_BLOCKS = re.compile(r"# (?:GPU|cuda|CUDA|XPU|xpu) blocks: (\d+)(?:, # CPU blocks: (\d+))?")
_V_GRAPH = re.compile(r"Graph capturing finished in " + NUM + r" secs?, took " + NUM + GB)
_V_GRAPH_EST = re.compile(r"Estimated CUDA graph memory: " + NUM + GB)
_V_MAMBA_BLOCKS = re.compile(r"max_num_seqs \((\d+)\) exceeds available Mamba cache blocks \((\d+)\)")
_V_SPEC = re.compile(r"SpecDecoding metrics: Mean acceptance length: " + NUM)
_V_SPEC_RATE = re.compile(r"Avg Draft acceptance rate: " + NUM + "%")
# >= 0.18 summary (vllm/v1/worker/gpu_worker.py::Worker.compile_or_warm_up_model@0.32.0), parsed piece by piece
# so older wordings and cut lines still give parts
_V_FREE_START = re.compile(r"Free memory on device(?: \S+)? \(" + NUM + r"/" + NUM + r" ?GiB\) on startup")
_V_DESIRED = re.compile(r"Desired GPU memory utilization is \(" + NUM + r", " + NUM + GB + r"\)")
_V_CONSUMED = re.compile(NUM + GB + r" for consumed memory")
_V_WEIGHT_PART = re.compile(NUM + GB + r" for weight")
_V_PEAK_PART = re.compile(NUM + GB + r" for peak activation")
_V_NONTORCH_PART = re.compile(NUM + GB + r" for non-torch memory")
_V_GRAPH_PART = re.compile(NUM + GB + r" for CUDAGraph memory")
_V_KV_IN_USE = re.compile(r"Current kv cache memory in use is " + NUM + GB)
_V_GRAPH_POOL = re.compile(r"CUDA graph pool memory: " + NUM + GB + r" \(actual\), " + NUM + GB + r" \(estimated\)")
_V_BLOCK = re.compile(r"Setting attention block size to (\d+) tokens")
_V_MAMBA_MODE = re.compile(r"Mamba cache mode is set to '(\w+)'")
_V_NONDEFAULT = re.compile(r"non-default args: (\{.*)")


def nondefault_args_text(line: str) -> str | None:
    """The `{...}` text of vLLM's start-up dump "non-default args: {...}" (entrypoints/utils.py), to the end of the
    line, trailing blanks dropped; a truncated dump keeps what was printed. None when the line has none."""
    m = _V_NONDEFAULT.search(line)
    return m.group(1).rstrip() if m else None

_V_INIT = re.compile(r"Initializing a V\d LLM engine \(v([\w.+\-]+)\) with config: (.*)")
_V_VERSION = re.compile(r"vLLM API server version ([\w.+\-]+)")
_V_READY = re.compile(r"Starting vLLM API server|init engine \(profile, create kv cache, warmup model\) took", re.I)

# ---------------------------------------------------------------- one handler per line format
_Handler = Callable[[Acc, Any, Line], bool]


def _raw(s: str | None) -> str | None:
    return s


def _groups(*fields: tuple[str, Callable[[str | None], Any]], counts: bool = True) -> _Handler:
    """The handler of a line whose match groups 1, 2, ... are, in order, the given (key, converter) fields: each
    kept as the key's first value. `counts`: whether the line is a vLLM format (False: a generic pass records it)."""
    def handle(acc: Acc, m: Any, line: Line) -> bool:
        for i, (key, conv) in enumerate(fields, 1):
            acc.first(key, conv(m.group(i)))
        return counts
    return handle


def _cpu_kv(acc: Acc, m: Any, line: Line) -> bool:
    acc.first("device", "cpu")
    acc.first("available_kv_gib", to_float(m.group(1)))
    acc.first("total_gpu_memory_gib", to_float(m.group(2)))  # node memory on the CPU backend
    acc.first("non_torch_gib", find(_V_CPU_NONKV, line.text))
    return True


def _kv_size_or_concurrency(t: str) -> tuple[Any, Any] | None:
    """The capacity line: "KV cache size: N tokens" and/or "Maximum concurrency for L tokens ...: Cx"."""
    size, conc = _V_KV_SIZE.search(t), _V_CONC.search(t)
    return (size, conc) if size or conc else None


def _capacity(acc: Acc, m: Any, line: Line) -> bool:
    size, conc = m
    if size:
        acc.first("device", size.group(1).lower())
        acc.first("kv_tokens", to_int(size.group(2)))
    if conc:
        acc.first("max_concurrency_tokens", to_int(conc.group(1)))
        acc.first("max_concurrency", to_float(conc.group(2)))
    return True


def _graph(acc: Acc, m: Any, line: Line) -> bool:
    acc.graphs.append(GraphCapture(label="vllm cuda graph", mem_usage_gib=to_float(m.group(2)),
                                   elapsed_s=to_float(m.group(1)), line=line.no))
    return True


def _spec(acc: Acc, m: Any, line: Line) -> bool:
    acc.push("accept_lengths", to_float(m.group(1)))
    acc.push("acceptance_rates_pct", find(_V_SPEC_RATE, line.text))
    return True


def _is_summary(t: str) -> str | None:
    """The >= 0.18 memory summary (or a piece of it)."""
    return t if (_V_FREE_START.search(t) or _V_DESIRED.search(t) or "for peak activation" in t) else None


def _summary(acc: Acc, m: Any, line: Line) -> bool:
    t = line.text
    free = _V_FREE_START.search(t)
    if free:
        acc.first("avail_before_load_gib", to_float(free.group(1)))
        acc.first("total_gpu_memory_gib", to_float(free.group(2)))
    desired = _V_DESIRED.search(t)
    if desired:
        acc.first("gpu_memory_utilization", to_float(desired.group(1)))
        acc.first("budget_gib", to_float(desired.group(2)))
    acc.first("consumed_gib", find(_V_CONSUMED, t))
    acc.first("weights_gib", find(_V_WEIGHT_PART, t))
    acc.first("activation_peak_gib", find(_V_PEAK_PART, t))
    acc.first("non_torch_gib", find(_V_NONTORCH_PART, t))
    acc.first("cuda_graph_actual_gib", find(_V_GRAPH_PART, t))
    acc.first("available_kv_gib", find(_V_KV_IN_USE, t))
    return True


def _nondefault(acc: Acc, dump: Any, line: Line) -> bool:
    if not acc.server_args:
        acc.server_args = parse_vllm_dict(dump)
    return True


def _init(acc: Acc, m: Any, line: Line) -> bool:
    acc.first("engine_version", m.group(1))
    if not acc.server_args:
        acc.server_args = parse_keyvalues(m.group(2))
    return True


def _ready(acc: Acc, m: Any, line: Line) -> bool:
    acc.v["ready"] = True
    return True


# (match the line's text -> a match or None, handle it -> whether the line was a vLLM format), tried in order;
# the first match decides.
_ROWS: tuple[tuple[Callable[[str], Any], _Handler], ...] = (
    (V_LOAD.search, _groups(("weights_gib", to_float))),
    (_V_TOTAL.search, _groups(("total_gpu_memory_gib", to_float), ("gpu_memory_utilization", to_float),
                              ("budget_gib", to_float))),
    (_V_V0_PROFILE.search, _groups(("total_gpu_memory_gib", to_float), ("non_torch_gib", to_float),
                                   ("available_kv_gib", to_float), ("gpu_memory_utilization", to_float))),
    (_V_V0_BREAKDOWN.search, _groups(("weights_gib", to_float), ("non_torch_gib", to_float),
                                     ("activation_peak_gib", to_float), ("available_kv_gib", to_float))),
    (_V_AVAIL_KV.search, _groups(("available_kv_gib", to_float))),
    (_V_CPU_KV.search, _cpu_kv),
    (_kv_size_or_concurrency, _capacity),
    (_V_BLOCKS.search, _groups(("gpu_blocks", to_int), ("cpu_blocks", to_int))),
    (_V_GRAPH.search, _graph),
    (_V_GRAPH_EST.search, _groups(("cuda_graph_estimate_gib", to_float))),
    # the error line itself is recorded by the generic exception pass
    (_V_MAMBA_BLOCKS.search, _groups(("max_num_seqs", to_int), ("mamba_cache_blocks", to_int), counts=False)),
    (_V_SPEC.search, _spec),
    (_is_summary, _summary),
    (_V_GRAPH_POOL.search, _groups(("cuda_graph_actual_gib", to_float), ("cuda_graph_estimate_gib", to_float))),
    (_V_BLOCK.search, _groups(("attention_block_size", to_int))),
    (_V_MAMBA_MODE.search, _groups(("mamba_cache_mode", _raw))),
    (nondefault_args_text, _nondefault),
    (_V_INIT.search, _init),
    (_V_VERSION.search, _groups(("engine_version", _raw))),
    (_V_READY.search, _ready),
)


def vllm_line(acc: Acc, line: Line) -> bool:
    """vLLM formats; returns True when the line was one of them."""
    t = line.text
    for match, handle in _ROWS:
        m = match(t)
        if m is not None:
            return handle(acc, m, line)
    return False


# KV cache sized and allocated (vLLM's last start-up steps), on any worker
LATE_BOOT = re.compile(r"\bKV cache size: [\d,]+ tokens|# GPU blocks: \d|GPU blocks: \d|Maximum concurrency for|"
                       r"Graph capturing finished|Capturing cudagraphs|Capturing CUDA graphs")


# ---------------------------------------------------------------- what the log parser asks of vLLM (logs/parse.py)
# A line only vLLM prints: the engine that wrote a log is the one with the most of these in its first lines.
MARK = re.compile(r"vLLM|vllm|KV cache size: [\d,]+ tokens|Model loading took|gpu_memory_utilization|"
                  r"Mamba cache blocks|max_num_seqs|GPU blocks:|Available KV cache memory:|attention block size|"
                  r"padding layers, may waste|Padding mamba page size|max seq len|cuda blocks:|CUDA blocks:|"
                  r"Free memory on device")
# Every format of `_ROWS` contains one of these words (case-insensitive).
TRIGGER = re.compile(r"took|total_gpu_memory|model weights take|KV cache|Maximum concurrency|blocks: \d|Mamba cache|"
                     r"SpecDecoding|non-default args|LLM engine|server version|Starting vLLM|Free memory on device|"
                     r"Desired GPU|peak activation|attention block size|GiB for KV|init engine|CUDA graph|"
                     r"Graph capturing", re.I)
LINES = EngineLines(
    name="vllm", mark=MARK, trigger=TRIGGER, read=vllm_line, boot_keys=("non-default args", "LLM engine"),
    boot_start=re.compile(r"non-default args: \{|Initializing a V\d LLM engine"), weights_done=V_LOAD)
