"""The step-cost model: one cell's decode / verify / draft step time, TTFT, tok/s, TPOT and speedup over AR.

Per step at the batch that really runs, b = min(concurrency, max_running_requests the planner gives):
  AR        T = a + al*L + am*L_moe + p*b + e * R_target(b, 1) + k * K + k1 * K1 + kf * F + mt * b * L_moe
  spec      T = a + al*L + am*L_moe + p*b + e * (R_target(b, n) + R_draft) + d * n_fwd + db * [block] + q * b
                + (k + ks) * K + (k1 + k1s) * K1 + kf * F + t * b * (topk - 1) * num_steps + mt * b * n * L_moe
with F the step's FLOPs at peak FLOP/s (the GEMMs' shortfall where a verify runs many tokens), e >= 1 (no kernel reads
faster than peak bandwidth: predict/fit.py::STEP_LOWER), t the cost of each extra tree branch token and db the block
draft's own per-forward cost (step_features says what measured each), mt the fused expert kernel's cost per token
and MoE layer beyond the expert bytes (the H100 Qwen3-30B-A3B step with uniform routing, whose verify reads every
expert from c = 16 up, still grew 32.4 -> 41.8 ms from c = 16 to 32: beyond the roofline, ~2.9 us per added token
and MoE layer; AR's residual grew 0.85 us (c = 4 -> 16) and 2.0 us (16 -> 32) per token and MoE layer; fitted with
the rest of the constants, mt is ~1 us; tests/data/h100-moe-uniform-sglang-0.5.15.post1/);
with K = b * ctx * KV bytes per token / bandwidth, the seconds one pass over the batch's KV takes at peak bandwidth
(in the speculative terms ks and k1s times query_group: the verify's attention works per query head),
and K1 = K at b = 1 (one sequence's pass: the part of the attention a batch cannot spread over the GPU; on the H100
the AR step grew by 0.44 us per context token at b = 1 and by 0.25 + 0.19 b us at b = 16 / 32, the EAGLE3 step by
2.4 us at b = 1: tests/data/h100-context-sglang-0.5.15.post1/):
the attention's cost beyond the roofline grows with the context (issue 35: the H100 EAGLE3 step was 17 % slower at
c = 1 and 44 % slower at c = 16 with 1,024-token prompts than with 512, where the roofline's KV bytes predicted ~1 %;
the verify's and the draft's attention reads the KV more times than once), in units of the GPU's own bandwidth, so
k and ks move to another GPU with its roofline. Tree drafts (topk > 1) draft topk tokens per sequence per step.
with n the verify tokens per sequence (draft tokens; topk 1 chains: num_steps + 1), R the roofline seconds of
predict/roofline.py, and the draft part by method:
  EAGLE / EAGLE3 / MTP (NEXTN): num_steps one-token draft forwards + one draft-extend forward over the n verified
                                positions (n_fwd = num_steps + 1);
  DFLASH / DDTREE:              one block forward of n tokens through the drafter and the target's lm_head, which it
                                borrows (n_fwd = 1);
  NGRAM:                        nothing (n_fwd = 0).
with L the target's layers and L_moe its MoE layers; a (s per step), al / am (s per layer / MoE layer: the launch
floor of a layer's kernels, which a small batch pays whatever its bytes), p (s per sequence), e (roofline multiplier
= 1 / efficiency), d (s per draft forward) and q (s per sequence of a speculative step) are the calibration's (predict/fit.py), per engine release, GPU, attention backend
and CUDA graphs. TTFT = f + g * R_prefill(b prompts) (f, g calibrated likewise). A request then takes
TTFT + (output / accept length) * T (speculative; AR: (output - 1) * T); closed-loop tok/s = b * output / that
(the relation the H200 stores hold to 0.1 % at c <= 32); speedup = tok/s(spec) / tok/s(AR), the AR cell at the
same concurrency with its own cap.
"""

from __future__ import annotations

from dataclasses import dataclass

from specbench.predict.roofline import (
    INDEPENDENT,
    ROUTING_SHARE,
    Ceilings,
    allreduce_s,
    drafter_shape,
    flops_s,
    forward_s,
    head_shape,
    kv_read_s,
    mtp_shape,
    target_shape,
)
from specbench.specs.model_types import ModelSpec

