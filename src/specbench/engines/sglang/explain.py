"""SGLang's words for a boot: the headline of one that started, what it capped, the speculative-scratch price, the
headroom left; and its own failure kinds explained with the log's numbers (SGLang mem_cache/kv_cache_configurator.py
@0.5.23 `KVCacheConfigurator._handle_max_mamba_cache` / `resolve_max_num_reqs`, model_runner_kv_cache_mixin.py
@0.5.12.post1 `handle_max_mamba_cache`, each named where used).

Not pure: `logrules.slot_size` loads the model's config.json (when one resolves) for the per-slot Mamba state size."""

from __future__ import annotations

from specbench.contracts import GIB
from specbench.engines.sglang.logrules import (
    draft_tokens,
    scratch_before_split,
    slot_size,
    slots_per_request,
    spec_algorithm,
)
from specbench.logs.facts import LogFacts
from specbench.logs.failures import Failure


def started_headline(f: LogFacts) -> str:
    said = ((f.kv_tokens, "{:,} KV tokens"), (f.max_mamba_cache_size, "{} Mamba slots"),
            (f.max_running_requests, "up to {} running requests"), (f.context_len, "context {:,}"))
    parts = [text.format(value) for value, text in said if value is not None]
    if not (f.ready or f.accept_lengths or f.gen_throughputs or f.running_requests):
        # got past the pools (graph capture, the tree cache) but never said it serves: a log cut at the end of start-up
        return ("Got past the memory pools" + (" (" + ", ".join(parts) + ")" if parts else "")
                + "; the log ends before the server said it is ready.")
    return "Started fine" + (": " + ", ".join(parts) if parts else "") + "."


def started_notes(f: LogFacts) -> list[str]:
    """What this build costs per request and what it left unused."""
    return [s for s in (spec_scratch_sentence(f), serving_headroom(f)) if s]


# Prefill activations: about 1.5 MB per chunked-prefill token, the constant SGLang's default mem_fraction_static
# reserves (sglang/srt/server_args.py::ServerArgs._handle_gpu_memory_settings@0.5.15.post1:
# `reserved_mem += max(self.chunked_prefill_size, 2048) * 1.5` MB).
ACTIVATION_MB_PER_PREFILL_TOKEN = 1.5


def serving_headroom(f: LogFacts) -> str | None:
    """How much of what stayed free after start-up prefill activations will not need (SGLang)."""
    free = f.available_gpu_mem_gib
    cps = f.chunked_prefill_size or f.server_args.get("chunked_prefill_size")
    if free is None or not isinstance(cps, int) or cps <= 0:
        return None
    act = ACTIVATION_MB_PER_PREFILL_TOKEN * max(cps, 2048) / 1024
    spare = free - act
    if spare < 1.0:
        return None
    return (f"{free:.2f} GiB stayed free after start-up; prefill activations need roughly {act:.1f} GiB "
            f"(1.5 MB x chunked_prefill_size {cps}), so about {spare:.1f} GiB more could go to the Mamba/KV pools "
            "(raise mem_fraction_static).")


