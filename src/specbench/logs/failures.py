"""Name the failure in a log: a stable `kind` plus the engine's own message text. Pure, never raises.

Engine-neutral machinery: each engine lists its own failures in `engines/<engine>/failures.py::FAILURES` (an
`EngineFailures`: the rules with the engine place that raises each, the wrapper lines around a failure printed
elsewhere, the lines saying it serves); `GENERIC` holds what no engine owns (the torch / CUDA / HIP allocator and
device runtime, the host's OOM killer, request validation of the OpenAI API). The doctor merges them (`merge`) and
passes the table to `classify`. The first known failure in the boot wins (later ones are usually consequences:
"scheduler died", "capture_bs=[]" ...); with none known, the last exception line of a traceback is reported as kind
`exception`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from specbench.logs.normalize import Line


@dataclass(frozen=True, slots=True)
class Failure:
    kind: str
    message: str  # the engine's own text, one line
    line: int
    boot_failure: bool  # True: the engine did not start; False: a request was refused at run time
    wrapper: str | None = None  # the wrapper line around it (sigquit, EngineDeadError, "Scheduler hit an exception")
    context: str = field(default="", compare=False)  # the matched line and the few after it (a record wrapped
    # over several lines keeps its numbers there); what the engines' fixes read, not part of the JSON

    def to_dict(self) -> dict[str, str]:
        d = {"kind": self.kind, "message": self.message}
        if self.wrapper:
            d["wrapper"] = self.wrapper
        return d


@dataclass(frozen=True, slots=True)
class FailureRule:
    """One known failure (or wrapper, or readiness line): its stable kind, its regex, the engine place that prints
    it, and cheap lower-case substrings one of which every matching line contains (most lines are skipped by these
    before any regex runs: long logs are mostly decode statistics)."""

    kind: str
    pattern: re.Pattern[str]
    where: str  # engine file::function that raises it (shown by `doctor`)
    keys: tuple[str, ...]
    boot: bool = True  # False: a request refused at run time, the server was up
    own_line: bool = False  # the matched line is itself the engine's statement (a log record, not only `XxxError:`)
    tier: int = 1  # on one line the lowest tier wins: 0 the device's own cause (OOM), 1 an engine's rule, 2 generic

    def hit(self, text: str, low: str) -> bool:
        return any(k in low for k in self.keys) and self.pattern.search(text) is not None


def failure_rule(kind: str, pattern: str, where: str, keys: tuple[str, ...], *, ignore_case: bool = False,
                 boot: bool = True, own_line: bool = False, tier: int = 1) -> FailureRule:
    """One rule: the failure's kind, its regex (compiled here), the engine place that raises it, its key words."""
    return FailureRule(kind, re.compile(pattern, re.I if ignore_case else 0), where, keys, boot, own_line, tier)


@dataclass(frozen=True)
class EngineFailures:
    """One engine's failure knowledge (`engines/<engine>/failures.py::FAILURES`), or all of them merged."""

    rules: tuple[FailureRule, ...] = ()
    frames: tuple[FailureRule, ...] = ()  # kinds read from a traceback's frames when its error line is generic
    wrappers: tuple[FailureRule, ...] = ()  # lines that wrap a failure printed elsewhere: context, never the cause
    ready: tuple[FailureRule, ...] = ()  # the engine saying it serves
    # lower-case words one of which every line above (and the boot's argument dump) contains: what the reader keeps
    # of a long log's middle (logs/reader.py), searched with bytes.find, so a few short words, not every rule's keys
    anchors: tuple[str, ...] = ()


