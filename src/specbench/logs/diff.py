"""Two boots side by side: budgets, server-argument changes, and which change explains the difference.

Not pure: it reads files through `engines/sglang/logrules.py::slot_size`, which loads the model's config.json (when one
resolves) for the per-slot Mamba state size p.

"Explains" is checked with numbers, not guessed: each changed argument that moves memory gets a predicted change of
the pool budget (GiB), and the candidate whose prediction matches the observed change of the pools best is named.
Observed pool budget = Mamba main state (K+1 slots × p) + KV tokens × bytes per token (target + draft); this is the
part of the budget that SGLang splits after the speculative scratch is taken (`KVCacheConfigurator._handle_max_mamba_cache`
in mem_cache/kv_cache_configurator.py@0.5.23; `handle_max_mamba_cache` in model_runner_kv_cache_mixin.py@0.5.12.post1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from specbench.engines.sglang import logrules as er
from specbench.logs.doctor import Diagnosis
from specbench.logs.facts import LogFacts
from specbench.logs.serverargs import to_flag

# Arguments that differ between any two launches and never move memory.
NOISE = frozenset({
    "random_seed", "port", "host", "nccl_port", "dist_init_addr", "log_level", "log_level_http", "log_requests",
    "enable_metrics", "api_key", "file_storage_path", "download_dir", "watchdog_timeout", "served_model_name",
    "tokenizer_path", "base_gpu_id", "show_time_cost", "decode_log_interval", "crash_dump_folder",
})


@dataclass(frozen=True, slots=True)
class Candidate:
    arg: str
    predicted_gib: float | None  # predicted change of the pool budget (right − left), None when not modelled
    sentence: str


@dataclass(frozen=True)
class LogDiff:
    left: Diagnosis
    right: Diagnosis
    arg_changes: dict[str, list[Any]]
    noise_changes: tuple[str, ...]
    observed_pool_change_gib: float | None
    explaining: Candidate | None
    candidates: tuple[Candidate, ...]
    explanation: str

    def to_json(self) -> dict[str, Any]:
        """The contract: `arg_changes` is `{flag: [left, right]}` with the launch-flag spelling the planner's `fixes`
        use (`--max-running-requests`); the dumps' field names stay in the sentences, as the engines print them."""
        return {
            "left": self.left.to_json(),
            "right": self.right.to_json(),
            "arg_changes": {to_flag(k): v for k, v in self.arg_changes.items()},
            "explanation": self.explanation,
            "ignored_arg_changes": [to_flag(k) for k in self.noise_changes],
            "observed_pool_change_gib": self.observed_pool_change_gib,
            "explained_by": _flag(self.explaining.arg) if self.explaining else None,
            "candidates": [{"arg": _flag(c.arg), "sentence": c.sentence,
                            "predicted_pool_change_gib": None if c.predicted_gib is None else round(c.predicted_gib, 3)}
                           for c in self.candidates],
        }


def _flag(arg: str) -> str:
    """Server-argument field -> launch flag; the pseudo-arguments in parentheses stay as they are."""
    return arg if arg.startswith("(") else to_flag(arg)


def arg_changes(a: dict[str, Any], b: dict[str, Any]) -> tuple[dict[str, list[Any]], tuple[str, ...]]:
    changes: dict[str, list[Any]] = {}
    noise: list[str] = []
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key), b.get(key)
        if va == vb:
            continue
        if key in NOISE:
            noise.append(key)
        else:
            changes[key] = [va, vb]
    return changes, tuple(noise)


def _kv_bytes_per_token(*facts: LogFacts) -> tuple[float | None, str]:
    """Bytes per KV token slot (all K/V tensors of target and draft) from the log with the most KV lines."""
    best: tuple[float, str] | None = None
    for f in facts:
        total = f.kv_total_gib()
        if total is None or not f.kv_tokens:
            continue
        has_draft = f.draft_k_size_gib is not None
        per = total * er.GIB / (f.kv_tokens + 1)  # K/V buffers have N + page_size rows (MHATokenToKVPool._create_buffers_normal@0.5.23)
        label = "target + draft" if has_draft else "target only"
        if best is None or has_draft:
            best = (per, label)
    return (best[0], best[1]) if best else (None, "")


def pool_budget_gib(f: LogFacts, p_bytes: float | None, kv_per_token: float | None) -> float | None:
    if f.max_mamba_cache_size is None or p_bytes is None or f.kv_tokens is None or kv_per_token is None:
        return None
    return ((f.max_mamba_cache_size + 1) * p_bytes + f.kv_tokens * kv_per_token) / er.GIB


