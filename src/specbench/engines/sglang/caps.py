"""What SGLang lowers at start-up below what was asked (caps: the Mamba cap, the KV-capacity reduction, the profiled
max_total_tokens, a pool shorter than the context), and the other notes it prints then, as the doctor's warning rules
(logs/warnings.py reads `WARNINGS`).

A rule is a cap only through its `cap_of`, which names the asked value, the value it was lowered to and why, read
from the engine's own line:

- `max_running_requests is capped to N by the mamba state cache (max_mamba_cache_size=K, R state slots per request)`
  and `max_running_requests was reduced from the requested A to B (per dp worker) due to the available KV cache
  capacity` (mem_cache/kv_cache_configurator.py::KVCacheConfigurator.resolve_max_num_reqs@0.5.23, first printed in
  0.5.18). N = 0 is no cap: the engine raises "state cache is too small to serve any requests" right after
  (engines/sglang/failures.py names it);
- `max_total_tokens=X is larger than the profiled value Y. Use the profiled value instead.`
  (KVCacheConfigurator._apply_token_constraints@0.5.23; model_runner.py::ModelRunner.profile_max_num_token@0.5.5);
  Y <= 0 is no cap but a failure (`negative_kv_size`);
- `KV pool holds N tokens, fewer than --context-length C` (managers/tp_worker.py::TpModelWorker.get_worker_info
  @0.5.23: the longest request is min(C, N) - 1 tokens).

`Max running requests is reset to 48 for speculative decoding` is printed only when no --max-running-requests was
given (server_args.py::ServerArgs._handle_speculative_decoding@0.5.5): a default, not a cap.
"""

from __future__ import annotations

import re

from specbench.logs.facts import LogFacts
from specbench.logs.lineacc import to_int
from specbench.logs.warnings import Cap, WarningFix, WarningRule, engine_flags

_MAMBA_CAP = re.compile(r"max_running_requests is capped to (\d+) by the mamba state cache"
                        r"(?: ?\(max_mamba_cache_size=(\d+), (\d+) state slots per request)?", re.I)
_REDUCED = re.compile(r"max_running_requests was reduced from the requested (\d+) to (\d+)", re.I)
_PROFILED = re.compile(r"max_total_tokens=(\d+) is larger than the profiled value (-?\d+)")
_FEWER = re.compile(r"KV pool holds (\d[\d,]*) tokens, fewer than --context-length(?: (\d+))?", re.I)


def _asked_requests(f: LogFacts) -> int | None:
    req = f.server_args.get("max_running_requests")
    return req if isinstance(req, int) else f.mrr_reduced_from


def _mamba_cap_of(m: re.Match[str], f: LogFacts) -> Cap | None:
    cap = int(m.group(1))
    if cap <= 0:
        return None  # not a cap: the engine cannot serve any request and raises next
    k = to_int(m.group(2)) or f.max_mamba_cache_size
    rho = to_int(m.group(3)) or f.state_slots_per_request
    why = (f"the Mamba state cache has {k} slots and each running request holds {rho}: {k} // {rho} = {cap}"
           if k is not None and rho else "the Mamba state cache has too few slots")
    return Cap("max_running_requests", "--max-running-requests", cap, why, _asked_requests(f))


def _cap_fixes(m: re.Match[str], text: str, f: LogFacts) -> list[WarningFix]:
    out = engine_flags(text.split("To raise it", 1)[-1] if "To raise it" in text else "", "the engine's advice")
    cap = int(m.group(1))
    k = to_int(m.group(2)) or f.max_mamba_cache_size
    rho = to_int(m.group(3)) or f.state_slots_per_request
    req = _asked_requests(f)
    if isinstance(req, int) and rho and req > cap:
        out.insert(0, {"change": {"--max-mamba-cache-size": req * rho}, "source": "log",
                       "why": f"{req} requests x {rho} state slots per request (the pool has {k}): lifts the cap "
                              f"to the {req} asked, if the memory holds the slots (raise --mamba-full-memory-ratio "
                              "or --mem-fraction-static with it)"})
    return out


def _reduced_of(m: re.Match[str], f: LogFacts) -> Cap | None:
    return Cap("max_running_requests", "--max-running-requests", int(m.group(2)),
               "the KV cache capacity (per dp worker)", int(m.group(1)))


def _reduced_fixes(m: re.Match[str], text: str, f: LogFacts) -> list[WarningFix]:
    return engine_flags(text, "the engine's advice") or [
        {"change": {"--mem-fraction-static": None}, "source": "log",
         "why": f"more memory for the pools lets {m.group(1)} requests run instead of {m.group(2)}"}]