# What no engine owns: the device's allocator and runtime, a plugin, the host, request validation.
GENERIC = EngineFailures(anchors=("error", "exception", "traceback", "memory", "kill", "fail", "crash"),
                         rules=(
    failure_rule("cuda_oom", r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory|"
                 r"CUDA driver error: out of memory|HIP out of memory|HIP error: out of memory|NPU out of memory",
                 "torch allocator", ("out of memory", "outofmemory"), ignore_case=True, tier=0),
    failure_rule("hybrid_kv_unsupported", r"Hybrid models with more than one KV cache type are not supported",
                 "a KV-cache plugin (kvcached) that handles one KV cache type only", ("more than one kv cache type",),
                 own_line=True, tier=2),
    failure_rule("device_error", r"(?:CUDA|HIP) error: (?!out of memory)",
                 "the device runtime (driver / ROCm / CUDA), not the engine's memory plan", (" error: ",),
                 own_line=True, tier=2),
    # the host's kernel OOM killer (dmesg / journalctl -k: mm/oom_kill.c::__oom_kill_process, "Out of memory: Killed
    # process %d (%s)"; "%s invoked oom-killer"), not the GPU
    failure_rule("host_oom_killed", r"Out of memory: Killed process \d+ \(|invoked oom-killer|oom-kill:constraint=|"
                 r"oom_reaper: reaped process|OOMKilled",
                 "the host kernel's OOM killer (host RAM, not GPU memory)",
                 ("killed process", "oom-kill", "oom_reaper", "oomkilled"), own_line=True, tier=2),
    # SIGKILL with no kernel line in the excerpt: the shell's `Killed`, exit status 137 (128 + 9), exit code -9
    failure_rule("process_killed", r"^Killed\s*$|exit(?:ed)?(?: with)? ?(?:exit )?(?:code|status)?[ =:(]*(?:137|-9)\b|Exited \(137\)|"
                 r"died with exit code -9|exitcode=-9|signal 9 \(SIGKILL\)|killed by signal 9",
                 "SIGKILL, most often the host's OOM killer (exit status 137 = 128 + 9)",
                 ("killed", "137", "-9", "signal 9"), own_line=True, tier=2),
    failure_rule("process_crashed", r"crashed with exit code -?\d+",
                 "a worker process died (segfault, killed, or an exception printed elsewhere)",
                 ("crashed with exit code",), tier=2),
    failure_rule("context_too_long", r"is longer than the model's context length|longer than the model's context "
                 r"length|This model's maximum context length is|exceeds the max(?:imum)? (?:context|model) length|"
                 r"Requested token count exceeds|is greater than the maximum context length",
                 "request validation (prompt + max_new_tokens above context_len)",
                 ("context length", "token count", "model length"), ignore_case=True, boot=False, tier=2),
))


def merge(parts: Sequence[EngineFailures]) -> EngineFailures:
    """The engines' tables and GENERIC as one, rules ordered by tier (stable: each engine's own order kept)."""
    everything = [*parts, GENERIC]
    rules = sorted((r for p in everything for r in p.rules), key=lambda r: r.tier)
    anchors = tuple(dict.fromkeys(a for p in everything for a in p.anchors))
    return EngineFailures(tuple(rules), tuple(r for p in everything for r in p.frames),
                          tuple(r for p in everything for r in p.wrappers),
                          tuple(r for p in everything for r in p.ready), anchors)


_EXC = re.compile(r"^(?:[\w]+\.)*(?:\w*Error|\w*Exception)\b(?::|$)")
_CAPTURE_BEGIN = re.compile(r"Capture [\w \-]*cuda graph begin|Capturing CUDA graph|Capturing batches", re.I)
_CAPTURE_END = re.compile(r"Capture [\w \-]*cuda graph end|Graph capturing finished", re.I)
_FRAME = re.compile(r'^File "[^"]*", line \d+, in (\w+)')


def where(kind: str, table: EngineFailures) -> str:
    return next((r.where for r in table.rules if r.kind == kind), "")


def _first(rules: Sequence[FailureRule], text: str) -> FailureRule | None:
    low = text.lower()
    return next((r for r in rules if r.hit(text, low)), None)


def ready_indexes(lines: list[Line], table: EngineFailures) -> list[int]:
    return [i for i, ln in enumerate(lines) if _first(table.ready, ln.text) is not None]


def _is_wrapper(text: str, table: EngineFailures) -> bool:
    return _first(table.wrappers, text) is not None


def _frames_kind(lines: list[Line], idx: int, table: EngineFailures) -> str | None:
    stack = " ".join(ln.text for ln in lines[max(0, idx - 40): idx + 1])
    return next((r.kind for r in table.frames if r.pattern.search(stack)), None)


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


_STOP = re.compile(r"SIGTERM received|Received SIGTERM|Shutting down|Got signal SIGTERM|KeyboardInterrupt")


def stop_index(lines: list[Line]) -> int | None:
    """Index of the first line saying the server was asked to stop (SIGTERM / shutdown), or None."""
    for i, ln in enumerate(lines):
        if ("SIGTERM" in ln.text or "Shutting down" in ln.text or "KeyboardInterrupt" in ln.text) \
                and _STOP.search(ln.text):
            return i
    return None


