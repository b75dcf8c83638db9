"""Two boots side by side: budgets, server-argument changes, and which change explains the difference.

"Explains" is checked with numbers, not guessed: each changed argument that moves memory gets a predicted change of
the pool budget (GiB), and the candidate whose prediction matches the observed change of the pools best is named.
The engine that wrote the logs measures its pools and predicts each of its arguments' effect
(`Engine.diff_pool_change`, `Engine.diff_candidate`: engines/<engine>/logdiff.py); the arguments that change the
weights and the free memory before load are said here. Not pure: an engine may read the model's config.json.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from specbench.doctor.doctor import Diagnosis
from specbench.engines.base import Engine, engine
from specbench.logs.candidates import Candidate
from specbench.logs.facts import LogFacts
from specbench.logs.serverargs import to_flag

# Arguments that differ between any two launches and never move memory.
NOISE = frozenset({
    "random_seed", "port", "host", "nccl_port", "dist_init_addr", "log_level", "log_level_http", "log_requests",
    "enable_metrics", "api_key", "file_storage_path", "download_dir", "watchdog_timeout", "served_model_name",
    "tokenizer_path", "base_gpu_id", "show_time_cost", "decode_log_interval", "crash_dump_folder",
})


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


def _candidates(eng: Engine, lf: LogFacts, rf: LogFacts, changes: dict[str, list[Any]]) -> list[Candidate]:
    out: list[Candidate] = []
    for key, (va, vb) in changes.items():
        own = eng.diff_candidate(lf, rf, key, va, vb)
        if own is not None:
            out.append(own)
        elif key in ("model_path", "model", "quantization", "tp_size", "tensor_parallel_size",
                     "speculative_draft_model_path"):
            out.append(Candidate(key, None, f"{key} {va} -> {vb} changes the weights and every per-GPU size"))
    # not an argument: the GPU had less free memory before load, or the weights differ
    if lf.avail_before_load_gib is not None and rf.avail_before_load_gib is not None \
            and abs(rf.avail_before_load_gib - lf.avail_before_load_gib) > 0.1:
        frac = lf.server_args.get("mem_fraction_static")
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
    eng = engine(lf.engine or rf.engine)
    pools = eng.diff_pool_change(lf, rf)
    observed = pools.observed_gib
    cands = _candidates(eng, lf, rf, changes)
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
            s.append(f"Check: predicted pool change {pick.predicted_gib:+.2f} GiB, observed {observed:+.2f} GiB "
                     f"({pools.how}).")
    elif cands:
        s.append("Differences that move memory: " + "; ".join(c.sentence for c in cands) + ".")
        if observed is not None:
            s.append(f"The pools changed by {observed:+.2f} GiB; no single difference above accounts for it.")
    for side, d in (("right", right), ("left", left)):
        said_why = eng.diff_failure_sentence(side, d.facts, d.failure.kind if d.failure else None)
        if said_why:
            s.append(said_why)
    lm, rm = lf.mamba_total_gib(), rf.mamba_total_gib()
    if lm is not None and rm is not None and lm != rm:
        s.append(f"The Mamba pool allocations differ too ({lm:.2f} vs {rm:.2f} GiB): read each log's own line, "
                 "they are not the same numbers.")
    return LogDiff(left, right, changes, noise, observed, pick, tuple(cands), " ".join(s))
