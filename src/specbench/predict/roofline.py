"""The roofline of one forward pass: bytes it reads and FLOPs it does, from the planner's model specs (specs/).

A decode / verify / draft forward over `b` sequences of `n` tokens each, at context `ctx`:
- weights: every linear weight once (specs/weights.py::tensors_per_rank, bytes per parameter from the checkpoint's
  quantization, specs/quant.py), the embedding only as the `b*n` rows it looks up; routed MoE experts only as the
  share a batch touches, E * (1 - (1 - k/E)^m) of E experts per layer for m routed tokens (k = experts_per_tok,
  routing taken as uniform; m = b for a decode, b * (1 + (n - 1) * share) for a verify: share 1 where each token is
  routed on its own (a real checkpoint, or the engine's uniform expert simulation), STAND_IN_ROUTING_SHARE where
  dummy weights route by token id, CellShape.routing);
- KV: `b * ctx` cached tokens of every full-attention layer (sliding layers: at most the window), K + V heads per
  rank x head dim x the KV dtype (the model dtype: no `--kv-cache-dtype` is read here);
- recurrent state (Gated DeltaNet / Mamba): read and written once per forward, plus one intermediate state per
  extra token of a verify (SGLang and vLLM keep one per draft position to roll back to the accepted one);
- FLOPs: 2 x active parameters per token (embedding excluded, k of E experts) + 4 x ctx x heads x head_dim per token
  and attention layer (QK^T and PV).
Time = max(bytes / bandwidth, FLOPs / FLOP/s): the GPU catalog's ceilings (specs/gpu.py::PERF). Pure functions.
"""

from __future__ import annotations

from dataclasses import dataclass

from specbench.specs.dtypes import dtype_bytes
from specbench.specs.memo import per_spec
from specbench.specs.model_types import ModelSpec
from specbench.specs.quant import Scheme
from specbench.specs.weights import Tensor, mtp_draft_tensors, tensors_per_rank

SSM_STATE_BYTES = 4  # fp32: SGLang's default mamba ssm dtype (engines/sglang/formulas.py::mamba_state) and vLLM's
CONV_STATE_BYTES = 2  # bf16 conv window (SGLANG_MAMBA_CONV_DTYPE default)
# How many independently routed tokens the n positions of ONE sequence in a verify count as: 1 + (n - 1) * share.
# A real checkpoint routes each token on its own (share 1), and so does SGLang's uniform expert simulation: the H100
# MoE store with SGLANG_SIMULATE_UNIFORM_EXPERTS=1 (tests/data/h100-moe-uniform-sglang-0.5.15.post1/) measured the
# same step at simulated accept 1.5, 2.5 and 3.5. Dummy weights route a token by its id alone
# (engines/sglang/simulate.py::collapsed_routing), and the simulated acceptance commits one token id for every
# request, so a verify's positions share experts: STAND_IN_ROUTING_SHARE, fitted on the grid 0 / 0.25 / 0.5 / 1 to
# the dummy-routing MoE stores (tests/data/h200-moe-*, h100-moe-*; benchmarks/RESULTS.md, 'Step-cost model').
STAND_IN_ROUTING_SHARE = 0.25
INDEPENDENT_ROUTING_SHARE = 1.0
# a MoE target's routing regime (CellShape.routing; the engine's ServerAdapter.stand_in_routing says which) -> share
INDEPENDENT, TOKEN_ID = "independent", "token-id"
ROUTING_SHARE = {INDEPENDENT: INDEPENDENT_ROUTING_SHARE, TOKEN_ID: STAND_IN_ROUTING_SHARE}


@dataclass(frozen=True)
class ForwardShape:
    """What one model's forward reads, per rank: fixed weight bytes, the routed-expert bytes per MoE layer, the KV
    and state bytes per sequence, and the FLOPs per token."""

    dense_bytes: float          # weights read whatever the batch (lm_head included)
    embed_row_bytes: float      # one embedding row (looked up per token)
    expert_bytes: float         # all routed experts of all MoE layers
    num_experts: int
    experts_per_tok: int
    kv_bytes_per_token: float   # full-attention layers (not sliding)
    sliding_bytes_per_token: float
    sliding_window: int
    state_bytes: float          # recurrent state per sequence (all linear layers)
    flops_per_token: float      # 2 x active params
    attn_flops_per_ctx_token: float  # 4 x heads x head_dim x attention layers

    def bytes(self, b: int, n: int, ctx: float, kv_scale: float = 1.0,
              routing_share: float = INDEPENDENT_ROUTING_SHARE) -> float:
        tokens = b * n
        w = self.dense_bytes + tokens * self.embed_row_bytes
        if self.num_experts:
            routed = b * (1 + (n - 1) * routing_share)
            touched = 1.0 - (1.0 - self.experts_per_tok / self.num_experts) ** routed
            w += self.expert_bytes * touched
        state = b * self.state_bytes * (2 + (n - 1))
        return w + self.kv_bytes(b, ctx) * kv_scale + state

    def kv_bytes(self, b: int, ctx: float) -> float:
        """One pass over the KV cache of b sequences at context ctx (model dtype)."""
        return b * (ctx * self.kv_bytes_per_token + min(ctx, self.sliding_window) * self.sliding_bytes_per_token)

    def flops(self, b: int, n: int, ctx: float) -> float:
        return b * n * (self.flops_per_token + ctx * self.attn_flops_per_ctx_token)