def _reset_fixes(m: re.Match[str], text: str, f: LogFacts) -> list[WarningFix]:
    return [{"change": {"--max-running-requests": int(m.group(1))}, "source": "engine",
             "why": "set it explicitly: speculative decoding overrides the default"}]


def _profiled_of(m: re.Match[str], f: LogFacts) -> Cap | None:
    y = int(m.group(2))
    if y <= 0:
        return None  # a negative profile is a failure (engines/sglang/failures.py: negative_kv_size)
    return Cap("max_total_tokens", "--max-total-tokens", y, f"the profiled KV capacity is {y} tokens",
               int(m.group(1)))


def _profiled_fixes(m: re.Match[str], text: str, f: LogFacts) -> list[WarningFix]:
    y = int(m.group(2))
    if y > 0:
        return [{"change": {"--max-total-tokens": y}, "source": "engine", "why": "the engine uses the profiled "
                 "value; ask for it, or raise --mem-fraction-static for more"}]
    return [{"change": {"--mem-fraction-static": None}, "source": "log",
             "why": "the weights leave no room under mem_fraction_static: raise it, or shard wider (--tp)"}]


def _fewer_of(m: re.Match[str], f: LogFacts) -> Cap | None:
    tokens = to_int(m.group(1))
    asked = to_int(m.group(2)) if m.group(2) else (f.context_len or f.server_args.get("context_length"))
    if tokens is None:
        return None
    return Cap("context length (the longest request)", "--context-length", tokens,
               f"the KV pool holds {tokens:,} tokens: longer requests are refused or truncated", asked)


def _fewer_fixes(m: re.Match[str], text: str, f: LogFacts) -> list[WarningFix]:
    own: WarningFix = {"change": {"--context-length": to_int(m.group(1)) if m.group(1) else f.kv_tokens},
                       "source": "log", "why": "the longest request the KV pool can hold"}
    return [own, *engine_flags(text, "the engine's advice")]


def _input_fixes(m: re.Match[str], text: str, f: LogFacts) -> list[WarningFix]:
    own: WarningFix = {"change": {"--context-length": int(m.group(2))}, "source": "log",
                       "why": "what the KV pool allows per request; or raise --mem-fraction-static"}
    return [own, *engine_flags(text, "the engine's advice")]


_SUMMARY = re.compile(r"max_total_num_tokens=(\d+),.*?\bcontext_len=(\d+)", re.S)


WARNINGS = (
    WarningRule("mamba_cap", _MAMBA_CAP, cap_of=_mamba_cap_of, fixes=_cap_fixes, key="capped to"),
    WarningRule("mrr_reduced", _REDUCED, cap_of=_reduced_of, fixes=_reduced_fixes, key="reduced from"),
    WarningRule("mrr_reset_for_speculative", re.compile(
        r"Max running requests is reset to (\d+) for speculative decoding", re.I), fixes=_reset_fixes, key="reset to"),
    WarningRule("max_total_tokens_capped", _PROFILED, cap_of=_profiled_of, fixes=_profiled_fixes,
                kind_fn=lambda m: "negative_profiled_kv_tokens" if int(m.group(2)) <= 0 else "max_total_tokens_capped",
                key="profiled value"),
    WarningRule("kv_smaller_than_context", _FEWER, cap_of=_fewer_of, fixes=_fewer_fixes, key="KV pool holds"),
    # the ready summary itself (model_executor/model_runner.py / scheduler.py@0.5.15.post1 log both numbers): a pool
    # shorter than context_len starts without a word, and a request past the pool's length is refused at run time
    WarningRule("kv_smaller_than_context", _SUMMARY, cap_of=_fewer_of, fixes=_fewer_fixes,
                when=lambda m, f: int(m.group(1)) < int(m.group(2)), key="max_total_num_tokens="),
    # a request refused (or truncated) at run time: the pool's limit per request, not a start-up cap
    WarningRule("kv_smaller_than_context", re.compile(
        r"Input length \((\d+) tokens\) exceeds the maximum allowed length \((\d+) tokens\)"),
        fixes=_input_fixes, key="maximum allowed length"),
    WarningRule("low_avail_mem_after_pool", re.compile(r"Memory pool end\. ?avail mem=(\d+(?:\.\d+)?) ?GB"),
                when=lambda m, f: float(m.group(1)) < 0.5, key="Memory pool end",
                fixes=lambda m, t, f: [{"change": {"--mem-fraction-static": None}, "source": "log",
                                        "why": "under 0.5 GiB left for activations and CUDA graphs: lower it"}]),
    WarningRule("backend_overridden", re.compile(r"\bis disabled when .*?Using (\w+) backend instead"),
                key="backend instead"),
    WarningRule("prefill_cuda_graph_disabled", re.compile(r"Disable prefill CUDA graph because"),
                key="Disable prefill CUDA graph"),
)