# Method families by the algorithm names the engines take (SGLang --speculative-algorithm, vLLM "method").
EAGLE_LIKE = {"eagle", "eagle3", "standalone", "medusa", "draft_model"}
MTP_LIKE = {"nextn", "mtp", "deepseek_mtp", "qwen3_next_mtp", "qwen3_5_mtp", "ernie_mtp", "mimo_mtp"}
BLOCK_LIKE = {"dflash", "ddtree"}
NONE_LIKE = {"ngram", "suffix"}


def method_of(algorithm: str | None) -> str:
    """ar | eagle | mtp | block | ngram (unknown names raise ValueError)."""
    a = (algorithm or "ar").lower()
    if a == "ar":
        return "ar"
    for name, group in (("eagle", EAGLE_LIKE), ("mtp", MTP_LIKE), ("block", BLOCK_LIKE), ("ngram", NONE_LIKE)):
        if a in group:
            return name
    raise ValueError(f"no step model for speculative algorithm {algorithm!r}")


@dataclass(frozen=True)
class CellShape:
    """What a cell runs, engine-neutral: the models, the speculative method and its sizes, the load."""

    target: ModelSpec
    draft: ModelSpec | None       # a separate drafter (EAGLE/DFLASH); None: none, or the target's own MTP layers
    method: str                   # method_of(...)
    num_steps: int                # draft forwards (EAGLE/MTP)
    verify_tokens: int            # tokens per sequence in the verify forward (1 for AR)
    tp: int
    concurrency: int
    cap: int | None               # max_running_requests (planner or engine); None: no cap known
    prompt_tokens: int
    output_tokens: int
    topk: int = 1                 # EAGLE tree width: each draft step forwards topk tokens per sequence
    kv_scale: float = 1.0         # KV cache dtype bytes / model dtype bytes (fp8 KV on a BF16 model: 0.5)
    # a MoE target's routing (roofline.py::ROUTING_SHARE): "independent" for a real checkpoint (each verify position
    # routed on its own), "token-id" where dummy weights route a token by its id alone (the engine says which)
    routing: str = INDEPENDENT

    @property
    def batch(self) -> int:
        return max(1, min(self.concurrency, self.cap) if self.cap else self.concurrency)

    @property
    def ctx(self) -> float:
        """Mean context over a request's decode: the prompt plus half the output."""
        return self.prompt_tokens + self.output_tokens / 2

    @property
    def n_fwd(self) -> int:
        return {"ar": 0, "eagle": self.num_steps + 1, "mtp": self.num_steps + 1, "block": 1, "ngram": 0}[self.method]


@dataclass(frozen=True)
class Params:
    """One calibration class's constants (predict/fit.py): seconds, or a dimensionless multiplier (e, g)."""

    a: float = 0.0   # s per step
    al: float = 0.0  # s per target layer per step (kernel launches a layer costs whatever its bytes)
    am: float = 0.0  # s per MoE layer per step (routing, top-k, the expert kernels' floor)
    p: float = 0.0   # s per sequence per step
    e: float = 1.0   # x roofline step time
    d: float = 0.0   # s per draft forward
    q: float = 0.0   # s per sequence per speculative step
    f: float = 0.0   # s of TTFT
    g: float = 1.0   # x roofline prefill time
    k: float = 0.0   # x the KV read time at peak bandwidth, every step (attention beyond the roofline)
    ks: float = 0.0  # x the KV read time at peak bandwidth, speculative steps only (verify + draft attention)
    k1: float = 0.0   # x one sequence's KV read time, every step (the attention's per-sequence latency)
    k1s: float = 0.0  # x one sequence's KV read time, speculative steps only
    kf: float = 0.0   # x the step's FLOP time at peak FLOP/s (the GEMMs' shortfall from peak where many tokens run)
    t: float = 0.0    # s per extra tree draft token (b x (topk - 1) x num_steps: top-k over the branches, tree masks)
    db: float = 0.0   # s per block draft forward (DFlash / DDTree: its own worker, not EAGLE's per-step d)
    mt: float = 0.0   # s per token per MoE layer (the fused expert kernel's work per routed token beyond its bytes)

    def step_vector(self) -> tuple[float, ...]:
        return (self.a, self.al, self.am, self.p, self.e, self.d, self.q, self.k, self.ks, self.k1, self.k1s,
                self.kf, self.t, self.db, self.mt)