def _bytes_of(m: ModelSpec, t: Tensor) -> float:
    s = m.quant.scheme_for(t.name, m.dtype, is_expert=t.expert) if t.linear else Scheme.dense(m.dtype)
    return t.params * s.bytes_per_param


def _kv_per_token(m: ModelSpec, tp: int, layers: int) -> float:
    size = dtype_bytes(m.dtype)
    if m.mla is not None:  # the latent, replicated on every rank
        return (m.mla.kv_lora_rank + m.mla.qk_rope_head_dim) * layers * size
    heads = max(1, m.num_kv_heads // max(1, tp))
    return heads * (m.head_dim + m.v_head_dim) * layers * size


def _state_per_seq(m: ModelSpec, tp: int) -> float:
    t = max(1, tp)
    n = len(m.linear_layers)
    if not n:
        return 0.0
    if m.gdn is not None:
        g = m.gdn
        ssm = g.num_value_heads * g.key_head_dim * g.value_head_dim / t
        conv = (2 * g.key_dim + g.value_dim) * (g.conv_kernel - 1) / t
    elif m.mamba is not None:
        mb = m.mamba
        ssm = (mb.num_heads * mb.head_dim * mb.state_size if mb.version == 2 else mb.intermediate * mb.state_size) / t
        conv = (mb.intermediate + 2 * mb.n_groups * mb.state_size) * (mb.conv_kernel - 1) / t
    else:
        return 0.0
    return n * (ssm * SSM_STATE_BYTES + conv * CONV_STATE_BYTES)


def _shape(m: ModelSpec, tensors: list[Tensor], tp: int, *, kv_layers: int | None = None,
           drop_embed: bool = False, lm_head_rows: int | None = None) -> ForwardShape:
    dense = expert = embed_row = 0.0
    active = 0.0
    e = m.moe
    for t in tensors:
        b = _bytes_of(m, t)
        if t.group in ("embed", "mtp") and t.name.endswith("embed_tokens"):
            if not drop_embed:
                embed_row = b / max(1, m.vocab_size)
                if m.tie_word_embeddings:  # the tied embedding is read whole as the lm_head
                    dense += b
                    active += t.params
            continue
        if t.name.endswith("lm_head") and lm_head_rows is not None:
            b = b * lm_head_rows / max(1, m.vocab_size)
            active += t.params * lm_head_rows / max(1, m.vocab_size)
            dense += b
            continue
        if t.group == "vision":
            continue
        if t.expert and e is not None:
            expert += b
            active += t.params * e.experts_per_tok / max(1, e.num_experts)
        else:
            dense += b
            active += t.params
    full = [i for i in m.attention_layers if i not in set(m.sliding_layers)]
    n_full = len(full) if kv_layers is None else kv_layers
    n_slide = len(m.sliding_layers) if kv_layers is None else 0
    heads = max(1, m.num_attention_heads // max(1, tp))
    attn_layers = n_full + n_slide
    return ForwardShape(
        dense_bytes=dense, embed_row_bytes=embed_row, expert_bytes=expert,
        num_experts=e.num_experts if e else 0, experts_per_tok=e.experts_per_tok if e else 0,
        kv_bytes_per_token=_kv_per_token(m, tp, n_full), sliding_bytes_per_token=_kv_per_token(m, tp, n_slide),
        sliding_window=int(m.sliding_window or 0),
        state_bytes=_state_per_seq(m, tp) if kv_layers is None else 0.0,
        flops_per_token=2.0 * active, attn_flops_per_ctx_token=4.0 * heads * m.head_dim * attn_layers)


def target_shape(m: ModelSpec, tp: int) -> ForwardShape:
    """The target model's forward (decode and verify)."""
    return per_spec("t", m, tp, compute=lambda: _shape(m, tensors_per_rank(m, tp, include_vision=False), tp))


def mtp_shape(m: ModelSpec, tp: int) -> ForwardShape:
    """One built-in MTP / NextN draft forward: its decoder layer(s), `fc`, and the lm_head it shares with the
    target (specs/weights.py::mtp_draft_tensors; its own embed_tokens is replaced by the target's)."""
    tensors = [t for t in mtp_draft_tensors(m, tp) if not t.name.endswith("embed_tokens")]
    return per_spec("m", m, tp, compute=lambda: _shape(m, tensors, tp, kv_layers=max(1, m.mtp_layers)))


def head_shape(m: ModelSpec, tp: int) -> ForwardShape:
    """The target's lm_head alone: a DFlash block draft has no head of its own and borrows the target's
    (sglang/srt/speculative/dflash_worker_v2.py@0.5.15.post1, "DFLASH's draft has no head of its own")."""
    tensors = [t for t in tensors_per_rank(m, tp, include_vision=False)
               if t.group == "lm_head" or (m.tie_word_embeddings and t.name.endswith("embed_tokens"))]
    return per_spec("h", m, tp, compute=lambda: _shape(m, tensors, tp, kv_layers=0))


def drafter_shape(d: ModelSpec, tp: int) -> ForwardShape:
    """A separate drafter's forward (EAGLE/EAGLE3: its layers and its lm_head over the draft vocabulary; DFlash:
    its layers, no embedding and no lm_head: specs/weights.py::_draft_model_bytes)."""
    kind = d.draft.kind if d.draft else "separate"
    tensors = tensors_per_rank(d, tp, include_vision=False)
    if kind == "dflash":
        tensors = [t for t in tensors if t.group not in ("embed", "lm_head")]
    rows = int(d.draft.draft_vocab_size) if (d.draft and d.draft.draft_vocab_size) else None
    return per_spec("d", d, tp, compute=lambda: _shape(d, tensors, tp, drop_embed=True, lm_head_rows=rows))


@dataclass(frozen=True)
class Ceilings:
    """A GPU's roofline ceilings in SI units (bytes/s, FLOP/s)."""

    bytes_per_s: float
    flops_per_s: float
    link_bytes_per_s: float = 0.0  # GPU-to-GPU bandwidth per direction (predict/calibration.py::ceilings)


def forward_s(shape: ForwardShape, ceil: Ceilings, b: int, n: int, ctx: float, kv_scale: float = 1.0,
              routing_share: float = INDEPENDENT_ROUTING_SHARE) -> float:
    """Roofline seconds of one forward over b sequences x n tokens at context ctx."""
    return max(shape.bytes(b, n, ctx, kv_scale, routing_share) / ceil.bytes_per_s,
               shape.flops(b, n, ctx) / ceil.flops_per_s)


def flops_s(shape: ForwardShape, ceil: Ceilings, b: int, n: int, ctx: float) -> float:
    """Seconds of one forward's FLOPs at peak FLOP/s (the FLOP term's unit, model.py)."""
    return shape.flops(b, n, ctx) / ceil.flops_per_s


def kv_read_s(shape: ForwardShape, ceil: Ceilings, b: int, ctx: float) -> float:
    """Seconds one pass over the batch's KV takes at peak bandwidth (the context term's unit, model.py)."""
    return shape.kv_bytes(b, ctx) / ceil.bytes_per_s


# Per all-reduce launch and sync inside one node (NCCL ring over NVLink, small messages): ~10 us, the order NCCL's
# own tests report for 8-GPU NVLink all-reduce of KB-sized buffers (nccl-tests all_reduce_perf, small sizes). No
# store of this project has TP > 1: a cell with TP > 1 is 'extrapolated' (predict/trust.py).
ALLREDUCE_LATENCY_S = 10e-6


def allreduce_s(m: ModelSpec, ceil: Ceilings, tp: int, tokens: int) -> float:
    """Seconds of the tensor-parallel all-reduces of one forward: two per layer (attention out, MLP out) of
    tokens x hidden x 2 bytes, a ring moving 2 (tp - 1) / tp of it over the GPU's link (Ceilings.link_bytes_per_s)."""
    if tp <= 1 or ceil.link_bytes_per_s <= 0:
        return 0.0
    size = tokens * m.hidden_size * dtype_bytes(m.dtype)
    per = ALLREDUCE_LATENCY_S + 2 * (tp - 1) / tp * size / ceil.link_bytes_per_s
    return 2 * m.num_layers * per
