"""Name the failure in a log: a stable `kind` plus the engine's own message text. Pure, never raises.

Each known failure is a regex over the cleaned lines and the engine place that raises it (`where` of each rule,
the engine's file::function, shown by `doctor`). The first known failure
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
    wrapper: str | None = None  # the wrapper line around it (sigquit, EngineDeadError, "Scheduler hit an exception")

    def to_dict(self) -> dict[str, str]:
        d = {"kind": self.kind, "message": self.message}
        if self.wrapper:
            d["wrapper"] = self.wrapper
        return d


@dataclass(frozen=True, slots=True)
class _Rule:
    kind: str
    pattern: re.Pattern[str]
    where: str  # engine file::function that raises it (shown by `doctor`)
    boot: bool = True


def _rule(kind: str, pattern: str, where: str, *, ignore_case: bool = False, boot: bool = True) -> _Rule:
    """One row of `RULES`: the failure's kind, its regex (compiled here), the engine place that raises it."""
    return _Rule(kind, re.compile(pattern, re.I if ignore_case else 0), where, boot)


RULES: tuple[_Rule, ...] = (
    _rule("max_running_requests_zero", r"max_running_request is zero",
          "sglang managers/tp_worker.py::TpModelWorker (assert max_running_requests > 0)"),
    _rule("mamba_state_cache_too_small", r"state cache is too small to serve any requests",
          "sglang mem_cache/kv_cache_configurator.py::resolve_max_num_reqs (>= 0.5.13)", ignore_case=True),
    _rule("mamba_state_cache_no_memory", r"Not enough GPU memory for hybrid \(mamba/linear-attention\) state cache",
          "sglang KVCacheConfigurator._handle_max_mamba_cache", ignore_case=True),
    _rule("weights_leave_no_kv_memory", r"Loaded weights leave no GPU memory",
          "sglang KVCacheConfigurator._profile_available_bytes (R <= 0)", ignore_case=True),
    _rule("kv_pool_empty", r"Not enough memory\. Please try to increase --mem-fraction-static",
          "sglang MemoryPoolConfig.__post_init__ (max_total_num_tokens <= 0)", ignore_case=True),
    _rule("memory_pool_too_small", r"Memory pool size is too small", "sglang tp_worker.py (max_req_len <= 0)"),
    _rule("mamba_ping_pong", r"Not enough space for mamba ping pong idx",
          "sglang mamba radix cache (extra_buffer ping-pong slots exhausted)", ignore_case=True),
    _rule("vllm_mamba_blocks", r"max_num_seqs \(\d+\) exceeds available Mamba cache blocks",
          "vllm config/compilation.py::resolve_cudagraph_mode_and_sizes (>= 0.20)"),
    _rule("vllm_no_kv_memory", r"No available memory for the cache blocks",
          "vllm kv_cache_utils.py::get_kv_cache_configs"),
    _rule("vllm_max_model_len", r"To serve at least one request with the models?'s max seq len|"
          r"is larger than the maximum number of tokens that can be stored in KV cache",
          "vllm kv_cache_utils.py::check_enough_kv_cache_memory"),
    _rule("context_length_exceeds_model",
          r"(?:User-specified|specified) context_length \(?\d+\)? is greater than the derived",
          "sglang configs/model_config.py (context_length above the model's max_position_embeddings)", ignore_case=True),
    _rule("cuda_oom_sampler_warmup", r"out of memory occurred when warming up sampler",
          "vllm gpu_model_runner.py::_dummy_sampler_run (max_num_seqs dummy requests)", ignore_case=True),
    _rule("cuda_oom", r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory|"
          r"CUDA driver error: out of memory|HIP out of memory|HIP error: out of memory|NPU out of memory",
          "torch allocator", ignore_case=True),
    _rule("cuda_graph_capture_failed", r"Capture cuda graph failed",
          "sglang cuda_graph_runner.py::CudaGraphRunner.__init__ (the error above it is the cause)", ignore_case=True),
    _rule("vllm_free_memory_below_utilization",
          r"Free memory on device \S+ \([\d./ ]+GiB\) on startup is less than desired GPU memory utilization",
          "vllm v1/worker/utils.py::request_memory (free at start < total x gpu_memory_utilization)"),
    _rule("vllm_hybrid_kv_unify_failed", r"Hybrid KV cache manager is disabled but failed to convert",
          "vllm v1/core/kv_cache_utils.py::unify_hybrid_kv_cache_specs"),
    _rule("hybrid_kv_unsupported", r"Hybrid models with more than one KV cache type are not supported",
          "a KV-cache plugin (kvcached) that handles one KV cache type only"),
    _rule("unsupported_architecture", r"has no vLLM implementation|Transformers does not recognize this architecture|"
          r"Model architectures? \[.*\] (?:are|is) not supported",
          "vllm model_executor/model_loader/utils.py / transformers AutoConfig (model type unknown to this build)"),
    _rule("tp_not_divisible", r"must be divisible by tensor parallel size",
          "vllm config/model.py::verify_with_parallel_config"),
    _rule("negative_kv_size", r"is larger than the profiled value -\d+",
          "sglang model_runner.py::profile_max_num_token (weights exceed mem_fraction_static x free)"),
    _rule("device_error", r"(?:CUDA|HIP) error: (?!out of memory)",
          "the device runtime (driver / ROCm / CUDA), not the engine's memory plan"),
    _rule("empty_capture_bs", r"capture_bs=\[\]", "sglang cuda_graph_runner (no batch size left to capture)"),
    _rule("process_crashed", r"crashed with exit code -?\d+|Rank \d+ scheduler died|"
          r"Received sigquit from a child process",
          "a scheduler / worker process died (segfault, killed, or an exception printed elsewhere)"),
    _rule("context_too_long", r"is longer than the model's context length|longer than the model's context length|"
          r"This model's maximum context length is|exceeds the max(?:imum)? (?:context|model) length|"
          r"Requested token count exceeds|is greater than the maximum context length",
          "request validation (prompt + max_new_tokens above context_len)", ignore_case=True, boot=False),
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
         "crashed with exit code", "scheduler died", "sigquit", "warming up sampler", "capture cuda graph failed",
         "free memory on device", "failed to convert", "more than one kv cache type", "vllm implementation",
         "recognize this architecture", "not supported", "divisible by tensor parallel", "profiled value -",
         " error: ")


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


