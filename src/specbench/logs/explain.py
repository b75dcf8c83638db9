"""Plain-words explanation of one boot: what happened and why, with the log's own numbers.

Not pure: it reads files through `engines/sglang/logrules.py::slot_size`, which loads the model's config.json (when one
resolves, via `specs.resolve.load_model_spec`) for the per-slot Mamba state size.

Each sentence cites the numbers it uses; formulas are the engine's (SGLang mem_cache/kv_cache_configurator.py@0.5.23
`KVCacheConfigurator._handle_max_mamba_cache` / `resolve_max_num_reqs`, model_runner_kv_cache_mixin.py@0.5.12.post1
`handle_max_mamba_cache`; vLLM config/compilation.py::CompilationConfig.resolve_cudagraph_mode_and_sizes and
v1/core/kv_cache_utils.py::check_enough_kv_cache_memory, each named where used).
"""

from __future__ import annotations

import re

from specbench.engines.base import engine
from specbench.engines.sglang import logrules as er
from specbench.logs.facts import LogFacts
from specbench.logs.failures import Failure, where


def _g(x: float | None) -> str:
    return "?" if x is None else f"{x:.2f} GiB"


def _pool_budget(f: LogFacts) -> tuple[float | None, float | None]:
    """(free after the weights that preceded the pools, slack B·(1-f)) from the log and the dumped fraction."""
    rest = f.draft_avail_after_load_gib if f.draft_loaded_before_pools else f.avail_after_load_gib
    frac = f.server_args.get("mem_fraction_static")
    b = f.avail_before_load_gib
    slack = b * (1 - frac) if isinstance(frac, (int, float)) and b is not None else None
    return rest, slack


def spec_reservation_sentence(f: LogFacts, requests: int) -> str | None:
    """`requests × D × p = X GiB` for the <=0.5.12 intermediate-state reservation, or None without the inputs."""
    d = er.draft_tokens(f.server_args)
    p = er.slot_size(f)
    if d is None or p is None:
        return None
    total = requests * d * p.bytes / er.GIB
    return f"{requests} × {d} draft tokens × {p.mib:.1f} MiB = {total:.2f} GiB"


def _mrr_zero(f: LogFacts) -> list[str]:
    args = f.server_args
    out: list[str] = []
    mrr = args.get("max_running_requests")
    dp = args.get("dp_size") or 1
    if args.get("enable_dp_attention") and isinstance(mrr, int) and isinstance(dp, int) and mrr < dp:
        return [f"With DP attention each of the {dp} attention ranks gets max_running_requests // dp_size = "
                f"{mrr} // {dp} = 0 requests. Set --max-running-requests to at least {dp}."]
    if f.max_mamba_cache_size is None:
        return ["The KV pool is too small to hold even one request (max_running_requests ends at 0): "
                f"{f.kv_tokens if f.kv_tokens is not None else '?'} KV tokens."]
    rho, rho_src = er.slots_per_request(f)
    rest, slack = _pool_budget(f)
    if rest is not None and slack is not None:
        out.append(f"After the weights {_g(rest)} were free; mem_fraction_static="
                   f"{args.get('mem_fraction_static')} keeps {_g(slack)} of the {_g(f.avail_before_load_gib)} "
                   f"free for activations and graphs, so the pools got about {_g(rest - slack)}.")
    algo = er.spec_algorithm(args)
    if algo and isinstance(mrr, int):
        res = spec_reservation_sentence(f, mrr)
        if res and er.scratch_before_split(f):
            why = (f"version {f.engine_version}" if f.engine_version
                   else "its argument dump still has mamba_scheduler_strategy")
            out.append(f"With {algo} speculative decoding this SGLang build (≤0.5.12 rules; {why}) "
                       f"first reserves intermediate Mamba state for every "
                       f"requested running request: {res}, taken off the top before the rest is split between "
                       f"Mamba slots and KV.")
        elif res:
            out.append(f"With {algo} speculative decoding the Mamba pool also holds intermediate state "
                       f"({d_note(f)} per running request).")
    out.append(f"What was left held only {f.max_mamba_cache_size} Mamba slots and "
               f"{f.kv_tokens:,} KV tokens." if f.kv_tokens is not None else
               f"What was left held only {f.max_mamba_cache_size} Mamba slots.")
    if rho is not None:
        req = mrr if isinstance(mrr, int) else "requested"
        out.append(f"Each running request holds {rho} Mamba slots ({rho_src}), so max_running_requests = "
                   f"min({req}, {f.max_mamba_cache_size} // {rho}) = 0.")
    return out


def d_note(f: LogFacts) -> str:
    d = er.draft_tokens(f.server_args)
    p = er.slot_size(f)
    if d is None or p is None:
        return "D draft tokens × p"
    return f"{d} × {p.mib:.1f} MiB"


