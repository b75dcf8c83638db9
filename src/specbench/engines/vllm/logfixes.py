"""One fix per vLLM failure, computed from the numbers the engine printed (the doctor puts it before the planner's):
--max-model-len from its KV-token count or estimate, the utilization that fits the asked length, the one under
free/total (or freeing the GPU), the one that leaves KV memory after a negative profile, --max-num-seqs for the Mamba
blocks.


- `vllm_max_model_len`: the V0 check `The model's max seq len (A) is larger than the maximum number of tokens that can
  be stored in KV cache (B)` (vllm/worker/worker.py::raise_if_cache_size_invalid@0.6.x) gives --max-model-len B;
  the V1 check `To serve at least one request with the model's max seq len (A), (N GiB KV cache is needed, which is
  larger than the available KV cache memory (M GiB). Based on the available memory, the estimated maximum model length
  is E.` (vllm/v1/core/kv_cache_utils.py::_check_enough_kv_cache_memory@0.32.0) gives --max-model-len E; and where the
  log has the budget (total x utilization), the utilization whose extra memory holds one request of A tokens;
- `vllm_free_memory_below_utilization`: `Free memory on device (F/T GiB) on startup is less than desired GPU memory
  utilization (U, R GiB)` (vllm/v1/worker/utils.py::request_memory@0.32.0: requested = T x U must not exceed F) gives
  the largest utilization under F/T; when other processes hold most of the GPU, freeing it comes first;
- `vllm_no_kv_memory` with the profile's numbers (V0 `the rest of the memory reserved for KV Cache is -K GiB`, V1
  `Available KV cache memory: -K GiB`): the utilization that leaves 1 GiB for the KV cache over what the profile used;
- `vllm_mamba_blocks`: `max_num_seqs (S) exceeds available Mamba cache blocks (B)` gives --max-num-seqs B.
"""

from __future__ import annotations

import math
import re

from specbench.engines.base import FixJson, FixResultJson
from specbench.logs.facts import LogFacts
from specbench.logs.failures import Failure

_V0_LEN = re.compile(r"max seq len \((\d+)\) is larger than the maximum number of tokens that can be stored in KV "
                     r"cache \((\d+)\)")
_V1_LEN = re.compile(r"max seq len \((\d+)\),? \(?(\d+(?:\.\d+)?) GiB KV cache is needed, which is larger than the "
                     r"available KV cache memory \((\d+(?:\.\d+)?) GiB\)")
_V1_EST = re.compile(r"estimated maximum model length is (\d+)")
_FREE = re.compile(r"Free memory on device \S+ \((\d+(?:\.\d+)?)/(\d+(?:\.\d+)?) ?GiB\) on startup is less than "
                   r"desired GPU memory utilization \((\d+(?:\.\d+)?), (\d+(?:\.\d+)?) ?GiB\)")
_MAMBA_BLOCKS = re.compile(r"max_num_seqs \((\d+)\) exceeds available Mamba cache blocks \((\d+)\)")

MAX_UTILIZATION = 0.98  # above this nothing is left for the CUDA context and NCCL (a fix past it would not start)
OTHER_PROCESS_SHARE = 0.5  # other processes hold more than this share of the GPU: free it before any utilization


def _result(kv_tokens: int | None = None) -> FixResultJson:
    return {"status": "ok", "error": None, "kv_tokens": kv_tokens, "max_running_requests": None}


def _up(x: float) -> float:
    return math.ceil(x * 100 - 1e-9) / 100


def _down(x: float) -> float:
    return math.floor(x * 100 + 1e-9) / 100


