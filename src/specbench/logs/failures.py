"""Name the failure in a log: a stable `kind` plus the engine's own message text. Pure, never raises.

Each known failure is a regex over the cleaned lines and the engine place that raises it (research notes
`../shared/research/sglang-memory.md` §3, §5.2, §6, §8; `vllm-memory.md` §4.6, §6.4, §6.5). The first known failure
in the boot wins (later ones are usually consequences: "scheduler died", "capture_bs=[]" ...); with none known, the
last exception line of a traceback is reported as kind `exception`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from specbench.logs.normalize import Line


@dataclass(frozen=True, slots=True)
class Failure:
    kind: str
    message: str  # the engine's own text, one line
    line: int
    boot_failure: bool  # True: the engine did not start; False: a request was refused at run time

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "message": self.message}


@dataclass(frozen=True, slots=True)
class _Rule:
    kind: str
    pattern: re.Pattern[str]
    where: str  # engine file::function that raises it (shown by `doctor`)
    boot: bool = True


RULES: tuple[_Rule, ...] = (
    _Rule("max_running_requests_zero", re.compile(r"max_running_request is zero"),
          "sglang managers/tp_worker.py::TpModelWorker (assert max_running_requests > 0)"),
    _Rule("mamba_state_cache_too_small",
          re.compile(r"state cache is too small to serve any requests", re.I),
          "sglang mem_cache/kv_cache_configurator.py::resolve_max_num_reqs (>= 0.5.13)"),
    _Rule("mamba_state_cache_no_memory",
          re.compile(r"Not enough GPU memory for hybrid \(mamba/linear-attention\) state cache", re.I),
          "sglang KVCacheConfigurator._handle_max_mamba_cache"),
    _Rule("weights_leave_no_kv_memory", re.compile(r"Loaded weights leave no GPU memory", re.I),
          "sglang KVCacheConfigurator._profile_available_bytes (R <= 0)"),
    _Rule("kv_pool_empty", re.compile(r"Not enough memory\. Please try to increase --mem-fraction-static", re.I),
          "sglang MemoryPoolConfig.__post_init__ (max_total_num_tokens <= 0)"),
    _Rule("memory_pool_too_small", re.compile(r"Memory pool size is too small"),
          "sglang tp_worker.py (max_req_len <= 0)"),
    _Rule("mamba_ping_pong", re.compile(r"Not enough space for mamba ping pong idx", re.I),
          "sglang mamba radix cache (extra_buffer ping-pong slots exhausted)"),
    _Rule("vllm_mamba_blocks", re.compile(r"max_num_seqs \(\d+\) exceeds available Mamba cache blocks"),
          "vllm config/compilation.py::resolve_cudagraph_mode_and_sizes (>= 0.20)"),
    _Rule("vllm_no_kv_memory", re.compile(r"No available memory for the cache blocks"),
          "vllm kv_cache_utils.py::get_kv_cache_configs"),
    _Rule("vllm_max_model_len", re.compile(
        r"To serve at least one request with the models?'s max seq len|"
        r"is larger than the maximum number of tokens that can be stored in KV cache"),
          "vllm kv_cache_utils.py::check_enough_kv_cache_memory"),
    _Rule("context_length_exceeds_model", re.compile(
        r"(?:User-specified|specified) context_length \(?\d+\)? is greater than the derived", re.I),
          "sglang configs/model_config.py (context_length above the model's max_position_embeddings)"),
    _Rule("cuda_oom", re.compile(r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory", re.I),
          "torch allocator"),
    _Rule("empty_capture_bs", re.compile(r"capture_bs=\[\]"),
          "sglang cuda_graph_runner (no batch size left to capture)"),
    _Rule("process_crashed", re.compile(r"crashed with exit code -?\d+|Rank \d+ scheduler died|"
                                         r"Received sigquit from a child process"),
          "a scheduler / worker process died (segfault, killed, or an exception printed elsewhere)"),
    _Rule("context_too_long", re.compile(
        r"is longer than the model's context length|longer than the model's context length|"
        r"This model's maximum context length is|exceeds the max(?:imum)? (?:context|model) length|"
        r"Requested token count exceeds|is greater than the maximum context length", re.I),
          "request validation (prompt + max_new_tokens above context_len)", boot=False),
)

_WHERE = {r.kind: r.where for r in RULES}
_EXC = re.compile(r"^(?:[\w]+\.)*(?:\w*Error|\w*Exception)\b(?::|$)")
_CAPTURE_BEGIN = re.compile(r"Capture [\w \-]*cuda graph begin|Capturing CUDA graph|Capturing batches", re.I)
_CAPTURE_END = re.compile(r"Capture [\w \-]*cuda graph end|Graph capturing finished", re.I)


def where(kind: str) -> str:
    return _WHERE.get(kind, "")


def _message_for(lines: list[Line], idx: int) -> str:
    """The engine's text: the matched line itself when it is an exception line; else the nearest exception line
    after it (tracebacks print the context first); else the matched line."""
    text = lines[idx].text.strip()
    if _EXC.match(text):
        return text[:1000]
    for later in lines[idx + 1: idx + 40]:
        if _EXC.match(later.text) and len(later.text) < 1000:
            return later.text.strip()
    return text[:1000]


# Cheap lower-case substrings, at least one of which every rule's text contains: most lines are skipped by these
# before any regex runs (long logs are mostly decode statistics).
_KEYS = ("max_running_request", "state cache", "loaded weights", "not enough", "memory pool size", "ping pong",
         "mamba cache blocks", "no available memory", "max seq len", "maximum number of tokens", "context_length",
         "out of memory", "outofmemory", "capture_bs", "context length", "token count", "model length",
         "crashed with exit code", "scheduler died", "sigquit")


# The engine saying it serves (SGLang summary line / "fired up", uvicorn, vLLM API server / engine init done).
READY = re.compile(r"The server is fired up and ready to roll|Uvicorn running on|Application startup complete|"
                   r"^max_total_num_tokens=\d|Starting vLLM API server|"
                   r"init engine \(profile, create kv cache, warmup model\) took")


def ready_indexes(lines: list[Line]) -> list[int]:
    return [i for i, ln in enumerate(lines) if ("ready" in ln.text or "max_total_num_tokens=" in ln.text
                                                 or "Uvicorn" in ln.text or "startup complete" in ln.text
                                                 or "vLLM API server" in ln.text or "init engine" in ln.text)
            and READY.search(ln.text)]


_STOP = re.compile(r"SIGTERM received|Received SIGTERM|Shutting down|Got signal SIGTERM|KeyboardInterrupt")


def stop_index(lines: list[Line]) -> int | None:
    """Index of the first line saying the server was asked to stop (SIGTERM / shutdown), or None."""
    for i, ln in enumerate(lines):
        if ("SIGTERM" in ln.text or "Shutting down" in ln.text or "KeyboardInterrupt" in ln.text) \
                and _STOP.search(ln.text):
            return i
    return None


def classify(lines: list[Line]) -> Failure | None:
    """First known failure of the boot, else the last exception of a traceback, else None.

    An error the engine survived (it printed a readiness line afterwards, e.g. SGLang's "Can not initialize
    OpenAIServingResponses" traceback before "fired up") is not a failure. One after readiness is a run-time failure
    (`boot_failure` False); one with no readiness at all stopped the start-up."""
    ready = ready_indexes(lines)
    first_ready = ready[0] if ready else None
    last_ready = ready[-1] if ready else None
    stop = stop_index(lines)
    if stop is not None and first_ready is not None and stop > first_ready:
        lines = lines[:stop]  # a deliberate stop after serving: children "crash" with -15 by design

    def survived(idx: int) -> bool:
        return last_ready is not None and last_ready > idx

    for idx, line in enumerate(lines):
        low = line.text.lower()
        if not any(k in low for k in _KEYS) or survived(idx):
            continue
        for rule in RULES:
            if rule.pattern.search(line.text):
                kind = rule.kind
                if kind == "cuda_oom":
                    kind = _oom_kind(lines, idx)
                boot = rule.boot and (first_ready is None or idx < first_ready)
                return Failure(kind=kind, message=_message_for(lines, idx), line=line.no, boot_failure=boot)
    tb = [i for i, ln in enumerate(lines) if "Traceback (most recent call last)" in ln.text and not survived(i)]
    if tb:
        for idx in range(len(lines) - 1, tb[0] - 1, -1):
            if _EXC.match(lines[idx].text):
                boot = first_ready is None or idx < first_ready
                return Failure(kind="exception", message=lines[idx].text.strip()[:1000], line=lines[idx].no,
                               boot_failure=boot)
    return None


def survived_errors(lines: list[Line]) -> list[str]:
    """Exception lines the engine printed before it went on to serve (worth a note, not a failure)."""
    ready = ready_indexes(lines)
    if not ready:
        return []
    return [ln.text.strip()[:300] for ln in lines[: ready[-1]] if _EXC.match(ln.text)]


def _oom_kind(lines: list[Line], idx: int) -> str:
    """An OOM while a graph capture is open is `cuda_graph_oom`; before any pool, `cuda_oom_load`."""
    began = ended = pool = False
    for line in lines[:idx]:
        t = line.text
        if _CAPTURE_BEGIN.search(t):
            began, ended = True, False
        elif _CAPTURE_END.search(t):
            ended = True
        if "KV Cache is allocated" in t or "KV cache size" in t or "Memory pool end" in t:
            pool = True
    tb_start = max((i for i in range(idx + 1) if "Traceback (most recent call last)" in lines[i].text), default=idx)
    stack = " ".join(ln.text for ln in lines[tb_start: idx + 1]).lower()
    if (began and not ended) or "cuda_graph" in stack or "capture" in stack:
        return "cuda_graph_oom"
    if not pool:
        return "cuda_oom_load"
    return "cuda_oom"
