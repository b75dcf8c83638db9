"""Random float32 weights for the tiny models as a numpy state dict, in the Hugging Face checkpoint layout.

Names and shapes follow the real checkpoints (Qwen/Qwen3-* for `qwen3`, Qwen/Qwen3-Next-80B-A3B for
`qwen3_next`, per-expert `mlp.experts.{e}.*_proj.weight`), which is what vLLM's loaders read.
Scale: every matrix ~ N(0, 0.02^2) (`initializer_range` 0.02, the HF default), so a residual stream of
RMS-normalised activations gives logits with a standard deviation of about 0.02 * sqrt(hidden): sane
numbers, near-uniform sampling, no NaNs. Norm weights are the identity of each norm kind: 1 for plain RMSNorm
(Qwen3, and Qwen3-Next's gated `linear_attn.norm`), 0 for Qwen3-Next's zero-centred (1 + w) RMSNorms.
Deterministic: one `numpy.random.default_rng(spec.seed)` consumed in a fixed tensor order.
"""

from __future__ import annotations

import numpy as np

from specbench.models_gen.shapes import TinyModelSpec

INIT_STD = 0.02  # HF `initializer_range` default

StateDict = dict[str, np.ndarray]


class _Init:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def normal(self, *shape: int, std: float = INIT_STD) -> np.ndarray:
        return (self.rng.standard_normal(shape, dtype=np.float32) * np.float32(std)).astype(np.float32)

    @staticmethod
    def full(value: float, *shape: int) -> np.ndarray:
        return np.full(shape, value, dtype=np.float32)


def state_dict(spec: TinyModelSpec) -> StateDict:
    """All tensors of `spec`, keyed by their checkpoint names."""
    if spec.arch == "qwen3":
        return _qwen3(spec)
    if spec.arch == "qwen3_next":
        return _qwen3_next(spec)
    raise ValueError(f"unknown arch {spec.arch}")


def param_count(sd: StateDict) -> int:
    return int(sum(t.size for t in sd.values()))


def _attention(sd: StateDict, p: str, s: TinyModelSpec, init: _Init, *, gated: bool, norm_one: float) -> None:
    h, q_out, kv_out = s.hidden_size, s.num_attention_heads * s.head_dim, s.num_key_value_heads * s.head_dim
    sd[p + "self_attn.q_proj.weight"] = init.normal(q_out * (2 if gated else 1), h)  # Qwen3-Next: query + gate
    sd[p + "self_attn.k_proj.weight"] = init.normal(kv_out, h)
    sd[p + "self_attn.v_proj.weight"] = init.normal(kv_out, h)
    sd[p + "self_attn.o_proj.weight"] = init.normal(h, q_out)
    sd[p + "self_attn.q_norm.weight"] = init.full(norm_one, s.head_dim)
    sd[p + "self_attn.k_norm.weight"] = init.full(norm_one, s.head_dim)


def _mlp(sd: StateDict, p: str, hidden: int, inter: int, init: _Init) -> None:
    sd[p + "gate_proj.weight"] = init.normal(inter, hidden)
    sd[p + "up_proj.weight"] = init.normal(inter, hidden)
    sd[p + "down_proj.weight"] = init.normal(hidden, inter)


def _qwen3(s: TinyModelSpec) -> StateDict:
    init, sd = _Init(s.seed), {}
    sd["model.embed_tokens.weight"] = init.normal(s.vocab_size, s.hidden_size)
    for i in range(s.num_hidden_layers):
        p = f"model.layers.{i}."
        sd[p + "input_layernorm.weight"] = init.full(1.0, s.hidden_size)
        _attention(sd, p, s, init, gated=False, norm_one=1.0)
        sd[p + "post_attention_layernorm.weight"] = init.full(1.0, s.hidden_size)
        _mlp(sd, p + "mlp.", s.hidden_size, s.intermediate_size, init)
    sd["model.norm.weight"] = init.full(1.0, s.hidden_size)
    if not s.tie_word_embeddings:
        sd["lm_head.weight"] = init.normal(s.vocab_size, s.hidden_size)
    return sd


def _gated_deltanet(sd: StateDict, p: str, s: TinyModelSpec, init: _Init) -> None:
    h = s.hidden_size
    key_dim = s.linear_num_key_heads * s.linear_key_head_dim
    value_dim = s.linear_num_value_heads * s.linear_value_head_dim
    conv_dim = 2 * key_dim + value_dim  # q, k, v go through the causal conv; z does not
    nv = s.linear_num_value_heads
    sd[p + "linear_attn.in_proj_qkvz.weight"] = init.normal(2 * key_dim + 2 * value_dim, h)
    sd[p + "linear_attn.in_proj_ba.weight"] = init.normal(2 * nv, h)
    sd[p + "linear_attn.conv1d.weight"] = init.normal(conv_dim, 1, s.linear_conv_kernel_dim,
                                                      std=1.0 / s.linear_conv_kernel_dim)
    sd[p + "linear_attn.dt_bias"] = init.full(1.0, nv)
    # A = -exp(A_log) in (-16, -1): the decay rates HF initialises with (uniform 1..16).
    sd[p + "linear_attn.A_log"] = np.log(init.rng.uniform(1.0, 16.0, size=nv)).astype(np.float32)
    sd[p + "linear_attn.norm.weight"] = init.full(1.0, s.linear_value_head_dim)
    sd[p + "linear_attn.out_proj.weight"] = init.normal(h, value_dim)


def _qwen3_next(s: TinyModelSpec) -> StateDict:
    init, sd = _Init(s.seed), {}
    h = s.hidden_size
    sd["model.embed_tokens.weight"] = init.normal(s.vocab_size, h)
    for i, kind in enumerate(s.layer_types):
        p = f"model.layers.{i}."
        sd[p + "input_layernorm.weight"] = init.full(0.0, h)
        if kind == "linear_attention":
            _gated_deltanet(sd, p, s, init)
        else:
            _attention(sd, p, s, init, gated=True, norm_one=0.0)
        sd[p + "post_attention_layernorm.weight"] = init.full(0.0, h)
        sd[p + "mlp.gate.weight"] = init.normal(s.num_experts, h)
        for e in range(s.num_experts):
            _mlp(sd, p + f"mlp.experts.{e}.", h, s.moe_intermediate_size, init)
        _mlp(sd, p + "mlp.shared_expert.", h, s.shared_expert_intermediate_size, init)
        sd[p + "mlp.shared_expert_gate.weight"] = init.normal(1, h)
    sd["model.norm.weight"] = init.full(0.0, h)
    if not s.tie_word_embeddings:
        sd["lm_head.weight"] = init.normal(s.vocab_size, h)
    return sd