def _last_frame(lines: list[Line], start: int) -> str | None:
    funcs = [m.group(1) for ln in lines[start:] for m in [_FRAME.match(ln.text)] if m]
    return " -> ".join(funcs[-3:]) if funcs else None


def classify(lines: list[Line], table: EngineFailures) -> Failure | None:
    """The root cause of the boot: the EARLIEST engine error in it, not a wrapper; else None.

    An error line is a known failure (`table.rules`: a stable kind) or a traceback's final `XxxError: ...` line (kind from a
    later line of the same chain, or from the frames, else `exception`). Wrappers (`table.wrappers`) are kept as
    `Failure.wrapper`. With only a wrapper or a traceback cut before its error line, the failure is `process_crashed`
    / `traceback_cut_off` and its message says the cause is not in the log.

    An error the engine survived (it printed a readiness line afterwards, e.g. SGLang's "Can not initialize
    OpenAIServingResponses" traceback before "fired up") is not a failure. One after readiness is a run-time failure
    (`boot_failure` False); one with no readiness at all stopped the start-up.

    Kinds (stable; each rule names its raising place): max_running_requests_zero, mamba_state_cache_too_small,
    mamba_state_cache_no_memory, weights_leave_no_kv_memory, kv_pool_empty, memory_pool_too_small, mamba_ping_pong,
    vllm_mamba_blocks, vllm_no_kv_memory, vllm_max_model_len, context_length_exceeds_model, cuda_oom_sampler_warmup,
    cuda_oom / cuda_oom_load / cuda_graph_oom (torch, CUDA driver, HIP and NPU allocators), cuda_graph_capture_failed,
    vllm_free_memory_below_utilization, vllm_hybrid_kv_unify_failed, hybrid_kv_unsupported,
    unsupported_architecture, tp_not_divisible, negative_kv_size, device_error, empty_capture_bs,
    kv_cache_page_size_mismatch (from the frames), context_too_long (run time), host_oom_killed (the kernel's OOM
    killer), process_killed (SIGKILL: `Killed`, exit status 137), exception (any other error line), process_crashed
    (a wrapper only), traceback_cut_off (a traceback with no error line in the excerpt)."""
    ready = ready_indexes(lines, table)
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
        if _is_wrapper(text, table):
            if wrapper is None:
                wrapper = (idx, text.strip()[:300])
            continue
        rule = _first(table.rules, text)
        if rule is None and not _EXC.match(text):
            continue
        wrap = wrapper[1] if wrapper else _later_wrapper(lines, idx, table)
        if rule is not None:
            kind = _oom_kind(lines, idx) if rule.kind == "cuda_oom" else rule.kind
            msg = text.strip()[:1000] if rule.own_line and not _EXC.match(text) and \
                not _same_rule_later(lines, idx, rule) else _message_for(lines, idx)
            context = " ".join(ln.text.strip() for ln in lines[idx: idx + 6])
            return Failure(kind=kind, message=msg, line=line.no, boot_failure=boot(idx, rule.boot), wrapper=wrap,
                           context=context)
        kind = _chain_kind(lines, idx, table) or _frames_kind(lines, idx, table) or "exception"
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


def _later_wrapper(lines: list[Line], idx: int, table: EngineFailures) -> str | None:
    for ln in lines[idx + 1: idx + 400]:
        if _is_wrapper(ln.text, table):
            return ln.text.strip()[:300]
    return None


def _same_rule_later(lines: list[Line], idx: int, rule: FailureRule) -> bool:
    return any(_EXC.match(ln.text) and rule.pattern.search(ln.text) for ln in lines[idx + 1: idx + 40])


def _chain_kind(lines: list[Line], idx: int, table: EngineFailures) -> str | None:
    """A known kind named by a later error line of the same failure (a chained `During handling ...` exception)."""
    for ln in lines[idx + 1: idx + 200]:
        if _is_wrapper(ln.text, table):
            break
        if _EXC.match(ln.text):
            rule = _first(table.rules, ln.text)
            if rule is not None:
                return _oom_kind(lines, idx) if rule.kind == "cuda_oom" else rule.kind
    return None


def survived_errors(lines: list[Line], table: EngineFailures) -> list[str]:
    """Exception lines the engine printed before it went on to serve (worth a note, not a failure)."""
    ready = ready_indexes(lines, table)
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