def spec_scratch_sentence(f: LogFacts) -> str | None:
    """SGLang <= 0.5.12 with a hybrid model and speculative decoding: the per-request price of max_running_requests
    (R' = R - p·mrr·D before the Mamba/KV split, mrr as requested:
    sglang/srt/model_executor/model_runner_kv_cache_mixin.py::ModelRunnerKVCacheMixin.handle_max_mamba_cache
    @0.5.12.post1)."""
    req = f.server_args.get("max_running_requests")
    d, p = draft_tokens(f), slot_size(f)
    if f.max_mamba_cache_size is None or not scratch_before_split(f) or not isinstance(req, int) \
            or d is None or p is None:
        return None
    each = d * p.bytes / GIB
    return (f"This build reserves intermediate Mamba state for every requested running request before splitting "
            f"the rest between Mamba slots and KV: {req} × {d} draft tokens × {p.mib:.1f} MiB = {req * each:.2f} GiB "
            f"now; each request more costs {each:.2f} GiB, taken from the Mamba slots and KV tokens.")


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
    d = draft_tokens(f)
    p = slot_size(f)
    if d is None or p is None:
        return None
    total = requests * d * p.bytes / GIB
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
    rho, rho_src = slots_per_request(f)
    rest, slack = _pool_budget(f)
    if rest is not None and slack is not None:
        out.append(f"After the weights {_g(rest)} were free; mem_fraction_static="
                   f"{args.get('mem_fraction_static')} keeps {_g(slack)} of the {_g(f.avail_before_load_gib)} "
                   f"free for activations and graphs, so the pools got about {_g(rest - slack)}.")
    algo = spec_algorithm(args)
    if algo and isinstance(mrr, int):
        res = spec_reservation_sentence(f, mrr)
        if res and scratch_before_split(f):
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
    d = draft_tokens(f)
    p = slot_size(f)
    if d is None or p is None:
        return "D draft tokens × p"
    return f"{d} × {p.mib:.1f} MiB"


def failure_sentences(f: LogFacts, fail: Failure) -> list[str]:
    """SGLang's words for its own failure kinds (engines/sglang/failures.py); [] for a kind it does not print."""
    k = fail.kind
    args = f.server_args
    frac = args.get("mem_fraction_static")
    if k == "max_running_requests_zero":
        return _mrr_zero(f)
    if k == "mamba_state_cache_too_small":
        rho, _ = slots_per_request(f)
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
    if k == "context_length_exceeds_model":
        return ["--context-length is above what the model config allows (max_position_embeddings)."]
    if k == "empty_capture_bs":
        return ["No CUDA-graph batch size survived the filters (e.g. bs × draft tokens must divide by the "
                "attention TP size under EP): set --cuda-graph-bs explicitly or --disable-cuda-graph."]
    return []


def started_caps(f: LogFacts) -> list[str]:
    """What SGLang lowered below what was asked, with the numbers it printed."""
    out: list[str] = []
    if f.mamba_cap_requests:
        req = f.server_args.get("max_running_requests")
        rho, _ = slots_per_request(f)
        per = (f"{f.max_mamba_cache_size} slots / {rho} per request" if f.max_mamba_cache_size is not None and rho
               else "its slots per request")
        out.append(f"max_running_requests was capped to {f.mamba_cap_requests} by the Mamba state cache ({per})"
                   + (f", not the requested {req}" if isinstance(req, int) else "") + ".")
    if f.mrr_reduced_from is not None:
        out.append(_reduced_sentence(f))
    return out


def _reduced_sentence(f: LogFacts) -> str:
    """`max_running_requests was reduced from the requested A to B ... due to the available KV cache capacity`:
    SGLang 0.5.13+ prints this text also when the Mamba cap min(mrr, K // ρ) is what bit
    (`KVCacheConfigurator.resolve_max_num_reqs`@0.5.23); say which."""
    final, k = f.max_running_requests, f.max_mamba_cache_size
    rho, src = slots_per_request(f)
    kv_cap = f.kv_tokens // 2 if f.kv_tokens is not None else None  # resolve_max_num_reqs: min(req, N // 2)
    if final is not None and k is not None and rho and final == k // rho and (kv_cap is None or kv_cap > final):
        return (f"max_running_requests was reduced from the requested {f.mrr_reduced_from} to {final}. The engine "
                "names KV capacity, but "
                + (f"{f.kv_tokens:,} KV tokens allow {kv_cap:,}; " if kv_cap is not None else "")
                + f"the limit is the Mamba state: {k} slots // {rho} per request ({src}) = {final}. More slots need "
                "a larger --mamba-full-memory-ratio or mem_fraction_static, --mamba-ssm-dtype bfloat16, or fewer "
                "draft tokens.")
    return f"max_running_requests was reduced from the requested {f.mrr_reduced_from} to {final} by KV capacity."


