"""SGLang line formats (0.4.x-0.5.x) -> accumulator. See `parse.py` for the list of formats and their sources."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from specbench.logs.facts import GraphCapture
from specbench.logs.lineacc import GB, INT, NUM, Acc, find, first_of, to_float, to_int
from specbench.logs.normalize import Line
from specbench.logs.parse import EngineLines
from specbench.logs.serverargs import parse_sglang_server_args

# ---------------------------------------------------------------- SGLang
_AVAIL = re.compile(r"avail(?:able)?[ _]mem(?:ory)?=" + NUM + GB, re.I)
_MEM_USAGE = re.compile(r"mem usage=(-?\d+(?:\.\d+)?)" + GB, re.I)  # an MTP draft sharing target tensors can be < 0
_QUANT = re.compile(r"\bquant(?:_algo)?=([\w\-]+)")
_SWA_POOL = re.compile(r"SWAKVPool mem usage: " + NUM + GB + r", swa size: " + INT + r", full size: " + INT)
_ELAPSED = re.compile(r"(?:elapsed=|Time elapsed: ?)" + NUM + r" ?s\b", re.I)
_TYPE = re.compile(r"\btype=([\w.]+)")
_DTYPE = re.compile(r"\bdtype[=:] ?(?:torch\.)?([\w]+)")

_KV_DTYPE_LINE = re.compile(r"Using KV cache dtype: (?:torch\.)?(\w+)")
_LOAD_BEGIN = re.compile(r"Load weight begin\b", re.I)
LOAD_END = re.compile(r"Load weight end\b", re.I)
_BASELINE = re.compile(r"Memory baseline taken\. ?mem usage=" + NUM + GB, re.I)
_MAMBA = re.compile(r"Mamba Cache is allocated\b", re.I)
_MAMBA_K = re.compile(r"max_mamba_cache_size[:=]? ?" + INT)
_CONV = re.compile(r"(?<![_\w])conv_state(?: size)?[:=]? ?" + NUM + GB)
_SSM = re.compile(r"(?<![_\w])ssm_state(?: size)?[:=]? ?" + NUM + GB)
_ISSM = re.compile(r"intermediate_ssm_state(?:_cache)?(?: size)?[:=]? ?" + NUM + GB)
_ICONV = re.compile(r"(?:intermediate_conv_window(?:_cache)?|(?<![_\w])conv_window)(?: size)?[:=]? ?" + NUM + GB)
_KV_LINE = re.compile(r"KV Cache is allocated\b", re.I)
_KV_TOKENS = re.compile(r"#tokens[:=]? ?" + INT)
_K_SIZE = re.compile(r"(?<![\w#])K(?: size)?[:=]? ?" + NUM + GB)
_V_SIZE = re.compile(r"(?<![\w#])V(?: size)?[:=]? ?" + NUM + GB)
_KV_SIZE = re.compile(r"(?<![\w#])KV size[:=]? ?" + NUM + GB)
_POOL_END = re.compile(r"Memory pool end\. ?avail mem=" + NUM + GB, re.I)
_SUMMARY = re.compile(r"\bmax_total_num_tokens=\d")
_KEYNUM = re.compile(r"\b([a-z_]+)=(-?\d+(?:\.\d+)?)(" + GB + r")?")  # chunked_prefill_size=-1 is real
_CAP = re.compile(
    r"max_running_requests is capped to (\d+) by the mamba state cache"
    r"(?: ?\(max_mamba_cache_size=(\d+), (\d+) state slots per request)?", re.I)
_REDUCED = re.compile(r"max_running_requests was reduced from the requested (\d+) to (\d+)", re.I)
_FINAL_MRR = re.compile(r"Final max_running_requests: (\d+)")  # some 0.5.x builds log the min() they took
_FEWER = re.compile(r"KV pool holds " + INT + r" tokens, fewer than --context-length", re.I)
_CAPTURE = re.compile(r"Capture (?P<label>[\w \-]*?)\bcuda graph (?P<edge>begin|end)\b", re.I)
_BS = re.compile(r"\bbs=\[([\d, ]*)\]")
_ACCEPT = re.compile(r"accept len(?:gth)?: ?" + NUM, re.I)
_THROUGHPUT = re.compile(r"gen throughput \(token/s\): ?" + NUM, re.I)
_RUNNING = re.compile(r"#running-req: ?(\d+)")
_MAMBA_NUM = re.compile(r"mamba num: ?(\d+)")
SERVER_ARGS = re.compile(r"server_args=ServerArgs\((.*)")
_SGL_READY = re.compile(r"The server is fired up and ready to roll|Uvicorn running on|Application startup complete",
                        re.I)
SGL_VERSION = re.compile(r"\bsglang(?: version)?[=: v]+(\d+\.\d+\.\d+[\w.+]*)", re.I)

# author-condensed / transcribed excerpts
_C_KV_TOKENS = re.compile(r"\bKV tokens:? ?" + INT)
_C_KV_SLOTS = re.compile(INT + r" KV token slots")
_C_MAMBA_SLOTS = re.compile(r"(\d+) Mamba slots")
_C_WEIGHT = re.compile(r"weight usage " + NUM + GB + r" \(" + NUM + r" to " + NUM + GB + r" free\)", re.I)
_C_EACH_KV = re.compile(NUM + GB + r" each for K/V")


# ---------------------------------------------------------------- one handler per line format
# Each takes the accumulator, the line and the match of its row's pattern in `_LINE_RULES`.


def _load_begin(acc: Acc, line: Line, m: re.Match[str]) -> None:
    avail = find(_AVAIL, line.text)
    acc.first("avail_before_load_gib" if acc.load_begins == 0 else "draft_avail_before_load_gib", avail)
    acc.load_begins += 1


def _load_end(acc: Acc, line: Line, m: re.Match[str]) -> None:
    t = line.text
    prefix = "" if acc.load_ends == 0 else "draft_"
    acc.first(prefix + "avail_after_load_gib", find(_AVAIL, t))
    acc.first(prefix + "weights_gib", find(_MEM_USAGE, t))
    if acc.load_ends == 0:
        acc.first("model_class", find(_TYPE, t, str))
        acc.first("model_dtype", find(_DTYPE, t, str))
        algo = re.search(r"\bquant_algo=([\w\-]+)", t)  # 2026+: `quant=modelopt_fp4, quant_algo=NVFP4`
        acc.first("weight_quant", algo.group(1) if algo else (find(_QUANT, t, str) or _bare_quant(t)))
    acc.load_ends += 1


def _kv_dtype(acc: Acc, line: Line, m: re.Match[str]) -> None:
    acc.first("kv_dtype", m.group(1))  # 0.5.x prints it before each pool; the first is the target's


def _baseline(acc: Acc, line: Line, m: re.Match[str]) -> None:
    acc.first("memory_baseline_gib", to_float(m.group(1)))


def _mamba_pool(acc: Acc, line: Line, m: re.Match[str]) -> None:
    t = line.text
    acc.first("draft_loaded_before_pools", acc.load_ends >= 2)
    acc.first("max_mamba_cache_size", find(_MAMBA_K, t, to_int))
    acc.first("conv_state_gib", find(_CONV, t))
    acc.first("ssm_state_gib", find(_SSM, t))
    acc.first("intermediate_ssm_state_gib", find(_ISSM, t))
    acc.first("intermediate_conv_window_gib", find(_ICONV, t))


def _kv_pool(acc: Acc, line: Line, m: re.Match[str]) -> None:
    t = line.text
    low = t.lower()
    label = low.split("kv cache is allocated", 1)[0]  # e.g. "[draft] KV Cache is allocated ..."
    is_draft = acc.kv_lines > 0 or "draft" in label or "draft" in low.split("allocated", 1)[-1][-40:]
    prefix = "draft_" if is_draft else ""
    if not is_draft:
        acc.first("draft_loaded_before_pools", acc.load_ends >= 2)
    acc.first(prefix + "kv_tokens", find(_KV_TOKENS, t, to_int))
    kv = find(_KV_SIZE, t)
    if kv is not None and not is_draft:
        acc.first("kv_size_gib", kv)
    else:
        acc.first(prefix + "k_size_gib", find(_K_SIZE, t))
        acc.first(prefix + "v_size_gib", find(_V_SIZE, t))
    if not is_draft:
        acc.first("kv_dtype", find(_DTYPE, t, str))
    acc.kv_lines += 1


def _swa_pool(acc: Acc, line: Line, m: re.Match[str]) -> None:
    """Sliding-window hybrids (mem_cache/swa_memory_pool.py::SWAKVPool): one pool, full-layer and SWA-layer
    token counts."""
    acc.first("draft_loaded_before_pools", acc.load_ends >= 2)
    swa, full = to_int(m.group(2)), to_int(m.group(3))
    if "swa_kv_tokens" not in acc.v and full is not None:
        # 0.5.15 logs one `KV Cache is allocated` line per layer kind before this summary, the SWA layers' first
        # (mem_cache/swa_memory_pool.py::SWAKVPool.__init__@0.5.15): those two are this pool, not target + draft
        two = [(k, acc.v.pop(k, None)) for k in ("kv_tokens", "k_size_gib", "v_size_gib", "draft_kv_tokens",
                                                  "draft_k_size_gib", "draft_v_size_gib")]
        got = dict(two)
        if got.get("kv_tokens") == swa and got.get("draft_kv_tokens") == full:
            acc.v["k_size_gib"], acc.v["v_size_gib"] = got["draft_k_size_gib"], got["draft_v_size_gib"]
            acc.kv_lines = 1
        else:  # not the two lines of this pool: keep what was read
            acc.v.update({k: v for k, v in two if v is not None})
    acc.first("kv_size_gib", to_float(m.group(1)))
    acc.first("swa_kv_tokens", swa)
    acc.v["kv_tokens"] = full if full is not None else acc.v.get("kv_tokens")


def _pool_end(acc: Acc, line: Line, m: re.Match[str]) -> None:
    acc.first("memory_pool_end_gib" if acc.pool_ends == 0 else "draft_memory_pool_end_gib", to_float(m.group(1)))
    acc.pool_ends += 1


def _summary(acc: Acc, line: Line, m: re.Match[str]) -> None:
    for km in _KEYNUM.finditer(line.text):
        key, val = km.group(1), km.group(2)
        if key == "available_gpu_mem":
            acc.first("available_gpu_mem_gib", to_float(val))
        elif key in ("max_total_num_tokens", "chunked_prefill_size", "max_prefill_tokens",
                     "max_running_requests", "context_len") and "." not in val:
            acc.first(key, to_int(val))
    acc.v["ready"] = True


def _mamba_cap(acc: Acc, line: Line, m: re.Match[str]) -> None:
    acc.first("mamba_cap_requests", to_int(m.group(1)))
    acc.first("max_mamba_cache_size", to_int(m.group(2)))
    acc.first("state_slots_per_request", to_int(m.group(3)))


def _mrr_reduced(acc: Acc, line: Line, m: re.Match[str]) -> None:
    acc.first("mrr_reduced_from", to_int(m.group(1)))


def _final_mrr(acc: Acc, line: Line, m: re.Match[str]) -> None:
    acc.first("max_running_requests", to_int(m.group(1)))


def _fewer(acc: Acc, line: Line, m: re.Match[str]) -> None:
    acc.first("kv_pool_fewer_than_context", to_int(m.group(1)))


def _graph(acc: Acc, line: Line, m: re.Match[str]) -> None:
    _capture(acc, line, m.group("label").strip(), m.group("edge").lower())


def _server_args(acc: Acc, line: Line, m: re.Match[str]) -> None:
    if not acc.server_args:
        acc.server_args = parse_sglang_server_args(m.group(1))


def _runtime(acc: Acc, line: Line, m: re.Match[str]) -> None:
    runtime_line(acc, line.text)


def _ready(acc: Acc, line: Line, m: re.Match[str]) -> None:
    acc.v["ready"] = True


def _condensed(acc: Acc, t: str) -> None:
    """Author-condensed / transcribed excerpts: only fill what nothing above filled."""
    acc.first("max_mamba_cache_size", first_of(t, to_int, _MAMBA_K, _C_MAMBA_SLOTS))
    acc.first("kv_tokens", first_of(t, to_int, _C_KV_TOKENS, _C_KV_SLOTS))
    m = _C_WEIGHT.search(t)
    if m:
        acc.first("weights_gib", to_float(m.group(1)))
        acc.first("avail_before_load_gib", to_float(m.group(2)))
        acc.first("avail_after_load_gib", to_float(m.group(3)))
    each = find(_C_EACH_KV, t)
    acc.first("k_size_gib", each)
    acc.first("v_size_gib", each)


# The first row whose pattern is found in the line handles it; order matters (e.g. a `Load weight end` line also
# carries `avail mem=`, a summary line also `max_running_requests=`). No row: `_condensed`.
_LINE_RULES: tuple[tuple[re.Pattern[str], Callable[[Acc, Line, re.Match[str]], None]], ...] = (
    (_LOAD_BEGIN, _load_begin),
    (LOAD_END, _load_end),
    (_KV_DTYPE_LINE, _kv_dtype),
    (_BASELINE, _baseline),
    (_MAMBA, _mamba_pool),
    (_KV_LINE, _kv_pool),
    (_SWA_POOL, _swa_pool),
    (_POOL_END, _pool_end),
    (_SUMMARY, _summary),
    (_CAP, _mamba_cap),
    (_REDUCED, _mrr_reduced),
    (_FINAL_MRR, _final_mrr),
    (_FEWER, _fewer),
    (_CAPTURE, _graph),
    (SERVER_ARGS, _server_args),
    (_ACCEPT, _runtime),
    (_THROUGHPUT, _runtime),
    (_MAMBA_NUM, _runtime),
    (_SGL_READY, _ready),
)


def sglang_line(acc: Acc, line: Line) -> bool:
    """Fold one SGLang line into the accumulator: the first matching row of `_LINE_RULES`, else `_condensed`
    (always True: SGLang's reader is the parser's fallback for every line no other engine claimed)."""
    t = line.text
    for pattern, handle in _LINE_RULES:
        m = pattern.search(t)
        if m:
            handle(acc, line, m)
            return True
    _condensed(acc, t)
    return True


def runtime_line(acc: Acc, t: str) -> None:
    """SGLang `Decode batch ...` statistics (one per decode_log_interval; the bulk of a long log)."""
    acc.push("accept_lengths", find(_ACCEPT, t))
    acc.push("gen_throughputs", find(_THROUGHPUT, t))
    acc.push("running_requests", find(_RUNNING, t, to_int))
    acc.push("mamba_num", find(_MAMBA_NUM, t, to_int))


def _bare_quant(t: str) -> str | None:
    """The `[<quant>, ]` token of `Load weight end. ..., type=X, fp8, avail mem=...` (a piece with no `=`)."""
    body = t.split("Load weight end", 1)[-1].lstrip(". ")
    for piece in body.split(","):
        piece = piece.strip().rstrip(".")
        if piece and "=" not in piece and re.fullmatch(r"[A-Za-z][\w\-]{1,31}", piece):
            return piece
    return None


def _capture(acc: Acc, line: Line, label: str, edge: str) -> None:
    t = line.text
    label = (label + " cuda graph").strip() if label else "cuda graph"
    if edge == "begin":
        acc.pending_graph[label] = GraphCapture(label=label, avail_before_gib=find(_AVAIL, t), line=line.no)
        return
    begin = acc.pending_graph.pop(label, None)
    bs_m = _BS.search(t)
    bs: tuple[int, ...] = ()
    if bs_m:
        bs = tuple(int(x) for x in re.findall(r"\d+", bs_m.group(1))[:4096])
    acc.graphs.append(GraphCapture(
        label=label, mem_usage_gib=find(_MEM_USAGE, t),
        avail_before_gib=begin.avail_before_gib if begin else None,
        avail_after_gib=find(_AVAIL, t), elapsed_s=find(_ELAPSED, t), batch_sizes=bs, line=line.no))


# A record of the last start-up steps (scheduler built after the pools, graph capture), on any rank: the boot got past
# memory sizing (`doctor` status "started" when no error follows).
LATE_BOOT = re.compile(r"Capture [\w \-]*cuda graph (?:begin|bs)|Tree cache initialized|Disable prefill CUDA graph",
                       re.I)


# ---------------------------------------------------------------- what the log parser asks of SGLang (logs/parse.py)
# A line only SGLang prints: the engine that wrote a log is the one with the most of these in its first lines.
MARK = re.compile(r"sglang|Load weight (?:begin|end)|KV Cache is allocated|Mamba Cache is allocated|"
                  r"max_total_num_tokens=|ServerArgs\(|Decode batch|TP\d|max_running_request is zero|"
                  r"Loaded weights leave no GPU memory|mem-fraction-static|max_mamba_cache_size|Mamba slots")
# Every format of `_LINE_RULES` (and of the condensed excerpts) contains one of these words (case-insensitive).
TRIGGER = re.compile(r"Load weight|Memory baseline|Mamba Cache|KV Cache|Memory pool end|max_total_num_tokens|"
                     r"capped to|reduced from the requested|KV pool holds|Capture|server_args=|accept len|"
                     r"gen throughput|mamba num|fired up|Uvicorn running|startup complete|KV token|Mamba slots|"
                     r"weight usage|each for K/V|max_mamba_cache_size|SWAKVPool|sglang|CUDA graph|"
                     r"max_running_requests|KV cache dtype", re.I)


def version_from_log(lines: Sequence[str]) -> str | None:
    """The release SGLang printed (`sglang version 0.5.x` / `sglang=0.5.x`), else None."""
    for text in lines:
        m = SGL_VERSION.search(text)
        if m:
            return m.group(1)
    return None


def _other_rank(acc: Acc, line: Line) -> None:
    """Another rank's line still gives the argument dump (each rank prints it)."""
    m = SERVER_ARGS.search(line.text)
    if m and not acc.server_args:
        acc.server_args = parse_sglang_server_args(m.group(1))


LINES = EngineLines(
    name="sglang", mark=MARK, trigger=TRIGGER, read=sglang_line, boot_keys=("ServerArgs(",),
    boot_start=re.compile(r"server_args=ServerArgs\("), weights_done=LOAD_END, version=version_from_log,
    other_rank=_other_rank, bulk_key="Decode batch", bulk_read=runtime_line, fallback=True)