_REQ_TOTAL = re.compile(r"You requested a total of (\d+) tokens: (\d+) tokens from the input messages and (\d+) tokens "
                        r"for the completion")
_INPUT_LONG = re.compile(r"The input \((\d+) tokens\) is longer than the model's context length \((\d+) tokens\)")
_MAX_CTX = re.compile(r"maximum context length (?:of |is )?(\d+)")
# vLLM serving_engine: "However, you requested 5000 tokens (4000 in the messages, 1000 in the completion)"
_VLLM_REQ = re.compile(r"you requested (\d+) tokens \((\d+) in the messages, (\d+) in the completion\)")
# vLLM >= 0.10: "... your request has 3500 input tokens (1000 > 4096 - 3500)"
_VLLM_REQ2 = re.compile(r"your request has (\d+) input tokens \((\d+) > (\d+) - \d+\)")


# vllm v1/core/kv_cache_utils.py::check_enough_kv_cache_memory
_VLLM_LEN = re.compile(r"max seq len \((\d+)\), \((\d+(?:\.\d+)?) GiB KV cache is needed, which is larger than "
                       r"the available KV cache memory \((\d+(?:\.\d+)?) GiB\)")
_VLLM_EST = re.compile(r"estimated maximum model length is (\d+)")


def _request_tokens(message: str) -> tuple[int, int, int] | None:
    """(total, prompt, output) from the engine's refusal text, when it carries them."""
    m = _REQ_TOTAL.search(message) or _VLLM_REQ.search(message)
    if m:
        total, prompt, out = (int(x) for x in m.groups())
        return total, prompt, out
    m = _VLLM_REQ2.search(message)
    if m:
        prompt, out = int(m.group(1)), int(m.group(2))
        return prompt + out, prompt, out
    return None


def _context_sentences(f: LogFacts, message: str) -> list[str]:
    """SGLang tokenizer_manager / vLLM serving: the request's own numbers when the message carries them."""
    ctx = f.context_len or f.server_args.get("context_length") or f.server_args.get("max_model_len")
    m = _MAX_CTX.search(message)
    if m:
        ctx = int(m.group(1))
    req = _request_tokens(message)
    if req:
        total, prompt, out = req
        return [f"A request was refused: {prompt:,} prompt tokens + {out:,} output tokens = {total:,} > context "
                f"{ctx:,}." if isinstance(ctx, int) else f"A request was refused: {prompt:,} + {out:,} = {total:,} "
                "tokens is above the context length.",
                "If the prompt was built for fewer tokens, it held more than its target: count prompt tokens with "
                "the model's own tokenizer and chat template, and keep prompt + output below the context length."]
    m = _INPUT_LONG.search(message)
    if m:
        return [f"A request was refused: its prompt alone is {int(m.group(1)):,} tokens, above the context length "
                f"{int(m.group(2)):,}. Count prompt tokens with the model's tokenizer and chat template."]
    return [f"A request was refused: its prompt plus max_new_tokens exceeded context_len {ctx}. Count prompt "
            "tokens with the model's own tokenizer and chat template, and keep prompt + output below it."]


