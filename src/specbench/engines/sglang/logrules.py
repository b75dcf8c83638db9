"""Small engine rules the doctor needs to read a log: speculative depth D, Mamba slots per request ρ, the era of
an SGLang build, the model behind a launch (for the exact per-slot state size and expected weight bytes).

Everything here reads the engine's own argument dump; the model-dependent parts reuse `specbench.specs` and
`specbench.engines.sglang.formulas` (the planner's formulas) so the doctor and the planner cannot disagree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from specbench.contracts import GIB
from specbench.engines.base import FixJson, FixResultJson
from specbench.engines.sglang.args import SglangArgs
from specbench.engines.sglang.formulas import mamba_ratio, mamba_state, resolve_spec
from specbench.engines.sglang.fromlog import args_from_dump
from specbench.engines.sglang.rules import rules_for_dump
from specbench.engines.versions import parse_release
from specbench.errors import FlagError, UserError
from specbench.logs.facts import LogFacts
from specbench.logs.launch_model import facts_model_source, model_source, model_spec_of
from specbench.specs.resolve import load_model_spec

MIB = 2**20


def spec_algorithm(args: Mapping[str, object]) -> str | None:
    algo = args.get("speculative_algorithm")
    return str(algo).upper() if algo not in (None, "", "None") else None


def draft_tokens(facts: LogFacts) -> int | None:
    """D, the tokens one speculative step verifies, as the planner resolves it (formulas.py::resolve_spec: EAGLE topk 1
    forces D = steps + 1, DFLASH its block size, DDTREE budget + 1; sglang arg_groups/speculative_hook.py
    ::handle_speculative_decoding@0.5.23) from the dump read as `SglangArgs` (fromlog.py) with the model (and draft)
    behind it; without a model that resolves, the D the engine itself dumped (ServerArgs is printed after it resolved
    it); None without speculation."""
    args = args_from_dump(facts.server_args)
    if args is None or args.spec_algorithm is None:
        return None
    model = model_spec_of(facts)
    if model is not None:
        draft_src = model_source({"model_path": args.speculative_draft_model_path})
        try:
            draft = load_model_spec(draft_src) if draft_src else None
            d = resolve_spec(args, model, draft).num_draft_tokens
            if d > 0:
                return d
        except (FlagError, UserError, ValueError, KeyError, TypeError, AttributeError, OSError):
            pass
    return args.speculative_num_draft_tokens or args.speculative_dflash_block_size or None


def dump_predates_0514(args: Mapping[str, object]) -> bool:
    """The dump still has `mamba_scheduler_strategy`, the field's name up to 0.5.13 (renamed
    `mamba_radix_cache_strategy` in 0.5.14: rules.py::rules_for_dump)."""
    return "mamba_scheduler_strategy" in args


def scratch_before_split(facts: LogFacts) -> bool:
    """True for SGLang <= 0.5.12: the speculative scratch p·mrr·D (mrr as requested) is taken before the Mamba/KV
    split, so K and N shrink with max_running_requests
    (`model_executor/model_runner_kv_cache_mixin.py::handle_max_mamba_cache@0.5.12.post1`). Read from the
    printed version when there is one, else from the argument names (<= 0.5.13; 0.5.13 itself cannot be told apart
    by names and is taken as the older rule, as the planner's `infer_version` does)."""
    version = parse_release(facts.engine_version)
    if version is not None:
        return version < (0, 5, 13)
    rules = rules_for_dump(facts.server_args)
    return rules is not None and rules.mamba_scratch_before_split


def slots_per_request(facts: LogFacts) -> tuple[int | None, str]:
    """ρ, the Mamba slots one running request holds (`ModelRunnerKVCacheMixin._calculate_mamba_ratio` in
    model_executor/model_runner_kv_cache_mixin.py up to 0.5.17, `KVCacheConfigurator._calculate_mamba_ratio` in
    mem_cache/kv_cache_configurator.py@0.5.23: 3, plus 2 for extra_buffer with overlap, 1 without or for
    extra_buffer_lazy; 1 without the radix cache), and where it came from.
    Printed by the engine's cap warning when present; else derived from the dumped strategy and overlap."""
    if facts.state_slots_per_request:
        return facts.state_slots_per_request, "the engine's cap warning"
    args = facts.server_args
    if not args:
        return None, ""
    if args.get("disable_radix_cache") is True:
        return 1, "disable_radix_cache=True"  # formulas.py::mamba_ratio: 1 without the radix cache
    strategy = args.get("mamba_radix_cache_strategy", args.get("mamba_scheduler_strategy"))
    rules = rules_for_dump(args)
    overlap = args.get("disable_overlap_schedule") is not True
    if rules is not None and rules.dflash_without_overlap and spec_algorithm(args) == "DFLASH":
        overlap = False  # DFLASH always ran without overlap up to 0.5.13 (read in the 0.5.12.post1/0.5.13.post1 wheels)
    if strategy == "auto" and dump_predates_0514(args):
        strategy = "no_buffer"
    if strategy not in ("extra_buffer", "extra_buffer_lazy", "no_buffer"):
        return None, ""
    # the planner's own ratio (formulas.py::mamba_ratio, _calculate_mamba_ratio of the engine) on the dump as the
    # planner reads it; a dump it cannot read still has the radix-cache switch that the ratio reads
    parsed = args_from_dump(args) or SglangArgs(disable_radix_cache=args.get("disable_radix_cache") is True)
    rho = mamba_ratio(parsed, strategy, overlap)
    how = {"extra_buffer": f"mamba strategy extra_buffer, overlap {'on' if overlap else 'off'}",
           "extra_buffer_lazy": "mamba strategy extra_buffer_lazy", "no_buffer": "mamba strategy no_buffer"}
    return rho, how[strategy]


@dataclass(frozen=True, slots=True)
class SlotSize:
    """Per-slot Mamba state p (conv + ssm, all linear layers on one GPU) and its source."""

    bytes: float
    source: str

    @property
    def mib(self) -> float:
        return self.bytes / MIB


def slot_size(facts: LogFacts) -> SlotSize | None:
    """p from the model config and the dumped TP / ssm dtype (exact, `engines/sglang/formulas.py::mamba_state`); else
    estimated from the log as (conv_state + ssm_state) / (max_mamba_cache_size + 1) (the pool has K+1 slots)."""
    args = facts.server_args
    spec = model_spec_of(facts)
    if spec is not None:
        try:
            tp = args.get("tp_size") or args.get("tensor_parallel_size") or 1
            ssm = args.get("mamba_ssm_dtype")
            st = mamba_state(spec, int(tp), ssm if isinstance(ssm, str) else None)
            if st is not None:
                return SlotSize(float(st.per_slot), f"{facts_model_source(facts)} config, TP{tp}, "
                                                    f"{ssm or 'default'} ssm")
        except (UserError, ValueError, TypeError, AttributeError):
            pass
    k, conv, ssm_g = facts.max_mamba_cache_size, facts.conv_state_gib, facts.ssm_state_gib
    if k is not None and conv is not None and ssm_g is not None and k >= 0:
        return SlotSize((conv + ssm_g) * GIB / (k + 1), "log: (conv_state + ssm_state) / (max_mamba_cache_size + 1)")
    return None


def kv_dtype_check(facts: LogFacts) -> str | None:
    """A sentence when the printed K size does not fit the KV dtype the launch implies but fits another one.

    Logged K size = L·(N+P)·n·hd·itemsize / 2^30 (`mem_cache/memory_pool.py::MHATokenToKVPool._create_buffers_normal@0.5.23`:
    one `(2, N+P, n, hd)` tensor per layer; L full-attention layers, n KV heads per rank).
    `auto` means the model dtype, or fp8 when the checkpoint's kv_cache_quant_algo is FP8 (`kv_cache_dtype.py`)."""
    args = facts.server_args
    if facts.k_size_gib is None or facts.kv_tokens is None or args.get("enable_dp_attention"):
        return None
    spec = model_spec_of(facts)
    if spec is None or getattr(spec, "mla", None) is not None or not getattr(spec, "attention_layers", None):
        return None
    try:
        tp = int(args.get("tp_size") or 1)
        page = int(args.get("page_size") or 1)
        n = max(1, spec.num_kv_heads // tp)
        rows = spec.num_layers if not spec.attention_layers else len(spec.attention_layers)
        per_byte = rows * (facts.kv_tokens + page) * n * spec.head_dim / GIB
    except (TypeError, ValueError, AttributeError, ZeroDivisionError):
        return None
    want = str(args.get("kv_cache_dtype") or "auto").lower()
    if want == "auto":
        kv_algo = str(getattr(getattr(spec, "quant", None), "kv_cache_quant_algo", "") or "").upper()
        want = "fp8" if kv_algo == "FP8" else "bf16"
    implied = 1 if want.startswith(("fp8", "float8")) else 2 if want in ("bf16", "bfloat16", "fp16", "float16") else None
    if implied is None:
        return None

    k_gib = facts.k_size_gib
    if k_gib is None:
        return None

    def fits(itemsize: int) -> bool:
        return abs(per_byte * itemsize - k_gib) <= max(0.011, 0.02 * k_gib)

    if fits(implied):
        return None
    other = 2 if implied == 1 else 1
    if fits(other):
        name = {1: "fp8", 2: "bf16/fp16"}
        return (f"K size {facts.k_size_gib:.2f} GiB for {facts.kv_tokens:,} tokens is a {name[other]} KV cache "
                f"({per_byte * other:.2f} GiB expected), not the {want} the arguments imply "
                f"({per_byte * implied:.2f} GiB).")
    return None


class MambaFixResult(FixResultJson):
    """A log-derived fix's result with the Mamba slots the changed launch gets."""

    max_mamba_cache_size: int


def log_derived_fixes(facts: LogFacts, kind: str) -> list[FixJson]:
    """Fixes from the log's own numbers when no model config resolves (the planner cannot run): SGLang's Mamba/KV split
    re-done with what the boot printed. Pools P = rest − B·(1−f); the <= 0.5.12 speculative scratch M·D·p comes off
    the top; the rest splits between Mamba slots ((K+1)·p) and KV in the proportion this boot got (the split of
    `pools.py`, `handle_max_mamba_cache@0.5.12.post1` / `KVCacheConfigurator._handle_max_mamba_cache@0.5.23`).
    A request needs ρ slots. Gives the largest --max-running-requests that fits and the --mem-fraction-static that
    fits the requested one. Each fix says it is log-derived."""
    if kind not in ("max_running_requests_zero", "mamba_state_cache_too_small", "mamba_state_cache_no_memory"):
        return []
    args = facts.server_args
    f, b = args.get("mem_fraction_static"), facts.avail_before_load_gib
    rest = facts.draft_avail_after_load_gib if facts.draft_loaded_before_pools else facts.avail_after_load_gib
    req, k, p = args.get("max_running_requests"), facts.max_mamba_cache_size, slot_size(facts)
    rho, _ = slots_per_request(facts)
    kv = sum(x for x in (facts.k_size_gib, facts.v_size_gib, facts.kv_size_gib) if x is not None)
    if not isinstance(f, (int, float)) or b is None or rest is None or k is None or p is None or rho is None \
            or not isinstance(req, int) or req < 1 or kv <= 0:
        return []
    d = draft_tokens(facts) or 0
    per = p.bytes / GIB
    scratch = (lambda m: m * d * per) if scratch_before_split(facts) and d else (lambda m: 0.0)
    pools = rest - b * (1 - f)
    mamba_obs = (k + 1) * per
    phi = mamba_obs / (mamba_obs + kv)

    def slots(m: int, pools_gib: float) -> int:
        return int(phi * (pools_gib - scratch(m)) / per) - 1

    src = "log-derived (no model config): " + p.source
    out: list[FixJson] = []
    # one request's slots of margin: the split proportion is read from this boot's small pool of K+1 slots
    fit = next((m for m in range(req - 1, 0, -1) if slots(m, pools) >= (m + 1) * rho), None)
    if fit is not None:
        fitted: MambaFixResult = {"status": "ok", "error": None, "kv_tokens": None, "max_running_requests": fit,
                                  "max_mamba_cache_size": slots(fit, pools)}
        out.append({"change": {"--max-running-requests": fit}, "source": "log", "result": fitted,
                    "why": f"{src}; about {slots(fit, pools)} Mamba slots for {fit} x {rho} per request"})
    need = (((req + 1) * rho + 1) * per) / phi + scratch(req)
    frac = 1 - (rest - need) / b
    frac = int(frac * 100 + 0.999) / 100
    if f < frac <= 0.95:
        asked: MambaFixResult = {"status": "ok", "error": None, "kv_tokens": None, "max_running_requests": req,
                                 "max_mamba_cache_size": slots(req, rest - b * (1 - frac))}
        out.append({"change": {"--mem-fraction-static": frac}, "source": "log", "result": asked,
                    "why": f"{src}; pools {need:.2f} GiB hold {req} x {rho} slots"})
    return out


def log_notes(facts: LogFacts) -> list[str]:
    """What an SGLang boot measured that its own rules flag: memory that came back after the pools were sized (an MTP
    draft's embedding and lm_head replaced by the target's), and a K size that fits another KV dtype."""
    notes: list[str] = []
    pool_end = facts.draft_memory_pool_end_gib or facts.memory_pool_end_gib
    if facts.draft_loaded_before_pools and facts.available_gpu_mem_gib is not None and pool_end is not None \
            and facts.available_gpu_mem_gib - pool_end > 1.0:
        back = facts.available_gpu_mem_gib - pool_end
        why = ("most likely the MTP draft's own embedding and lm_head, replaced by the target's after sizing "
               "(sglang/srt/speculative/eagle_worker_v2.py::EagleDraftWorker.init_lm_head@0.5.15.post1)"
               if spec_algorithm(facts.server_args) in ("EAGLE", "NEXTN")
               else "memory freed after sizing")
        notes.append(f"{back:.2f} GiB came back after the pools were sized (free {pool_end:.2f} -> "
                     f"{facts.available_gpu_mem_gib:.2f} GiB): {why}; the pools were sized without it.")
    kv_note = kv_dtype_check(facts)
    if kv_note:
        notes.append("Inconsistent KV cache: " + kv_note)
    return notes
