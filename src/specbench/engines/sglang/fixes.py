"""Nearest working configurations: per TP size, the largest max-running-requests, the smallest
mem-fraction-static, the longest context and the largest draft-token count that still start and serve.

Each search is a binary search over a predicate that is monotone in the searched value (more requests or draft
tokens only take memory away; a larger mem fraction only gives memory back), so a whole per-TP table costs a few
dozen plans.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specbench.engines.search import first_true, last_true
from specbench.engines.sglang import knobs
from specbench.engines.sglang.args import SglangArgs
from specbench.engines.sglang.plan import SglangPlan, plan_sglang
from specbench.engines.sglang.plan_stages import Measured
from specbench.errors import UserError
from specbench.specs.gpu import GpuSpec, context_overhead
from specbench.specs.model_types import ModelSpec
from specbench.specs.weights import draft_model_bytes, mtp_draft_bytes, weight_bytes

# The search space the issues name: TP 1/2/4/8, max-running-requests 1..512, mem fraction 0.50..0.95 step 0.01,
# context 4k..256k (issue 2 "nearest working configurations", benchmark issue 6).
TP_SIZES = (1, 2, 4, 8)
MRR_MAX = 512
FRACTIONS = tuple(round(0.50 + 0.01 * i, 2) for i in range(46))  # 0.50 .. 0.95
CONTEXTS = (4096, 8192, 16384, 32768, 65536, 131072, 262144)


@dataclass(frozen=True)
class TpRow:
    tp: int
    error: str | None                      # why this TP cannot be planned at all (e.g. heads not divisible)
    max_running_requests: int | None       # largest --max-running-requests served in full
    min_mem_fraction: float | None         # smallest --mem-fraction-static serving the requested mrr
    max_context: int | None                # longest --context-length a full request fits in
    max_draft_tokens: int | None           # largest draft-token count serving the requested mrr
    plan_at_request: SglangPlan | None     # the user's configuration at this TP


class Solver:
    def __init__(self, args: SglangArgs, m: ModelSpec, draft: ModelSpec | None, gpu: GpuSpec, version: str,
                 measured: Measured):
        self.args, self.m, self.draft, self.gpu, self.version, self.measured = args, m, draft, gpu, version, measured
        self.calls = 0

    def measured_at(self, tp: int) -> Measured:
        """Measured values hold for the TP they were measured at; other TPs scale the weights by the estimate."""
        ms = self.measured
        if tp == self.args.tp:
            return ms
        w = ms.weights_gib
        if w is not None:
            vis = self.m.is_multimodal and not self.args.language_only
            e0 = weight_bytes(self.m, self.args.tp, include_vision=vis)
            e1 = weight_bytes(self.m, tp, include_vision=vis)
            w = w * e1 / e0 if e0 else None
        wd = ms.draft_weights_gib
        if wd is not None:  # not 1/tp: a DFLASH drafter's fc and norms stay whole (3.38 -> 1.90 GiB at TP2, H200)
            d0, d1 = self._draft_estimate(self.args.tp), self._draft_estimate(tp)
            wd = wd * d1 / d0 if d0 else None
        b = ms.avail_before_load_gib
        if b is not None:  # the measured B moves by the overhead table's difference between the two TPs
            b -= context_overhead(self.gpu, tp).gib - context_overhead(self.gpu, self.args.tp).gib
        return Measured(b, w, wd, ms.other_resident_gib)

    def _draft_estimate(self, tp: int) -> int:
        if self.draft is not None:
            return draft_model_bytes(self.draft, tp)
        return mtp_draft_bytes(self.m, tp)

    def plan(self, **changes) -> SglangPlan:
        self.calls += 1
        a = self.args.with_(**changes)
        return plan_sglang(a, self.m, self.draft, self.gpu, self.version, self.measured_at(a.tp))

    def serves(self, p: SglangPlan, mrr: int | None) -> bool:
        if p.status != "ok":
            return False
        want = mrr if mrr is not None else 1
        return p.max_running_requests >= want

    def row(self, tp: int) -> TpRow:
        try:
            base = self.plan(tp=tp)
        except UserError as exc:
            return TpRow(tp, str(exc), None, None, None, None, None)
        if base.error_kind == "start_check" and base.error:  # no memory change makes this TP start
            return TpRow(tp, base.error, None, None, None, None, base)
        mrr = self.args.max_running_requests
        spec = self.args.spec_algorithm is not None
        max_mrr = last_true(1, MRR_MAX, lambda x: self.serves(self.plan(tp=tp, max_running_requests=x), x))
        min_f = first_true(FRACTIONS, lambda f: self.serves(self.plan(tp=tp, mem_fraction_static=f), mrr))
        model_max = int(self.m.max_position_embeddings or CONTEXTS[-1])
        ctxs = sorted({c for c in CONTEXTS if c <= model_max} | {model_max})

        # context and draft tokens are judged at the request count that can be served here
        mrr_eff = mrr if (mrr is None or max_mrr is None) else min(mrr, max_mrr)
        if max_mrr is None:
            mrr_eff = None

        def ctx_ok(c: int) -> bool:
            p = self.plan(tp=tp, context_length=c, max_running_requests=mrr_eff if mrr is not None else None)
            return self.serves(p, mrr_eff) and p.kv_tokens >= c

        max_ctx = None
        for c in ctxs:  # short list; not strictly monotone through the `estimated` term, so scan
            if ctx_ok(c):
                max_ctx = c
        max_d = None
        if spec:
            key = "speculative_ddtree_budget" if self.args.spec_algorithm == "DDTREE" else "speculative_num_draft_tokens"
            extra = {"speculative_dflash_block_size": None} if self.args.spec_algorithm in ("DFLASH",) else {}
            if self.args.spec_algorithm in ("EAGLE", "NEXTN", "EAGLE3") and (self.args.speculative_eagle_topk or 1) == 1:
                key = "speculative_num_steps"
            try:
                max_d = last_true(1, 64, lambda d: self.serves(self.plan(tp=tp, **{key: d}, **extra), mrr))
                if max_d is None and mrr_eff is not None and mrr_eff != mrr:
                    max_d = last_true(1, 64, lambda d: self.serves(
                        self.plan(tp=tp, max_running_requests=mrr_eff, **{key: d}, **extra), mrr_eff))
            except UserError:
                max_d = None
        return TpRow(tp, None, max_mrr, min_f, max_ctx, max_d, base)

    def table(self, tps: Sequence[int] = TP_SIZES) -> list[TpRow]:
        return [self.row(tp) for tp in tps]


def fixes_from_rows(args: SglangArgs, rows: list[TpRow], solver: Solver) -> list[dict]:
    """docs/contracts.md `fixes`: {"change": {flag: value}, "result": {...}}, nearest first (the user's TP first,
    then a single-flag change before a TP change)."""
    out: list[dict] = []
    user = [r for r in rows if r.tp == args.tp] + [r for r in rows if r.tp != args.tp]
    for r in user:
        if r.error:
            continue
        cands: list[dict] = []
        base_tp = {} if r.tp == args.tp else {"--tp": r.tp}
        if r.max_running_requests is not None and (args.max_running_requests is None
                                                   or r.max_running_requests < args.max_running_requests):
            cands.append({**base_tp, "--max-running-requests": r.max_running_requests})
        if r.min_mem_fraction is not None and (args.mem_fraction_static is None
                                               or r.min_mem_fraction > args.mem_fraction_static):
            cands.append({**base_tp, "--mem-fraction-static": r.min_mem_fraction})
        if r.max_draft_tokens is not None and args.spec_algorithm:
            flag = {"DDTREE": "--speculative-ddtree-budget"}.get(args.spec_algorithm, "--speculative-num-draft-tokens")
            if args.spec_algorithm in ("EAGLE", "NEXTN", "EAGLE3") and (args.speculative_eagle_topk or 1) == 1:
                flag = "--speculative-num-steps"
            cands.append({**base_tp, flag: r.max_draft_tokens})
        if base_tp and r.plan_at_request is not None and r.plan_at_request.status == "ok":
            cands.insert(0, dict(base_tp))
        for ch in cands:
            kw = {str(knobs.fix_field(k)): v for k, v in ch.items()}
            if "speculative_num_draft_tokens" in kw and args.spec_algorithm == "DFLASH":
                kw["speculative_dflash_block_size"] = None
            try:
                p = solver.plan(**kw)
            except UserError:
                continue
            if p.status == "ok":
                out.append({"change": ch, "result": _result(p)})
    # hybrid models at the user's TP: the state knobs. --mamba-full-memory-ratio is the one the engine itself suggests
    # (sglang/srt/mem_cache/memory_pool.py::HybridReqToTokenPool.alloc@0.5.15.post1, "try to increase
    # --mamba-full-memory-ratio"); --mamba-ssm-dtype bfloat16 halves the SSM state
    # (sglang/srt/configs/mamba_utils.py::mamba2_state_dtype@0.5.15.post1 reads it)
    if solver.m.linear_layers:
        extra: list[dict[str, str | float]] = []  # one flag each: --mamba-ssm-dtype or --mamba-full-memory-ratio
        if (args.mamba_ssm_dtype or solver.m.mamba_ssm_dtype or "float32") in ("float32", "fp32"):
            extra.append({"--mamba-ssm-dtype": "bfloat16"})
        for ratio in (0.9, 1.5, 2.0, 3.0):
            if args.mamba_full_memory_ratio is None or ratio > args.mamba_full_memory_ratio:
                if not (args.mamba_full_memory_ratio is None and ratio == 0.9):
                    extra.append({"--mamba-full-memory-ratio": ratio})
        for ch in extra:
            kw = {"mamba_ssm_dtype" if "--mamba-ssm-dtype" in ch else "mamba_full_memory_ratio": list(ch.values())[0]}
            try:
                p = solver.plan(**kw)
            except UserError:
                continue
            if p.status == "ok" and (args.max_running_requests is None
                                     or p.max_running_requests >= args.max_running_requests):
                out.insert(0 if not out or out[0]["change"].get("--tp") else 1, {"change": ch, "result": _result(p)})
                break
    # de-duplicate, keep order
    seen: set[str] = set()
    uniq = []
    for f in out:
        key = repr(sorted(f["change"].items()))
        if key not in seen:
            seen.add(key)
            uniq.append(f)
    return uniq


def _result(p: SglangPlan) -> dict:
    c = p.contract()
    keep = ("status", "error", "engine", "engine_version", "mem_fraction_static", "weights_gib", "draft_weights_gib",
            "kv_tokens", "k_size_gib", "v_size_gib", "max_mamba_cache_size", "conv_state_gib", "ssm_state_gib",
            "intermediate_ssm_state_gib", "max_running_requests", "tp", "context_len", "draft_tokens")
    return {k: c[k] for k in keep}
