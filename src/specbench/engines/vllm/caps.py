"""What vLLM lowers at start-up below what was asked (caps: CUDA-graph profiling's equivalent utilization), and the
routine notes it prints then (block-size alignment, Mamba page padding, padding layers: never caps), as the doctor's
warning rules (logs/warnings.py reads `WARNINGS`).

A rule is a cap only through its `cap_of`, which names the asked value, the value it was lowered to and why.

The one cap: `CUDA graph memory profiling is enabled (default since v0.21.0). The current
--gpu-memory-utilization=U is equivalent to --gpu-memory-utilization=E without CUDA graph memory profiling. To maintain
the same effective KV cache size as before, increase --gpu-memory-utilization to S.`
(vllm/v1/worker/gpu_worker.py::Worker.determine_available_memory@0.32.0): the KV budget the asked U gave is now E.

Notes, never caps (they lower nothing that was asked):
- `Setting attention block size to N tokens to ensure that attention page size is >= mamba page size.` and `Padding
  mamba page size by X% to ensure that mamba page size and attention page size are exactly equal.`
  (vllm/platforms/interface.py::Platform._align_hybrid_block_size@0.32.0): hybrid page alignment;
- `Add N padding layers, may waste at most X% KV cache memory`
  (vllm/v1/core/kv_cache_utils.py::_get_kv_cache_groups_uniform_page_size@0.32.0): KV-cache group padding;
- `Hybrid KV cache manager is disabled for this hybrid model`: the engine's choice of manager;
- `Maximum concurrency for L tokens per request: C x` with C < 1: one full request does not fit; the engine
  refuses to start next (check_enough_kv_cache_memory), which engines/vllm/failures.py names;
- `Capturing cudagraphs for decoding` with under 1 GiB outside the budget (V0): a near-miss.
"""

from __future__ import annotations

import re

from specbench.engines.versions import Release
from specbench.logs.facts import LogFacts
from specbench.logs.lineacc import INT, NUM, to_int
from specbench.logs.warnings import Cap, WarningFix, WarningRule, engine_flags

_V_CONC = re.compile(r"Maximum concurrency for " + INT + r" tokens per request: " + NUM + r"x")
_GRAPH_PROFILING = re.compile(r"CUDA graph memory profiling is enabled.*?(?:current --gpu-memory-utilization="
                              r"(\d+(?:\.\d+)?) is )?equivalent to --gpu-memory-utilization=(\d+(?:\.\d+)?)")


def _conc_fixes(m: re.Match[str], text: str, f: LogFacts) -> list[WarningFix]:
    tokens, conc = to_int(m.group(1)), float(m.group(2))
    fit = f.kv_tokens or int((tokens or 0) * conc)
    more: WarningFix = {"change": {"--gpu-memory-utilization": None}, "source": "log",
                        "why": "or give the KV cache more"}
    if fit <= 0:  # 0.00x: no KV cache at all, no length fits (the failure's own fix says how much memory is missing)
        return [{**more, "why": "the KV cache holds no token: give it memory"}]
    return [{"change": {"--max-model-len": fit}, "source": "log",
             "why": f"the KV cache holds {fit:,} tokens, {conc}x of one {tokens:,}-token request"}, more]


# vLLM prints the graph-profiling line from 0.21 on, whose CacheConfig default is 0.92 (engines/vllm/gpu.py::default_u)
_PROFILING_SINCE = Release(0, 21, 0)


def _graph_of(m: re.Match[str], f: LogFacts) -> Cap | None:
    """The asked utilization is the line's own, else the log's, else (neither shows it) the release's default:
    a cap always names the value it lowered."""
    from specbench.engines.vllm.gpu import default_u

    why = "CUDA graph memory is now counted inside the budget (profiled before the KV cache is sized)"
    asked = float(m.group(1)) if m.group(1) else f.gpu_memory_utilization
    if asked is None:
        asked = default_u(_PROFILING_SINCE)
        why += f"; {asked} asked by default (the log shows no --gpu-memory-utilization)"
    return Cap("gpu_memory_utilization", "--gpu-memory-utilization", float(m.group(2)), why, asked)


def _graph_fixes(m: re.Match[str], text: str, f: LogFacts) -> list[WarningFix]:
    return engine_flags(text.split("To maintain", 1)[-1], "the engine's advice: keep the KV size it had before CUDA "
                        "graph memory profiling")


def _headroom(m: re.Match[str], f: LogFacts) -> bool:
    t, u = f.total_gpu_memory_gib, f.gpu_memory_utilization
    return t is not None and u is not None and t * (1 - u) < 1.0 and not f.graphs


def _headroom_fixes(m: re.Match[str], text: str, f: LogFacts) -> list[WarningFix]:
    t = f.total_gpu_memory_gib or 0.0
    eager: WarningFix = {"change": {"--enforce-eager": None}, "source": "engine", "why": "or capture no graphs"}
    util = int((1 - 2.0 / t) * 100) / 100 if t > 0 else 0.0
    if util < 0.05:  # a GPU of about 2 GiB or less: no utilization leaves 2 GiB outside the budget
        return [{**eager, "why": f"capture no graphs: the {t:.2f} GiB GPU cannot leave 2 GiB outside the budget"}]
    return [{"change": {"--gpu-memory-utilization": round(util, 2)}, "source": "log",
             "why": f"leave 2 GiB of the {t:.2f} GiB outside the budget for CUDA graphs (V0 captures them there)"},
            eager]


WARNINGS = (
    WarningRule("hybrid_kv_cache_manager_disabled", re.compile(
        r"Hybrid KV cache manager is disabled for this hybrid model"), key="Hybrid KV cache manager"),
    WarningRule("attention_block_size_overridden", re.compile(r"Setting attention block size to (\d+) tokens"),
                key="attention block size"),
    WarningRule("mamba_page_padding", re.compile(r"Padding mamba page size by (\d+(?:\.\d+)?)%"),
                key="Padding mamba page"),
    WarningRule("kv_padding_layers", re.compile(
        r"Add (\d+) padding layers, may waste at most (\d+(?:\.\d+)?)% KV cache memory"), key="padding layers"),
    WarningRule("effective_gpu_memory_utilization_reduced", _GRAPH_PROFILING, cap_of=_graph_of, fixes=_graph_fixes,
                key="CUDA graph memory profiling"),
    WarningRule("kv_smaller_than_context", _V_CONC, fixes=_conc_fixes, when=lambda m, f: float(m.group(2)) < 1.0,
                key="Maximum concurrency"),
    WarningRule("graph_capture_headroom_low", re.compile(r"Capturing cudagraphs for decoding"),
                when=_headroom, fixes=_headroom_fixes, key="Capturing cudagraphs"),
)
