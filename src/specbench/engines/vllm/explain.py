"""vLLM's words for a boot: the headline of one that started, and its own failure kinds with the log's numbers."""

from __future__ import annotations

import re

from specbench.logs.facts import LogFacts
from specbench.logs.failures import Failure


def started_headline(f: LogFacts) -> str:
    if f.kv_tokens is None:
        return "vLLM started."
    conc = f" (max concurrency {f.max_concurrency}x at {f.max_concurrency_tokens:,} tokens)" \
        if f.max_concurrency is not None and f.max_concurrency_tokens else ""
    return f"vLLM started: KV cache of {f.kv_tokens:,} tokens{conc}."


# vllm v1/core/kv_cache_utils.py::check_enough_kv_cache_memory
_VLLM_LEN = re.compile(r"max seq len \((\d+)\), \((\d+(?:\.\d+)?) GiB KV cache is needed, which is larger than "
                       r"the available KV cache memory \((\d+(?:\.\d+)?) GiB\)")
_VLLM_EST = re.compile(r"estimated maximum model length is (\d+)")


def failure_sentences(f: LogFacts, fail: Failure) -> list[str]:
    """vLLM's words for its own failure kinds (engines/vllm/failures.py); [] for a kind it does not print."""
    k = fail.kind
    if k == "vllm_mamba_blocks":
        return [f"vLLM needs one Mamba cache block per decode sequence for full CUDA graphs: max_num_seqs "
                f"{f.max_num_seqs} > {f.mamba_cache_blocks} blocks. Lower --max-num-seqs to at most "
                f"{f.mamba_cache_blocks}, raise --gpu-memory-utilization, or shorten --max-model-len."]
    if k == "vllm_no_kv_memory":
        return ["vLLM found no memory for KV blocks after weights, activation peak and CUDA-graph estimate: raise "
                "--gpu-memory-utilization or shrink the model / max_num_batched_tokens."]
    if k == "vllm_max_model_len":
        m = _VLLM_LEN.search(fail.message)
        est = _VLLM_EST.search(fail.message)
        if m:
            s = [f"One request of max_model_len {int(m.group(1)):,} tokens needs {m.group(2)} GiB of KV cache; the "
                 f"engine has {m.group(3)} GiB."]
            if est:
                s.append(f"By the engine's own estimate --max-model-len {int(est.group(1)):,} fits; or raise "
                         "--gpu-memory-utilization (on the CPU backend: VLLM_CPU_KVCACHE_SPACE).")
            return s
        return ["The KV memory cannot hold one request of max_model_len tokens: lower --max-model-len or raise "
                "--gpu-memory-utilization."]
    return []
