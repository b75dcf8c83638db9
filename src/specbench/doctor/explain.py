"""Plain-words explanation of one boot: what happened and why, with the log's own numbers.

Engine-neutral: the failures no engine owns (the device allocator, a crashed process, a refused request) are said
here; each engine says its own (`Engine.failure_sentences`, `Engine.started_notes`: engines/<engine>/explain.py),
with the engine's formulas named where used. Each sentence cites the numbers it uses.
"""

from __future__ import annotations

import re

from specbench.doctor.reading import log_reader
from specbench.engines.base import engine, engines
from specbench.logs.facts import LogFacts
from specbench.logs.failures import Failure


def _g(x: float | None) -> str:
    return "?" if x is None else f"{x:.2f} GiB"


_REQ_TOTAL = re.compile(r"You requested a total of (\d+) tokens: (\d+) tokens from the input messages and (\d+) tokens "
                        r"for the completion")
_INPUT_LONG = re.compile(r"The input \((\d+) tokens\) is longer than the model's context length \((\d+) tokens\)")
_MAX_CTX = re.compile(r"maximum context length (?:of |is )?(\d+)")
# vLLM serving_engine: "However, you requested 5000 tokens (4000 in the messages, 1000 in the completion)"
_VLLM_REQ = re.compile(r"you requested (\d+) tokens \((\d+) in the messages, (\d+) in the completion\)")
# vLLM >= 0.10: "... your request has 3500 input tokens (1000 > 4096 - 3500)"
_VLLM_REQ2 = re.compile(r"your request has (\d+) input tokens \((\d+) > (\d+) - \d+\)")


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
    """The engine's own sentences for its failure (the log's engine first, then the others: a kind is named by the
    engine that prints it), else the engine-neutral ones."""
    first = [engine(f.engine)] if f.engine is not None else []
    for eng in first + [e for e in engines().values() if e not in first]:
        own = eng.failure_sentences(f, fail)
        if own:
            return own
    k = fail.kind
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
    if k == "context_too_long":
        return _context_sentences(f, fail.message)
    if k == "process_crashed":
        return ["An engine process died without a Python error in this log (a crash such as a segfault, the OOM "
                "killer, or an error printed by another rank): look at the lines just before it and at dmesg."]
    return [f"The engine raised an exception during start-up ({log_reader().failure_where(k) or 'see the traceback'})."]


def started_sentences(f: LogFacts) -> list[str]:
    eng = engine(f.engine)
    out: list[str] = [eng.started_headline(f)]
    out += eng.started_caps(f)
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
