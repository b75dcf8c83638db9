"""Parse an engine log into `LogFacts`. Tolerant regexes, one per line format; never raises on any input.

Formats (file::function in the engine that prints them; see `../shared/research/sglang-memory.md` §1, §3, §5.3,
§8 and `vllm-memory.md` §2.6, §4.5, §4.6, §5.5):

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
from dataclasses import dataclass, field
from typing import Any, Callable

from specbench.logs.facts import EngineError, GraphCapture, LogFacts
from specbench.logs.normalize import Line, decode, normalize
from specbench.logs.serverargs import parse_sglang_server_args, parse_keyvalues, parse_vllm_dict

_NUM = r"(\d+(?:\.\d+)?)"
_INT = r"(\d[\d,]*)"
_GB = r" ?Gi?B\b"


def _f(s: str | None) -> float | None:
    try:
        return float(s) if s is not None else None
    except ValueError:
        return None


def _i(s: str | None) -> int | None:
    try:
        return int(s.replace(",", "")) if s is not None else None
    except ValueError:
        return None


def _search(pattern: re.Pattern[str], text: str, conv: Callable[[str | None], Any] = _f) -> Any:
    m = pattern.search(text)
    return conv(m.group(1)) if m else None


def _first_of(text: str, conv: Callable[[str | None], Any], *patterns: re.Pattern[str]) -> Any:
    for pat in patterns:
        val = _search(pat, text, conv)
        if val is not None:
            return val
    return None


# ---------------------------------------------------------------- SGLang
_AVAIL = re.compile(r"avail(?:able)?[ _]mem(?:ory)?=" + _NUM + _GB, re.I)
_MEM_USAGE = re.compile(r"mem usage=(-?\d+(?:\.\d+)?)" + _GB, re.I)  # an MTP draft sharing target tensors can be < 0
_QUANT = re.compile(r"\bquant(?:_algo)?=([\w\-]+)")
_SWA_POOL = re.compile(r"SWAKVPool mem usage: " + _NUM + _GB + r", swa size: " + _INT + r", full size: " + _INT)
_ELAPSED = re.compile(r"(?:elapsed=|Time elapsed: ?)" + _NUM + r" ?s\b", re.I)
_TYPE = re.compile(r"\btype=([\w.]+)")
_DTYPE = re.compile(r"\bdtype[=:] ?(?:torch\.)?([\w]+)")

_LOAD_BEGIN = re.compile(r"Load weight begin\b", re.I)
_LOAD_END = re.compile(r"Load weight end\b", re.I)
_BASELINE = re.compile(r"Memory baseline taken\. ?mem usage=" + _NUM + _GB, re.I)
_MAMBA = re.compile(r"Mamba Cache is allocated\b", re.I)
_MAMBA_K = re.compile(r"max_mamba_cache_size[:=]? ?" + _INT)
_CONV = re.compile(r"(?<![_\w])conv_state(?: size)?[:=]? ?" + _NUM + _GB)
_SSM = re.compile(r"(?<![_\w])ssm_state(?: size)?[:=]? ?" + _NUM + _GB)
_ISSM = re.compile(r"intermediate_ssm_state(?:_cache)?(?: size)?[:=]? ?" + _NUM + _GB)
_ICONV = re.compile(r"(?:intermediate_conv_window(?:_cache)?|(?<![_\w])conv_window)(?: size)?[:=]? ?" + _NUM + _GB)
_KV_LINE = re.compile(r"KV Cache is allocated\b", re.I)
_KV_TOKENS = re.compile(r"#tokens[:=]? ?" + _INT)
_K_SIZE = re.compile(r"(?<![\w#])K(?: size)?[:=]? ?" + _NUM + _GB)
_V_SIZE = re.compile(r"(?<![\w#])V(?: size)?[:=]? ?" + _NUM + _GB)
_KV_SIZE = re.compile(r"(?<![\w#])KV size[:=]? ?" + _NUM + _GB)
_POOL_END = re.compile(r"Memory pool end\. ?avail mem=" + _NUM + _GB, re.I)
_SUMMARY = re.compile(r"\bmax_total_num_tokens=\d")
_KEYNUM = re.compile(r"\b([a-z_]+)=" + _NUM + r"(" + _GB + r")?")
_CAP = re.compile(
    r"max_running_requests is capped to (\d+) by the mamba state cache"
    r"(?: ?\(max_mamba_cache_size=(\d+), (\d+) state slots per request)?", re.I)
_REDUCED = re.compile(r"max_running_requests was reduced from the requested (\d+) to (\d+)", re.I)
_FINAL_MRR = re.compile(r"Final max_running_requests: (\d+)")  # some 0.5.x builds log the min() they took
_FEWER = re.compile(r"KV pool holds " + _INT + r" tokens, fewer than --context-length", re.I)
_CAPTURE = re.compile(r"Capture (?P<label>[\w \-]*?)\bcuda graph (?P<edge>begin|end)\b", re.I)
_BS = re.compile(r"\bbs=\[([\d, ]*)\]")
_ACCEPT = re.compile(r"accept len(?:gth)?: ?" + _NUM, re.I)
_THROUGHPUT = re.compile(r"gen throughput \(token/s\): ?" + _NUM, re.I)
_RUNNING = re.compile(r"#running-req: ?(\d+)")
_MAMBA_NUM = re.compile(r"mamba num: ?(\d+)")
_SERVER_ARGS = re.compile(r"server_args=ServerArgs\((.*)")
_SGL_READY = re.compile(r"The server is fired up and ready to roll|Uvicorn running on|Application startup complete",
                        re.I)
_SGL_VERSION = re.compile(r"\bsglang(?: version)?[=: v]+(\d+\.\d+\.\d+[\w.+]*)", re.I)

# author-condensed / transcribed excerpts
_C_KV_TOKENS = re.compile(r"\bKV tokens:? ?" + _INT)
_C_KV_SLOTS = re.compile(_INT + r" KV token slots")
_C_MAMBA_SLOTS = re.compile(r"(\d+) Mamba slots")
_C_WEIGHT = re.compile(r"weight usage " + _NUM + _GB + r" \(" + _NUM + r" to " + _NUM + _GB + r" free\)", re.I)
_C_EACH_KV = re.compile(_NUM + _GB + r" each for K/V")

# ---------------------------------------------------------------- vLLM
_V_LOAD = re.compile(r"(?:Model loading took|Loading model weights took) " + _NUM + _GB, re.I)
_V_TOTAL = re.compile(r"total_gpu_memory \(" + _NUM + _GB + r"\) x gpu_memory_utilization \(" + _NUM + r"\) = "
                      + _NUM + _GB)
_V_V0_BREAKDOWN = re.compile(
    r"model weights take " + _NUM + _GB + r"; non_torch_memory takes " + _NUM + _GB
    + r"; PyTorch activation peak memory takes " + _NUM + _GB
    + r"; the rest of the memory reserved for KV Cache is " + _NUM + _GB)
_V_AVAIL_KV = re.compile(r"Available KV cache memory: " + _NUM + _GB)
# CPU (vllm-memory.md §7.1): "Explicitly set (K/T) GiB for KV cache on node N." / "Auto set (K/T) GiB for KV cache ..."
_V_CPU_KV = re.compile(r"(?:Explicitly|Auto) set \(" + _NUM + r"/" + _NUM + r"\) ?GiB for KV cache")
_V_CPU_NONKV = re.compile(_NUM + r" GiB memory was consumed by non-kv usages")
_V_KV_SIZE = re.compile(r"\b(?:GPU|CPU|XPU|[A-Z]{2,4}) KV cache size: " + _INT + r" tokens")
_V_CONC = re.compile(r"Maximum concurrency for " + _INT + r" tokens per request: " + _NUM + r"x")
_V_BLOCKS = re.compile(r"# GPU blocks: (\d+)(?:, # CPU blocks: (\d+))?")
_V_GRAPH = re.compile(r"Graph capturing finished in " + _NUM + r" secs?, took " + _NUM + _GB)
_V_GRAPH_EST = re.compile(r"Estimated CUDA graph memory: " + _NUM + _GB)
_V_MAMBA_BLOCKS = re.compile(r"max_num_seqs \((\d+)\) exceeds available Mamba cache blocks \((\d+)\)")
_V_SPEC = re.compile(r"SpecDecoding metrics: Mean acceptance length: " + _NUM)
_V_SPEC_RATE = re.compile(r"Avg Draft acceptance rate: " + _NUM + "%")
# >= 0.18 summary (vllm-memory.md §2.6), parsed piece by piece so older wordings and cut lines still give parts
_V_FREE_START = re.compile(r"Free memory on device \(" + _NUM + r"/" + _NUM + r" ?GiB\) on startup")
_V_DESIRED = re.compile(r"Desired GPU memory utilization is \(" + _NUM + r", " + _NUM + _GB + r"\)")
_V_CONSUMED = re.compile(_NUM + _GB + r" for consumed memory")
_V_WEIGHT_PART = re.compile(_NUM + _GB + r" for weight")
_V_PEAK_PART = re.compile(_NUM + _GB + r" for peak activation")
_V_NONTORCH_PART = re.compile(_NUM + _GB + r" for non-torch memory")
_V_GRAPH_PART = re.compile(_NUM + _GB + r" for CUDAGraph memory")
_V_KV_IN_USE = re.compile(r"Current kv cache memory in use is " + _NUM + _GB)
_V_GRAPH_POOL = re.compile(r"CUDA graph pool memory: " + _NUM + _GB + r" \(actual\), " + _NUM + _GB + r" \(estimated\)")
_V_BLOCK = re.compile(r"Setting attention block size to (\d+) tokens")
_V_MAMBA_MODE = re.compile(r"Mamba cache mode is set to '(\w+)'")
_V_NONDEFAULT = re.compile(r"non-default args: (\{.*)")
_V_INIT = re.compile(r"Initializing a V\d LLM engine \(v([\w.+\-]+)\) with config: (.*)")
_V_VERSION = re.compile(r"vLLM API server version ([\w.+\-]+)")
_V_READY = re.compile(r"Starting vLLM API server|init engine \(profile, create kv cache, warmup model\) took", re.I)
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
    r"attention block size|GiB for KV|SWAKVPool|init engine|sglang|CUDA graph|Graph capturing|max_running_requests",
    re.I)

# ---------------------------------------------------------------- errors
_EXC = re.compile(r"^(?:[\w]+\.)*(?:\w*Error|\w*Exception|KeyboardInterrupt|SystemExit)\b(?::|$) ?(.*)")
_BOOT_START = re.compile(r"server_args=ServerArgs\(|non-default args: \{|Initializing a V\d LLM engine")


@dataclass
class _Acc:
    """Mutable accumulator while reading one boot; frozen into LogFacts at the end."""

    v: dict[str, Any] = field(default_factory=dict)
    load_begins: int = 0
    load_ends: int = 0
    kv_lines: int = 0
    pool_ends: int = 0
    graphs: list[GraphCapture] = field(default_factory=list)
    pending_graph: dict[str, GraphCapture] = field(default_factory=dict)
    lists: dict[str, list[Any]] = field(default_factory=dict)
    errors: list[EngineError] = field(default_factory=list)
    server_args: dict[str, Any] = field(default_factory=dict)
    sgl_marks: int = 0
    vllm_marks: int = 0

    def first(self, key: str, value: Any) -> None:
        """Keep the first value seen for a key (later repeats, e.g. other ranks' copies, do not overwrite)."""
        if value is not None and key not in self.v:
            self.v[key] = value

    def push(self, key: str, value: Any) -> None:
        if value is not None:
            self.lists.setdefault(key, []).append(value)


def _sglang_line(acc: _Acc, line: Line) -> None:
    t = line.text
    if _LOAD_BEGIN.search(t):
        avail = _search(_AVAIL, t)
        acc.first("avail_before_load_gib" if acc.load_begins == 0 else "draft_avail_before_load_gib", avail)
        acc.load_begins += 1
        return
    if _LOAD_END.search(t):
        prefix = "" if acc.load_ends == 0 else "draft_"
        acc.first(prefix + "avail_after_load_gib", _search(_AVAIL, t))
        acc.first(prefix + "weights_gib", _search(_MEM_USAGE, t))
        if acc.load_ends == 0:
            acc.first("model_class", _search(_TYPE, t, str))
            acc.first("model_dtype", _search(_DTYPE, t, str))
            algo = re.search(r"\bquant_algo=([\w\-]+)", t)  # 2026+: `quant=modelopt_fp4, quant_algo=NVFP4`
            acc.first("weight_quant", algo.group(1) if algo else (_search(_QUANT, t, str) or _bare_quant(t)))
        acc.load_ends += 1
        return
    m = _BASELINE.search(t)
    if m:
        acc.first("memory_baseline_gib", _f(m.group(1)))
        return
    if _MAMBA.search(t):
        acc.first("draft_loaded_before_pools", acc.load_ends >= 2)
        acc.first("max_mamba_cache_size", _search(_MAMBA_K, t, _i))
        acc.first("conv_state_gib", _search(_CONV, t))
        acc.first("ssm_state_gib", _search(_SSM, t))
        acc.first("intermediate_ssm_state_gib", _search(_ISSM, t))
        acc.first("intermediate_conv_window_gib", _search(_ICONV, t))
        return
    if _KV_LINE.search(t):
        low = t.lower()
        label = low.split("kv cache is allocated", 1)[0]  # e.g. "[draft] KV Cache is allocated ..."
        is_draft = acc.kv_lines > 0 or "draft" in label or "draft" in low.split("allocated", 1)[-1][-40:]
        prefix = "draft_" if is_draft else ""
        if not is_draft:
            acc.first("draft_loaded_before_pools", acc.load_ends >= 2)
        acc.first(prefix + "kv_tokens", _search(_KV_TOKENS, t, _i))
        kv = _search(_KV_SIZE, t)
        if kv is not None and not is_draft:
            acc.first("kv_size_gib", kv)
        else:
            acc.first(prefix + "k_size_gib", _search(_K_SIZE, t))
            acc.first(prefix + "v_size_gib", _search(_V_SIZE, t))
        if not is_draft:
            acc.first("kv_dtype", _search(_DTYPE, t, str))
        acc.kv_lines += 1
        return
    m = _SWA_POOL.search(t)
    if m:  # sliding-window hybrids (research §3): one pool, full-layer and SWA-layer token counts
        acc.first("draft_loaded_before_pools", acc.load_ends >= 2)
        acc.first("kv_size_gib", _f(m.group(1)))
        acc.first("swa_kv_tokens", _i(m.group(2)))
        acc.first("kv_tokens", _i(m.group(3)))
        return
    m = _POOL_END.search(t)
    if m:
        acc.first("memory_pool_end_gib" if acc.pool_ends == 0 else "draft_memory_pool_end_gib", _f(m.group(1)))
        acc.pool_ends += 1
        return
    if _SUMMARY.search(t):
        for km in _KEYNUM.finditer(t):
            key, val, unit = km.group(1), km.group(2), km.group(3)
            if key == "available_gpu_mem":
                acc.first("available_gpu_mem_gib", _f(val))
            elif key in ("max_total_num_tokens", "chunked_prefill_size", "max_prefill_tokens",
                         "max_running_requests", "context_len") and "." not in val:
                acc.first(key, _i(val))
        acc.v["ready"] = True
        return
    m = _CAP.search(t)
    if m:
        acc.first("mamba_cap_requests", _i(m.group(1)))
        acc.first("max_mamba_cache_size", _i(m.group(2)))
        acc.first("state_slots_per_request", _i(m.group(3)))
        return
    m = _REDUCED.search(t)
    if m:
        acc.first("mrr_reduced_from", _i(m.group(1)))
        return
    m = _FINAL_MRR.search(t)
    if m:
        acc.first("max_running_requests", _i(m.group(1)))
        return
    m = _FEWER.search(t)
    if m:
        acc.first("kv_pool_fewer_than_context", _i(m.group(1)))
        return
    m = _CAPTURE.search(t)
    if m:
        _capture(acc, line, m.group("label").strip(), m.group("edge").lower())
        return
    m = _SERVER_ARGS.search(t)
    if m:
        if not acc.server_args:
            acc.server_args = parse_sglang_server_args(m.group(1))
        return
    if _ACCEPT.search(t) or _THROUGHPUT.search(t) or _MAMBA_NUM.search(t):
        _runtime_line(acc, t)
        return
    if _SGL_READY.search(t):
        acc.v["ready"] = True
        return
    # condensed / transcribed excerpts (only fill what nothing above filled)
    acc.first("max_mamba_cache_size", _first_of(t, _i, _MAMBA_K, _C_MAMBA_SLOTS))
    acc.first("kv_tokens", _first_of(t, _i, _C_KV_TOKENS, _C_KV_SLOTS))
    m = _C_WEIGHT.search(t)
    if m:
        acc.first("weights_gib", _f(m.group(1)))
        acc.first("avail_before_load_gib", _f(m.group(2)))
        acc.first("avail_after_load_gib", _f(m.group(3)))
    each = _search(_C_EACH_KV, t)
    acc.first("k_size_gib", each)
    acc.first("v_size_gib", each)


def _runtime_line(acc: _Acc, t: str) -> None:
    """SGLang `Decode batch ...` statistics (one per decode_log_interval; the bulk of a long log)."""
    acc.push("accept_lengths", _search(_ACCEPT, t))
    acc.push("gen_throughputs", _search(_THROUGHPUT, t))
    acc.push("running_requests", _search(_RUNNING, t, _i))
    acc.push("mamba_num", _search(_MAMBA_NUM, t, _i))


def _bare_quant(t: str) -> str | None:
    """The `[<quant>, ]` token of `Load weight end. ..., type=X, fp8, avail mem=...` (a piece with no `=`)."""
    body = t.split("Load weight end", 1)[-1].lstrip(". ")
    for piece in body.split(","):
        piece = piece.strip().rstrip(".")
        if piece and "=" not in piece and re.fullmatch(r"[A-Za-z][\w\-]{1,31}", piece):
            return piece
    return None


def _capture(acc: _Acc, line: Line, label: str, edge: str) -> None:
    t = line.text
    label = (label + " cuda graph").strip() if label else "cuda graph"
    if edge == "begin":
        acc.pending_graph[label] = GraphCapture(label=label, avail_before_gib=_search(_AVAIL, t), line=line.no)
        return
    begin = acc.pending_graph.pop(label, None)
    bs_m = _BS.search(t)
    bs: tuple[int, ...] = ()
    if bs_m:
        bs = tuple(int(x) for x in re.findall(r"\d+", bs_m.group(1))[:4096])
    acc.graphs.append(GraphCapture(
        label=label, mem_usage_gib=_search(_MEM_USAGE, t),
        avail_before_gib=begin.avail_before_gib if begin else None,
        avail_after_gib=_search(_AVAIL, t), elapsed_s=_search(_ELAPSED, t), batch_sizes=bs, line=line.no))


def _vllm_line(acc: _Acc, line: Line) -> bool:
    """vLLM formats; returns True when the line was one of them."""
    t = line.text
    m = _V_LOAD.search(t)
    if m:
        acc.first("weights_gib", _f(m.group(1)))
        return True
    m = _V_TOTAL.search(t)
    if m:
        acc.first("total_gpu_memory_gib", _f(m.group(1)))
        acc.first("gpu_memory_utilization", _f(m.group(2)))
        acc.first("budget_gib", _f(m.group(3)))
        return True
    m = _V_V0_BREAKDOWN.search(t)
    if m:
        acc.first("weights_gib", _f(m.group(1)))
        acc.first("non_torch_gib", _f(m.group(2)))
        acc.first("activation_peak_gib", _f(m.group(3)))
        acc.first("available_kv_gib", _f(m.group(4)))
        return True
    m = _V_AVAIL_KV.search(t)
    if m:
        acc.first("available_kv_gib", _f(m.group(1)))
        return True
    m = _V_CPU_KV.search(t)
    if m:
        acc.first("available_kv_gib", _f(m.group(1)))
        acc.first("total_gpu_memory_gib", _f(m.group(2)))  # node memory on the CPU backend
        acc.first("non_torch_gib", _search(_V_CPU_NONKV, t))
        return True
    matched = False
    m = _V_KV_SIZE.search(t)
    if m:
        acc.first("kv_tokens", _i(m.group(1)))
        matched = True
    m = _V_CONC.search(t)
    if m:
        acc.first("max_concurrency_tokens", _i(m.group(1)))
        acc.first("max_concurrency", _f(m.group(2)))
        matched = True
    if matched:
        return True
    m = _V_BLOCKS.search(t)
    if m:
        acc.first("gpu_blocks", _i(m.group(1)))
        acc.first("cpu_blocks", _i(m.group(2)))
        return True
    m = _V_GRAPH.search(t)
    if m:
        acc.graphs.append(GraphCapture(label="vllm cuda graph", mem_usage_gib=_f(m.group(2)),
                                       elapsed_s=_f(m.group(1)), line=line.no))
        return True
    m = _V_GRAPH_EST.search(t)
    if m:
        acc.first("cuda_graph_estimate_gib", _f(m.group(1)))
        return True
    m = _V_MAMBA_BLOCKS.search(t)
    if m:
        acc.first("max_num_seqs", _i(m.group(1)))
        acc.first("mamba_cache_blocks", _i(m.group(2)))
        # the error line itself is recorded by the generic exception pass
        return False
    m = _V_SPEC.search(t)
    if m:
        acc.push("accept_lengths", _f(m.group(1)))
        acc.push("acceptance_rates_pct", _search(_V_SPEC_RATE, t))
        return True
    if _V_FREE_START.search(t) or _V_DESIRED.search(t) or "for peak activation" in t:
        m = _V_FREE_START.search(t)
        if m:
            acc.first("avail_before_load_gib", _f(m.group(1)))
            acc.first("total_gpu_memory_gib", _f(m.group(2)))
        m = _V_DESIRED.search(t)
        if m:
            acc.first("gpu_memory_utilization", _f(m.group(1)))
            acc.first("budget_gib", _f(m.group(2)))
        acc.first("consumed_gib", _search(_V_CONSUMED, t))
        acc.first("weights_gib", _search(_V_WEIGHT_PART, t))
        acc.first("activation_peak_gib", _search(_V_PEAK_PART, t))
        acc.first("non_torch_gib", _search(_V_NONTORCH_PART, t))
        acc.first("cuda_graph_actual_gib", _search(_V_GRAPH_PART, t))
        acc.first("available_kv_gib", _search(_V_KV_IN_USE, t))
        return True
    m = _V_GRAPH_POOL.search(t)
    if m:
        acc.first("cuda_graph_actual_gib", _f(m.group(1)))
        acc.first("cuda_graph_estimate_gib", _f(m.group(2)))
        return True
    m = _V_BLOCK.search(t)
    if m:
        acc.first("attention_block_size", _i(m.group(1)))
        return True
    m = _V_MAMBA_MODE.search(t)
    if m:
        acc.first("mamba_cache_mode", m.group(1))
        return True
    m = _V_NONDEFAULT.search(t)
    if m:
        if not acc.server_args:
            acc.server_args = parse_vllm_dict(m.group(1))
        return True
    m = _V_INIT.search(t)
    if m:
        acc.first("engine_version", m.group(1))
        if not acc.server_args:
            acc.server_args = parse_keyvalues(m.group(2))
        return True
    m = _V_VERSION.search(t)
    if m:
        acc.first("engine_version", m.group(1))
        return True
    if _V_READY.search(t):
        acc.v["ready"] = True
        return True
    return False


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
        if not seen_work and (("oad" in t and (_LOAD_END.search(t) or _V_LOAD.search(t))) or _EXC.match(t)):
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
    acc = _Acc()
    p_stage, p_rank = _primary(lines)
    for idx, line in enumerate(lines):
        t = line.text
        if "Decode batch" in t and not _other_rank(line, p_stage, p_rank):
            _runtime_line(acc, t)  # fast path: the bulk of a long log
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
            m = _SERVER_ARGS.search(line.text)
            if m and not acc.server_args:
                acc.server_args = parse_sglang_server_args(m.group(1))
            continue
        if not _vllm_line(acc, line):
            _sglang_line(acc, line)
    if acc.vllm_marks > acc.sgl_marks:
        engine: str | None = "vllm"
    elif acc.sgl_marks:
        engine = "sglang"
    else:
        engine = None
    if engine == "sglang":
        for line in lines:
            m = _SGL_VERSION.search(line.text)
            if m:
                acc.first("engine_version", m.group(1))
                break
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