# Lines that wrap a failure printed elsewhere (the parent noticing a dead child, the engine core re-raising):
# context, never the root cause.
WRAPPER = re.compile(
    r"Received sigquit from a child process|EngineDeadError|Engine core initialization failed|"
    r"WorkerProc initialization failed|Scheduler hit an exception|Rank \d+ scheduler is dead|Rank \d+ scheduler died|"
    r"EngineCore failed to start|Exception in run_tp_server|WorkerProc hit an exception|"
    r"Worker proc \S+ died unexpectedly")
_WRAP_KEYS = ("sigquit", "enginedead", "initialization failed", "hit an exception", "scheduler is dead",
              "scheduler died", "failed to start", "run_tp_server", "died unexpectedly")
# Kinds read from the traceback's frames when the error line itself is generic (a bare AssertionError ...)
_FRAME_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"unify_kv_cache_spec_page_size|page_size_bytes == max_page_size"), "kv_cache_page_size_mismatch"),
)
_FRAME = re.compile(r'^File "[^"]*", line \d+, in (\w+)')
# Rules whose matched line is itself the engine's statement (printed as a log record, not only as `XxxError:`)
_OWN_LINE = {"unsupported_architecture", "negative_kv_size", "vllm_free_memory_below_utilization",
             "cuda_graph_capture_failed", "tp_not_divisible", "hybrid_kv_unsupported", "vllm_hybrid_kv_unify_failed",
             "cuda_oom_sampler_warmup", "device_error"}


def _is_wrapper(text: str) -> bool:
    low = text.lower()
    return any(k in low for k in _WRAP_KEYS) and WRAPPER.search(text) is not None


def _rule_for(text: str) -> _Rule | None:
    low = text.lower()
    if not any(k in low for k in _KEYS):
        return None
    return next((r for r in RULES if r.pattern.search(text)), None)


def _frames_kind(lines: list[Line], idx: int) -> str | None:
    stack = " ".join(ln.text for ln in lines[max(0, idx - 40): idx + 1])
    return next((kind for pat, kind in _FRAME_RULES if pat.search(stack)), None)


def _last_frame(lines: list[Line], start: int) -> str | None:
    funcs = [m.group(1) for ln in lines[start:] for m in [_FRAME.match(ln.text)] if m]
    return " -> ".join(funcs[-3:]) if funcs else None


