"""The frozen value a Hugging Face `config.json` is read into (`ModelSpec`) and its parts: MLA, MoE, Gated
DeltaNet, Mamba, vision tower, drafter metadata. Read by `specs/model.py::model_spec_from_dict`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from specbench.specs.quant import QuantSpec


@dataclass(frozen=True)
class MlaSpec:
    kv_lora_rank: int
    qk_rope_head_dim: int
    qk_nope_head_dim: int
    v_head_dim: int
    q_lora_rank: int | None


@dataclass(frozen=True)
class MoeSpec:
    num_experts: int
    experts_per_tok: int
    moe_intermediate_size: int
    shared_intermediate_size: int  # total width of shared expert(s); 0 if none
    moe_layers: tuple[int, ...]    # layer ids whose MLP is MoE
    latent_size: int = 0           # Nemotron-3-Super `moe_latent_size`: routed experts work in this dim, not hidden


@dataclass(frozen=True)
class GdnSpec:
    """Gated DeltaNet (Qwen3-Next / Qwen3.5 / 3.6) linear-attention shapes."""

    num_key_heads: int
    num_value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel: int

    @property
    def key_dim(self) -> int:
        return self.num_key_heads * self.key_head_dim

    @property
    def value_dim(self) -> int:
        return self.num_value_heads * self.value_head_dim


@dataclass(frozen=True)
class Mamba2Spec:
    """Mamba2 mixer (Nemotron-H, Falcon-H1) or Mamba1 (`version=1`: Mamba, FalconMamba, Jamba)."""

    intermediate: int     # d_inner = expand * hidden (or mamba_d_ssm)
    n_groups: int
    num_heads: int
    head_dim: int
    state_size: int
    conv_kernel: int
    version: int = 2
    time_step_rank: int = 0  # Mamba1 dt_rank


@dataclass(frozen=True)
class VisionSpec:
    params: int
    label: str


@dataclass(frozen=True)
class DraftInfo:
    kind: str                       # "dflash", "eagle3", "eagle", "mtp"
    block_size: int | None = None   # DFlash block size (D) from the drafter config
    target_layer_ids: tuple[int, ...] = ()
    draft_vocab_size: int | None = None


@dataclass(frozen=True)
class ModelSpec:
    name: str
    architecture: str
    model_type: str
    dtype: str
    hidden_size: int
    num_layers: int
    vocab_size: int
    tie_word_embeddings: bool
    intermediate_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    v_head_dim: int
    attn_output_gate: bool
    attention_layers: tuple[int, ...]     # layers that hold KV
    linear_layers: tuple[int, ...]        # GDN / Mamba layers (hold recurrent state)
    sliding_layers: tuple[int, ...] = ()  # subset of attention_layers with a sliding window
    sliding_window: int | None = None
    mla: MlaSpec | None = None
    moe: MoeSpec | None = None
    gdn: GdnSpec | None = None
    mamba: Mamba2Spec | None = None
    mamba_ssm_dtype: str | None = None
    mlp_layers: tuple[int, ...] = ()      # layers with a dense MLP (all for most models)
    vision: VisionSpec | None = None
    mtp_layers: int = 0                   # built-in MTP / NextN layers (not loaded unless used as the draft)
    draft: DraftInfo | None = None
    max_position_embeddings: int | None = None
    quant: QuantSpec = field(default_factory=QuantSpec)
    attention_bias: bool = False
    # groups of fields a stand-in assumed rather than read from the checkpoint (specs/assumed.py): they feed the
    # numbers, never a start check's verdict
    assumed: frozenset[str] = frozenset()
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    origin: Any = field(default=None, repr=False, compare=False)  # specs/resolve.py::ModelOrigin: where it came from

    @property
    def is_mla(self) -> bool:
        return self.mla is not None

    @property
    def is_multimodal(self) -> bool:
        return self.vision is not None

    @property
    def family(self) -> str:
        if self.gdn is not None:
            return "hybrid-gdn"
        if self.mamba is not None:
            return "hybrid-mamba" if self.attention_layers else "mamba"
        if self.mla is not None:
            return "mla"
        return "dense"

    @cached_property
    def kind_label(self) -> str:
        parts = [self.architecture]
        if self.gdn is not None:
            parts.append(f"{len(self.attention_layers)} full-attention + {len(self.linear_layers)} Gated-DeltaNet layers")
        elif self.mamba is not None:
            parts.append(f"{len(self.attention_layers)} attention + {len(self.linear_layers)} Mamba{self.mamba.version} layers")
        elif self.mla is not None:
            parts.append(f"{self.num_layers} MLA layers")
        else:
            parts.append(f"{self.num_layers} layers, {self.num_kv_heads} KV heads x {self.head_dim}")
        if self.moe is not None:
            parts.append(f"MoE {self.moe.num_experts}x top-{self.moe.experts_per_tok}")
        return ", ".join(parts)