def failure_sentences(f: LogFacts, fail: Failure) -> list[str]:
    k = fail.kind
    args = f.server_args
    frac = args.get("mem_fraction_static")
    if k == "max_running_requests_zero":
        return _mrr_zero(f)
    if k == "mamba_state_cache_too_small":
        rho, _ = er.slots_per_request(f)
        return [f"The hybrid state pool has {f.max_mamba_cache_size if f.max_mamba_cache_size is not None else '?'}"
                f" slots but one running request needs {rho or 'ρ'}; since 0.5.13 SGLang refuses to start."]
    if k == "mamba_state_cache_no_memory":
        return ["No room was left for even one Mamba state slot after the slack and the speculative scratch."]
    if k == "weights_leave_no_kv_memory":
        rest, slack = _pool_budget(f)
        s = ["The weights left less free memory than mem_fraction_static must keep free "
             f"(free before load × (1 − {frac if frac is not None else 'f'}))."]
        if rest is not None and slack is not None:
            s.append(f"Free after weights {_g(rest)} < slack {_g(slack)}.")
        if rest is not None and f.avail_before_load_gib:
            need = 1 - rest / f.avail_before_load_gib
            s.append(f"mem_fraction_static must exceed 1 − {rest:.2f}/{f.avail_before_load_gib:.2f} = {need:.3f} "
                     "before anything else (Mamba, KV) fits.")
        return s
    if k == "kv_pool_empty":
        return ["The KV pool came out at zero tokens: after weights, slack and the Mamba state nothing was left."]
    if k == "memory_pool_too_small":
        return ["The KV pool holds fewer tokens than one request needs (max_req_len <= 0)."]
    if k == "mamba_ping_pong":
        return ["At run time the Mamba radix cache (extra_buffer) ran out of ping-pong state slots: more requests "
                "were running than the Mamba pool can track. Lower --max-running-requests or raise "
                "--max-mamba-cache-size / --mamba-full-memory-ratio."]
    if k == "cuda_graph_oom":
        left = f.draft_memory_pool_end_gib or f.memory_pool_end_gib
        return [f"CUDA graph capture ran out of memory: after the pools only {_g(left)} were free for graphs and "
                "activations. Lower --mem-fraction-static (more slack) or --cuda-graph-max-bs."]
    if k == "cuda_oom_load":
        return [f"The GPU ran out of memory while loading weights (free before load {_g(f.avail_before_load_gib)}):"
                " the model does not fit at this TP, or another process holds GPU memory."]
    if k == "cuda_oom":
        return ["The GPU ran out of memory after the pools were sized (activations or a large batch); the slack "
                "kept by mem_fraction_static was too small."]
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
    if k == "context_length_exceeds_model":
        return ["--context-length is above what the model config allows (max_position_embeddings)."]
    if k == "context_too_long":
        return _context_sentences(f, fail.message)
    if k == "empty_capture_bs":
        return ["No CUDA-graph batch size survived the filters (e.g. bs × draft tokens must divide by the "
                "attention TP size under EP): set --cuda-graph-bs explicitly or --disable-cuda-graph."]
    if k == "process_crashed":
        return ["An engine process died without a Python error in this log (a crash such as a segfault, the OOM "
                "killer, or an error printed by another rank): look at the lines just before it and at dmesg."]
    return [f"The engine raised an exception during start-up ({where(k) or 'see the traceback'})."]


def _reduced_sentence(f: LogFacts) -> str:
    """`max_running_requests was reduced from the requested A to B ... due to the available KV cache capacity`:
    SGLang 0.5.13+ prints this text also when the Mamba cap min(mrr, K // ρ) is what bit
    (`KVCacheConfigurator.resolve_max_num_reqs`@0.5.23); say which."""
    final, k = f.max_running_requests, f.max_mamba_cache_size
    rho, src = er.slots_per_request(f)
    kv_cap = f.kv_tokens // 2 if f.kv_tokens is not None else None  # resolve_max_num_reqs: min(req, N // 2)
    if final is not None and k is not None and rho and final == k // rho and (kv_cap is None or kv_cap > final):
        return (f"max_running_requests was reduced from the requested {f.mrr_reduced_from} to {final}. The engine "
                "names KV capacity, but "
                + (f"{f.kv_tokens:,} KV tokens allow {kv_cap:,}; " if kv_cap is not None else "")
                + f"the limit is the Mamba state: {k} slots // {rho} per request ({src}) = {final}. More slots need "
                "a larger --mamba-full-memory-ratio or mem_fraction_static, --mamba-ssm-dtype bfloat16, or fewer "
                "draft tokens.")
    return f"max_running_requests was reduced from the requested {f.mrr_reduced_from} to {final} by KV capacity."


def started_sentences(f: LogFacts) -> list[str]:
    eng = engine(f.engine)
    out: list[str] = [eng.started_headline(f)]
    if f.mamba_cap_requests is not None:
        req = f.server_args.get("max_running_requests")
        out.append(f"max_running_requests was capped to {f.mamba_cap_requests} by the Mamba state cache "
                   f"({f.max_mamba_cache_size} slots / {f.state_slots_per_request} per request)"
                   + (f", not the requested {req}" if isinstance(req, int) else "") + ".")
    if f.mrr_reduced_from is not None:
        out.append(_reduced_sentence(f))
    if f.kv_pool_fewer_than_context is not None:
        out.append(f"The KV pool ({f.kv_pool_fewer_than_context:,} tokens) is smaller than one full-context request.")
    elif f.kv_tokens is not None and f.context_len is not None and f.kv_tokens < f.context_len:
        out.append(f"The KV pool ({f.kv_tokens:,} tokens) is smaller than one full-context request "
                   f"({f.context_len:,}).")
    out += eng.started_notes(f)
    if f.accept_lengths:
        mean = sum(f.accept_lengths) / len(f.accept_lengths)
        out.append(f"Mean accept length over {len(f.accept_lengths)} logged intervals: {mean:.2f}.")
        if mean <= 1.05:
            out.append("An accept length of 1 means the draft tokens were (almost) never accepted: random or dummy "
                       "weights, a draft trained for another target, or a mismatched tokenizer/chat template. "
                       "Speculative decoding only costs time like this.")
    if f.gen_throughputs:
        out.append(f"Logged generation throughput: {min(f.gen_throughputs):.1f}–{max(f.gen_throughputs):.1f} tok/s.")
    return out