ROOFLINE = Params()  # the pure roofline: no overhead, full efficiency


def step_features(c: CellShape, ceil: Ceilings) -> tuple[float, ...]:
    """The regressors of T = a + al*layers + am*moe_layers + p*b + e*R + d*n_fwd + q*b*[spec] + k*K + ks*K*[spec]
    + k1*K1 + k1s*K1*[spec] + kf*F + t*b*(topk - 1)*num_steps + db*[block] for this cell (d counts the EAGLE / MTP
    draft forwards, db the one block forward: DFlash's step over AR at b = 1 on the H100 is ~3.2 ms for one 5-layer
    forward, EAGLE3's ~3.0 ms for four 1-layer ones, h100-dflash16.db / h100-context-27of27.db) (R includes the TP all-reduce: roofline.py::allreduce_s).

    K and K1 count the KV at the model dtype whatever the cache dtype: the attention's cost beyond the roofline is
    per element, not per byte (FP8 KV on the H100, tests/data/h100-context-sglang-0.5.15.post1/h100-fp8kv.db: AR at
    8,192 tokens 3-8 % faster than BF16, the EAGLE3 chain's speedup within 3 % of BF16's, where half the bytes
    predicted +23 %). F is the step's FLOPs at peak FLOP/s: the roofline's max(bytes, FLOPs) takes GEMMs at peak,
    which a verify of b x n tokens does not reach (the EAGLE3 tree of 16 draft tokens at c = 16, 256 tokens per
    verify: 0.71x measured, 1.04x predicted without it: h100-tree8.db). The tree term: the H100 steps of the EAGLE3
    trees (topk 4 / 8) over the chain at the same batch and prompt grew by ~15-27 us per extra draft token,
    b x (topk - 1) x num_steps (h100-context-27of27.db, h100-tree8.db), at b = 1 as at b = 32."""
    b = c.batch
    ts = target_shape(c.target, c.tp)
    layers = float(c.target.num_layers)
    moe = float(len(c.target.moe.moe_layers)) if c.target.moe else 0.0
    kv = kv_read_s(ts, ceil, b, c.ctx)
    kv1 = kv_read_s(ts, ceil, 1, c.ctx)
    if c.method == "ar":
        r = forward_s(ts, ceil, b, 1, c.ctx, c.kv_scale) + allreduce_s(c.target, ceil, c.tp, b)
        return (1.0, layers, moe, float(b), r, 0.0, 0.0, kv, 0.0, kv1, 0.0, flops_s(ts, ceil, b, 1, c.ctx), 0.0, 0.0,
                b * moe)
    n = c.verify_tokens
    r = forward_s(ts, ceil, b, n, c.ctx, c.kv_scale, ROUTING_SHARE[c.routing]) + allreduce_s(c.target, ceil, c.tp,
                                                                                          b * n)
    f = flops_s(ts, ceil, b, n, c.ctx)
    tree = 0.0
    if c.method in ("eagle", "mtp"):
        ds = drafter_shape(c.draft, c.tp) if c.draft is not None else mtp_shape(c.target, c.tp)
        width = max(1, c.topk)
        share = ROUTING_SHARE[c.routing]  # a MoE target's own MTP layers route like its verify
        r += c.num_steps * forward_s(ds, ceil, b, width, c.ctx, c.kv_scale, share) + forward_s(
            ds, ceil, b, n, c.ctx, c.kv_scale, share)
        f += c.num_steps * flops_s(ds, ceil, b, width, c.ctx) + flops_s(ds, ceil, b, n, c.ctx)
        tree = float(b * (width - 1) * c.num_steps)
    elif c.method == "block" and c.draft is not None:
        ds, hs = drafter_shape(c.draft, c.tp), head_shape(c.target, c.tp)
        r += forward_s(ds, ceil, b, n, c.ctx, c.kv_scale) + forward_s(hs, ceil, b, n, c.ctx)
        f += flops_s(ds, ceil, b, n, c.ctx) + flops_s(hs, ceil, b, n, c.ctx)
    drafts, blocks = (0.0, float(c.n_fwd)) if c.method == "block" else (float(c.n_fwd), 0.0)
    g = query_group(c.target)
    return (1.0, layers, moe, float(b), r, drafts, float(b), kv, kv * g, kv1, kv1 * g, f, tree, blocks, b * n * moe)