def classify(lines: list[Line]) -> Failure | None:
    """The root cause of the boot: the EARLIEST engine error in it, not a wrapper; else None.

    An error line is a known failure (RULES: a stable kind) or a traceback's final `XxxError: ...` line (kind from a
    later line of the same chain, or from the frames, else `exception`). Wrappers (`WRAPPER`) are kept as
    `Failure.wrapper`. With only a wrapper or a traceback cut before its error line, the failure is `process_crashed`
    / `traceback_cut_off` and its message says the cause is not in the log.

    An error the engine survived (it printed a readiness line afterwards, e.g. SGLang's "Can not initialize
    OpenAIServingResponses" traceback before "fired up") is not a failure. One after readiness is a run-time failure
    (`boot_failure` False); one with no readiness at all stopped the start-up.

    Kinds (stable; see RULES for the raising place): max_running_requests_zero, mamba_state_cache_too_small,
    mamba_state_cache_no_memory, weights_leave_no_kv_memory, kv_pool_empty, memory_pool_too_small, mamba_ping_pong,
    vllm_mamba_blocks, vllm_no_kv_memory, vllm_max_model_len, context_length_exceeds_model, cuda_oom_sampler_warmup,
    cuda_oom / cuda_oom_load / cuda_graph_oom (torch, CUDA driver, HIP and NPU allocators), cuda_graph_capture_failed,
    vllm_free_memory_below_utilization, vllm_hybrid_kv_unify_failed, hybrid_kv_unsupported,
    unsupported_architecture, tp_not_divisible, negative_kv_size, device_error, empty_capture_bs,
    kv_cache_page_size_mismatch (from the frames), context_too_long (run time), exception (any other error line),
    process_crashed (a wrapper only), traceback_cut_off (a traceback with no error line in the excerpt)."""
    ready = ready_indexes(lines)
    first_ready = ready[0] if ready else None
    last_ready = ready[-1] if ready else None
    stop = stop_index(lines)
    if stop is not None and first_ready is not None and stop > first_ready:
        lines = lines[:stop]  # a deliberate stop after serving: children "crash" with -15 by design

    def survived(idx: int) -> bool:
        return last_ready is not None and last_ready > idx

    def boot(idx: int, rule_boot: bool = True) -> bool:
        return rule_boot and (first_ready is None or idx < first_ready)

    wrapper: tuple[int, str] | None = None
    for idx, line in enumerate(lines):
        if survived(idx):
            continue
        text = line.text
        if _is_wrapper(text):
            if wrapper is None:
                wrapper = (idx, text.strip()[:300])
            continue
        rule = _rule_for(text)
        if rule is None and not _EXC.match(text):
            continue
        wrap = wrapper[1] if wrapper else _later_wrapper(lines, idx)
        if rule is not None:
            kind = _oom_kind(lines, idx) if rule.kind == "cuda_oom" else rule.kind
            msg = text.strip()[:1000] if rule.kind in _OWN_LINE and not _EXC.match(text) and \
                not _same_rule_later(lines, idx, rule) else _message_for(lines, idx)
            return Failure(kind=kind, message=msg, line=line.no, boot_failure=boot(idx, rule.boot), wrapper=wrap)
        kind = _chain_kind(lines, idx) or _frames_kind(lines, idx) or "exception"
        return Failure(kind=kind, message=text.strip()[:1000], line=line.no, boot_failure=boot(idx), wrapper=wrap)
    tb = [i for i, ln in enumerate(lines) if "Traceback (most recent call last)" in ln.text and not survived(i)]
    if wrapper is not None or tb:
        at = wrapper[0] if wrapper is not None else tb[0]
        frame = _last_frame(lines, at)
        where_ = f"; the traceback stops in {frame}" if frame else ""
        kind = "process_crashed" if wrapper is not None else "traceback_cut_off"
        msg = ("no engine error line in this log (cut off, or printed by another process)" + where_)
        return Failure(kind=kind, message=msg, line=lines[at].no, boot_failure=boot(at),
                       wrapper=wrapper[1] if wrapper else None)
    return None


def _later_wrapper(lines: list[Line], idx: int) -> str | None:
    for ln in lines[idx + 1: idx + 400]:
        if _is_wrapper(ln.text):
            return ln.text.strip()[:300]
    return None


def _same_rule_later(lines: list[Line], idx: int, rule: _Rule) -> bool:
    return any(_EXC.match(ln.text) and rule.pattern.search(ln.text) for ln in lines[idx + 1: idx + 40])


def _chain_kind(lines: list[Line], idx: int) -> str | None:
    """A known kind named by a later error line of the same failure (a chained `During handling ...` exception)."""
    for ln in lines[idx + 1: idx + 200]:
        if _is_wrapper(ln.text):
            break
        if _EXC.match(ln.text):
            rule = _rule_for(ln.text)
            if rule is not None:
                return _oom_kind(lines, idx) if rule.kind == "cuda_oom" else rule.kind
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
    tb_start = max((i for i in range(idx + 1) if "Traceback (most recent call last)" in lines[i].text),
                   default=max(0, idx - 40))  # an excerpt that starts inside the traceback
    stack = " ".join(ln.text for ln in lines[tb_start: idx + 1]).lower()
    if "warming up sampler" in lines[idx].text:
        return "cuda_oom_sampler_warmup"
    if (began and not ended) or "cuda_graph" in stack or "capture" in stack:
        return "cuda_graph_oom"
    if not pool:
        return "cuda_oom_load"
    return "cuda_oom"