def _candidates(lf: LogFacts, rf: LogFacts, changes: dict[str, list[Any]]) -> list[Candidate]:
    out: list[Candidate] = []
    args = lf.server_args
    p = er.slot_size(lf) or er.slot_size(rf)
    d = er.draft_tokens(args)
    for key, (va, vb) in changes.items():
        if key == "max_running_requests" and isinstance(va, int) and isinstance(vb, int):
            if d is not None and p is not None and lf.max_mamba_cache_size is not None and er.scratch_before_split(lf):
                delta = (vb - va) * d * p.bytes / er.GIB
                grew = "grew" if vb > va else "shrank"
                out.append(Candidate(key, -delta, (
                    f"max_running_requests {va} -> {vb} {grew} the speculative intermediate state reservation by "
                    f"{abs(vb - va)} x {d} draft tokens x {p.mib:.1f} MiB = {abs(delta):.2f} GiB "
                    f"(SGLang <=0.5.12 reserves p·D per requested request before the Mamba/KV split)")))
            else:
                out.append(Candidate(key, None, f"max_running_requests {va} -> {vb}"))
        elif key == "gpu_memory_utilization" and isinstance(va, (int, float)) and isinstance(vb, (int, float)):
            total = lf.total_gpu_memory_gib
            delta = (vb - va) * total if total is not None else None
            out.append(Candidate(key, delta, f"gpu_memory_utilization {va} -> {vb} moves vLLM's budget by "
                                             + (f"{abs(delta):.2f} GiB" if delta is not None else "Δu x total")))
        elif key == "mem_fraction_static" and isinstance(va, (int, float)) and isinstance(vb, (int, float)):
            b = lf.avail_before_load_gib
            delta = (vb - va) * b if b is not None else None
            out.append(Candidate(key, delta, f"mem_fraction_static {va} -> {vb} moves the slack B·(1−f) by "
                                             + (f"{abs(delta):.2f} GiB" if delta is not None else "B·Δf")))
        elif key == "speculative_num_draft_tokens" and isinstance(va, int) and isinstance(vb, int) and p is not None:
            mrr = args.get("max_running_requests")
            if isinstance(mrr, int) and er.scratch_before_split(lf):
                delta = -mrr * (vb - va) * p.bytes / er.GIB
                out.append(Candidate(key, delta, f"speculative_num_draft_tokens {va} -> {vb} changes the intermediate "
                                                 f"state reservation by {mrr} x {vb - va} x {p.mib:.1f} MiB"))
            else:
                out.append(Candidate(key, None, f"speculative_num_draft_tokens {va} -> {vb}"))
        elif key in ("model_path", "quantization", "tp_size", "tensor_parallel_size", "speculative_draft_model_path"):
            out.append(Candidate(key, None, f"{key} {va} -> {vb} changes the weights and every per-GPU size"))
        elif key in ("mamba_full_memory_ratio", "max_mamba_cache_size", "mamba_ssm_dtype", "kv_cache_dtype",
                     "context_length", "max_total_tokens", "page_size", "disable_radix_cache",
                     "mamba_scheduler_strategy", "mamba_radix_cache_strategy", "speculative_algorithm",
                     "gpu_memory_utilization", "max_model_len", "max_num_seqs"):
            out.append(Candidate(key, None, f"{key} {va} -> {vb}"))
    # not an argument: the GPU had less free memory before load, or the weights differ
    if lf.avail_before_load_gib is not None and rf.avail_before_load_gib is not None \
            and abs(rf.avail_before_load_gib - lf.avail_before_load_gib) > 0.1:
        frac = args.get("mem_fraction_static")
        f = frac if isinstance(frac, (int, float)) else 1.0
        delta = (rf.avail_before_load_gib - lf.avail_before_load_gib) * f
        out.append(Candidate("(free GPU memory before load)", delta,
                             f"free memory before load {lf.avail_before_load_gib:.2f} -> {rf.avail_before_load_gib:.2f}"
                             " GiB (another process on the GPU, or leftovers of a previous run)"))
    if lf.weights_gib is not None and rf.weights_gib is not None and abs(rf.weights_gib - lf.weights_gib) > 0.1:
        out.append(Candidate("(weights)", -(rf.weights_gib - lf.weights_gib),
                             f"target weights {lf.weights_gib:.2f} -> {rf.weights_gib:.2f} GiB"))
    return out


def _pick(cands: list[Candidate], observed: float | None) -> Candidate | None:
    """The candidate whose prediction matches the observed change within 15 % (or 0.5 GiB); with no observed number
    or no prediction, the only memory-relevant candidate if there is exactly one."""
    scored = [c for c in cands if c.predicted_gib is not None]
    if observed is not None and scored:
        best = min(scored, key=lambda c: abs((c.predicted_gib or 0.0) - observed))
        tol = max(0.5, 0.15 * abs(observed))
        if abs((best.predicted_gib or 0.0) - observed) <= tol:
            return best
    if len(cands) == 1:
        return cands[0]
    return None