# The query heads per KV head that the speculative context terms (ks, k1s) are counted at: Qwen3-8B's and
# Llama-3.1-8B's 32 / 8, the targets that measured them (tests/data/h100-context-sglang-0.5.15.post1,
# h200-eagle3-sglang-0.5.15.post1), so ks and k1s keep their fitted meaning there.
QUERY_GROUP_REF = 4.0


def query_group(m: ModelSpec) -> float:
    """The target's query heads per KV head over QUERY_GROUP_REF: a verify's attention over the context does its work
    per query head (n tokens x ctx x heads x head_dim), where the KV read time counts KV heads only. Measured: the
    Qwen3-32B EAGLE3 step (64 query heads, 8 KV) at c = 16 grew 47.7 -> 69.4 ms from 512- to 1,024-token prompts
    (+22 ms; AR +3.9 ms) on the H100; counted in KV reads, the 8B-fitted ks predicted +24-29 % too fast there and 4 of
    12 speedups outside their intervals, counted per query head 12 / 12 inside, max 10 %
    (tests/data/h100-q32b-sglang-0.5.15.post1/, benchmarks/RESULTS.md sixth session)."""
    return (m.num_attention_heads / max(1, m.num_kv_heads)) / QUERY_GROUP_REF


def prefill_roofline_s(c: CellShape, ceil: Ceilings) -> float:
    """Roofline seconds of prefilling the batch's prompts (and the drafter's pass over them)."""
    b, n, ctx = c.batch, c.prompt_tokens, c.prompt_tokens / 2
    r = forward_s(target_shape(c.target, c.tp), ceil, b, n, ctx)
    if c.method in ("eagle", "block") and c.draft is not None:
        r += forward_s(drafter_shape(c.draft, c.tp), ceil, b, n, ctx)
    elif c.method == "mtp":
        r += forward_s(mtp_shape(c.target, c.tp), ceil, b, n, ctx)
    return r


def step_s(c: CellShape, ceil: Ceilings, k: Params) -> float:
    x = step_features(c, ceil)
    return sum(xi * ki for xi, ki in zip(x, k.step_vector()))


def ttft_s(c: CellShape, ceil: Ceilings, k: Params) -> float:
    return k.f + k.g * prefill_roofline_s(c, ceil)


@dataclass(frozen=True)
class CellPrediction:
    step_ms: float
    ttft_ms: float
    tpot_ms: float
    tok_s: float
    batch: int
    ttft_seen_ms: float = 0.0  # what a closed-loop client measures: the wait for a slot included (queued_ttft_s)


def predict_cell(c: CellShape, ceil: Ceilings, k: Params, accept_len: float | None) -> CellPrediction:
    """One cell's prediction; a speculative cell needs its accept length (tokens per verify step, >= 1)."""
    t = step_s(c, ceil, k)
    first = ttft_s(c, ceil, k)
    if c.method == "ar":
        decode = max(0, c.output_tokens - 1) * t
    else:
        if accept_len is None or accept_len < 1:
            raise ValueError("a speculative cell needs an accept length >= 1")
        decode = c.output_tokens / accept_len * t
    e2e = first + decode
    tpot = decode / max(1, c.output_tokens - 1)
    return CellPrediction(step_ms=1e3 * t, ttft_ms=1e3 * first, tpot_ms=1e3 * tpot,
                          tok_s=c.batch * c.output_tokens / e2e if e2e > 0 else 0.0, batch=c.batch,
                          ttft_seen_ms=1e3 * queued_ttft_s(c, first, decode))


def queued_ttft_s(c: CellShape, first: float, decode: float) -> float:
    """The time to first token a closed-loop client measures where it asks more requests than run at once: by
    Little's law the concurrency's requests each spend concurrency / batch service times in the server, one service
    being its own prefill and decode, so the first token comes that long less its decode after it was sent. Equal to
    `first` where all run at once. Measured (tests/data/h100-moe-long-sglang-0.5.15.post1, c = 32 at 8,192 tokens,
    12 / 11 running): AR p50 9.4 s, EAGLE3 16.6 s, where the service's own first token is ~1.6 s."""
    if c.concurrency <= c.batch or c.batch <= 0:
        return first
    return (first + decode) * c.concurrency / c.batch - decode