def _max_model_len(f: LogFacts, text: str) -> list[FixJson]:
    out: list[FixJson] = []
    v0, v1, est = _V0_LEN.search(text), _V1_LEN.search(text), _V1_EST.search(text)
    fit = int(v0.group(2)) if v0 else int(est.group(1)) if est else None
    asked = int(v0.group(1)) if v0 else int(v1.group(1)) if v1 else None
    if fit is not None and fit > 0:
        out.append({"change": {"--max-model-len": fit}, "source": "engine", "result": _result(fit),
                    "why": f"the KV cache holds {fit:,} tokens by the engine's own count: one request of {fit:,} "
                           "tokens fits"})
    need = avail = None
    if v1:
        need, avail = float(v1.group(2)), float(v1.group(3))
        if fit is None and asked and need > 0:  # releases before the engine printed its estimate (< 0.9)
            scaled = int(asked * avail / need) // 16 * 16  # one request's KV grows linearly with its tokens
            if scaled > 0:
                out.append({"change": {"--max-model-len": scaled}, "source": "log", "result": _result(scaled),
                            "why": f"{avail:.2f} of the {need:.2f} GiB one {asked:,}-token request needs: "
                                   f"{asked:,} x {avail:.2f}/{need:.2f}, down to a multiple of 16 (sliding-window "
                                   "and Mamba layers need less, so it fits)"})
    elif v0 and f.available_kv_gib is not None and fit:
        avail = f.available_kv_gib
        need = avail * int(v0.group(1)) / fit
    total, util = f.total_gpu_memory_gib, f.gpu_memory_utilization
    if need is not None and avail is not None and total and util is not None and asked:
        want = _up(util + (need - avail) / total)
        if want <= MAX_UTILIZATION:
            out.append({"change": {"--gpu-memory-utilization": want}, "source": "log", "result": _result(asked),
                        "why": f"{need - avail:.2f} GiB more KV cache ({need:.2f} needed, {avail:.2f} available) "
                               f"holds one request of {asked:,} tokens: {util} + {need - avail:.2f}/{total:.2f}"})
    return out


def _free_memory(f: LogFacts, text: str) -> list[FixJson]:
    m = _FREE.search(text)
    if not m:
        return []
    free, total, util = float(m.group(1)), float(m.group(2)), float(m.group(3))
    held = total - free
    out: list[FixJson] = []
    if held > OTHER_PROCESS_SHARE * total:
        out.append({"kind": "free_gpu", "change": {}, "source": "log", "result": _result(),
                    "why": f"other processes hold {held:.2f} of the {total:.2f} GiB before vLLM starts (a server "
                           "still running or not yet gone): stop them (nvidia-smi / rocm-smi / xpu-smi lists them) "
                           f"and --gpu-memory-utilization {util} fits again"})
    fit = _down(free / total)
    if fit >= 0.05 and fit < util:
        out.append({"change": {"--gpu-memory-utilization": fit}, "source": "log", "result": _result(),
                    "why": f"{fit} x {total:.2f} = {fit * total:.2f} GiB is under the {free:.2f} GiB free at start"})
    return out


def _no_kv_memory(f: LogFacts) -> list[FixJson]:
    total, util, kv = f.total_gpu_memory_gib, f.gpu_memory_utilization, f.available_kv_gib
    if kv is not None and (total is None or util is None):
        return [{"change": {"--gpu-memory-utilization": None}, "source": "log", "result": _result(),
                 "why": f"the profile left {kv:.2f} GiB for the KV cache: raise it by at least "
                        f"{1.0 - kv:.2f} GiB / the GPU's total (the log does not print the total)"}]
    if total is None or util is None or kv is None:
        return []
    want = _up(util + (1.0 - kv) / total)
    if want > MAX_UTILIZATION:
        return [{"change": {"--enforce-eager": None}, "source": "log", "result": _result(),
                 "why": f"even --gpu-memory-utilization {MAX_UTILIZATION} leaves no KV cache ({kv:.2f} GiB at "
                        f"{util}): capture no CUDA graphs, lower --max-model-len / --max-num-seqs (a smaller profile "
                        "peak), or shard wider (--tensor-parallel-size)"}]
    return [{"change": {"--gpu-memory-utilization": want}, "source": "log", "result": _result(),
             "why": f"the profile left {kv:.2f} GiB for the KV cache at {util}; {want} gives it {1.0:.2f} GiB: "
                    f"{util} + ({1.0:.2f} - ({kv:.2f}))/{total:.2f}"}]


def failure_fixes(f: LogFacts, fail: Failure) -> list[FixJson]:
    """The fixes the failure's own numbers give (nearest first); [] for a kind without numbers to compute from."""
    text = fail.context or fail.message
    if fail.kind == "vllm_max_model_len":
        return _max_model_len(f, text)
    if fail.kind == "vllm_free_memory_below_utilization":
        return _free_memory(f, text)
    if fail.kind == "vllm_no_kv_memory":
        return _no_kv_memory(f)
    if fail.kind == "vllm_mamba_blocks":
        m = _MAMBA_BLOCKS.search(text)
        if m:
            return [{"change": {"--max-num-seqs": int(m.group(2))}, "source": "engine", "result": _result(),
                     "why": f"one Mamba cache block per decode sequence: {m.group(2)} blocks"}]
    return []