def _n(x: int | None) -> str:
    return "?" if x is None else f"{x:,}"


def diff(left: Diagnosis, right: Diagnosis) -> LogDiff:
    lf, rf = left.facts, right.facts
    changes, noise = arg_changes(lf.server_args, rf.server_args)
    p = er.slot_size(lf) or er.slot_size(rf)
    per_tok, per_tok_src = _kv_bytes_per_token(lf, rf)
    lb = pool_budget_gib(lf, p.bytes if p else None, per_tok)
    rb = pool_budget_gib(rf, p.bytes if p else None, per_tok)
    observed = round(rb - lb, 2) if lb is not None and rb is not None else None
    if observed is None and lf.available_kv_gib is not None and rf.available_kv_gib is not None:
        observed = round(rf.available_kv_gib - lf.available_kv_gib, 2)  # vLLM: the KV budget it reported
    cands = _candidates(lf, rf, changes)
    pick = _pick(cands, observed)

    def said(side: str, d: Any) -> str:
        # a side is called failed only when its boot failed; a run-time error of a started server is said as such
        if d.status == "failed" and d.failure:
            return f"{side} failed ({d.failure.message})"
        if d.failure:
            return f"{side} started (then at run time: {d.failure.message})"
        return f"{side} {'started, but capped' if getattr(d, 'capped', False) else d.status}"

    s: list[str] = [said("Left", left) + ", " + said("right", right) + "."]
    missing = [side for side, d in (("left", left), ("right", right)) if not d.facts.server_args]
    if missing:
        s.append("The server arguments cannot be compared: the " + " and the ".join(missing)
                 + (" log has" if len(missing) == 1 else " logs have") + " no argument dump (server_args=ServerArgs(...)"
                 " / non-default args).")
    elif not changes:
        s.append("The server arguments are the same" + (f" (ignoring {', '.join(noise)})" if noise else "") + ".")
    else:
        s.append("Server arguments that differ: " + ", ".join(f"{k} {v[0]} -> {v[1]}" for k, v in changes.items())
                 + (f" (ignoring {', '.join(noise)})" if noise else "") + ".")
    if pick is not None:
        effect = []
        if lf.max_mamba_cache_size is not None or rf.max_mamba_cache_size is not None:
            effect.append(f"max_mamba_cache_size {_n(lf.max_mamba_cache_size)} -> {_n(rf.max_mamba_cache_size)}")
        effect.append(f"KV tokens {_n(lf.kv_tokens)} -> {_n(rf.kv_tokens)}")
        starved = pick.predicted_gib is not None and pick.predicted_gib < 0
        hybrid = lf.max_mamba_cache_size is not None
        if starved:
            verb = "and starved the Mamba and KV pools" if hybrid else "and shrank the KV pool"
        else:
            verb = "and gave the room back to the Mamba and KV pools" if hybrid else "and changed the KV pool"
        s.append(f"{pick.sentence} {verb}: {', '.join(effect)}.")
        if observed is not None and pick.predicted_gib is not None:
            how = (f"Mamba slots x {p.mib:.1f} MiB + KV tokens x {per_tok:,.0f} B, {per_tok_src}"
                   if lb is not None and p is not None and per_tok is not None else "the KV memory each log reports")
            s.append(f"Check: predicted pool change {pick.predicted_gib:+.2f} GiB, observed {observed:+.2f} GiB "
                     f"({how}).")
    elif cands:
        s.append("Differences that move memory: " + "; ".join(c.sentence for c in cands) + ".")
        if observed is not None:
            s.append(f"The pools changed by {observed:+.2f} GiB; no single difference above accounts for it.")
    for side, d in (("right", right), ("left", left)):
        df = d.facts
        if d.failure and d.failure.kind == "max_running_requests_zero" and df.max_mamba_cache_size is not None:
            rho, _ = er.slots_per_request(df)
            if rho:
                s.append(f"On the {side}, {df.max_mamba_cache_size} Mamba slots with {rho} slots per request give "
                         f"max_running_requests = {df.max_mamba_cache_size} // {rho} = 0, hence the assertion.")
    lm, rm = lf.mamba_total_gib(), rf.mamba_total_gib()
    if lm is not None and rm is not None and lm != rm:
        s.append(f"The Mamba pool allocations differ too ({lm:.2f} vs {rm:.2f} GiB): read each log's own line, "
                 "they are not the same numbers.")
    return LogDiff(left, right, changes, noise, observed, pick, tuple(cands), " ".join(s))
