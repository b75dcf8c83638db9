"""vLLM's KV pages per layer (vllm/v1/kv_cache_interface.py@0.32.0): attention / MLA / sliding-window bytes per
token with KV-head replication, Mamba2 / Mamba1 / Gated-DeltaNet state pages, and the hybrid block-size alignment
with its Mamba padding. Pure functions of numbers."""

from __future__ import annotations

from dataclasses import dataclass

from specbench.engines.vllm.common import cdiv
from specbench.errors import FlagError

# --------------------------------------------------------------------------------------------- layer specs


@dataclass(frozen=True)
class LayerSpec:
    """One layer's KV spec after the backend (vllm/v1/kv_cache_interface.py)."""

    kind: str                 # "full" | "sliding" | "mla" | "mamba"
    block_size: int
    page: int                 # page_size_bytes (padded where vLLM pads)
    real_page: int            # the unpadded content
    window: int | None = None  # sliding window
    mamba_blocks_none: int = 1  # per-request pages in 'none' mode: 1 + num_speculative_blocks
    mamba_extra_align: int = 0  # num_speculative_blocks + num_prefill_checkpoint_blocks
    draft: bool = False

    @property
    def key(self) -> tuple:
        """Spec equality as vLLM's dataclass eq (draft flag excluded)."""
        return (self.kind, self.block_size, self.page, self.real_page, self.window, self.mamba_blocks_none,
                self.mamba_extra_align)


def attention_bytes_per_token(kv_heads_rank: int, head_k: int, head_v: int, kv_dtype_bytes: int) -> int:
    """kv_cache_interface.py::AttentionSpec.page_size_bytes for block_size 1: h_kv·(d_k + d_v)·s."""
    return kv_heads_rank * (head_k + head_v) * kv_dtype_bytes


def kv_heads_per_rank(total_kv_heads: int, tp: int) -> int:
    """config/model.py::ModelConfig.get_num_kv_heads: max(1, total // tp) (replicated when total < tp)."""
    return max(1, total_kv_heads // tp)


def _divide(a: int, b: int, what: str) -> int:
    if a % b:
        raise FlagError(f"{what} ({a}) is not divisible by the tensor parallel size ({b})")
    return a // b


def gdn_state_bytes(num_k_heads: int, num_v_heads: int, head_k: int, head_v: int, conv_kernel: int, tp: int, k: int,
                    conv_bytes: int, ssm_bytes: int) -> tuple[int, int]:
    """mamba_utils.py::MambaStateShapeCalculator.gated_delta_net_state_shape: conv (K-1+k, (2·Hk·dk + Hv·dv)/tp),
    temporal (Hv/tp, dv, dk). Returns (conv bytes, ssm bytes)."""
    conv_dim = _divide(head_k * num_k_heads * 2 + head_v * num_v_heads, tp, "GDN conv dim")
    conv = (conv_kernel - 1 + k) * conv_dim * conv_bytes
    ssm = _divide(num_v_heads, tp, "linear_num_value_heads") * head_v * head_k * ssm_bytes
    return conv, ssm


def mamba2_state_bytes(intermediate: int, n_groups: int, num_heads: int, head_dim: int, state_size: int,
                       conv_kernel: int, tp: int, k: int, conv_bytes: int, ssm_bytes: int) -> tuple[int, int]:
    """mamba_utils.py::MambaStateShapeCalculator.mamba2_state_shape (+ extra_groups_for_head_shards)."""
    g = n_groups + (0 if n_groups % tp == 0 else tp - n_groups)
    conv_dim = intermediate + 2 * g * state_size
    conv = (conv_kernel - 1 + k) * _divide(conv_dim, tp, "Mamba2 conv dim") * conv_bytes
    ssm = _divide(num_heads, tp, "mamba_num_heads") * head_dim * state_size * ssm_bytes
    return conv, ssm


def mamba1_state_bytes(intermediate: int, state_size: int, conv_kernel: int, tp: int, conv_bytes: int,
                       ssm_bytes: int) -> tuple[int, int]:
    """mamba_utils.py::MambaStateShapeCalculator.mamba1_state_shape: conv (K-1, I/tp), temporal (I/tp, N)."""
    i = _divide(intermediate, tp, "mamba intermediate size")
    return (conv_kernel - 1) * i * conv_bytes, i * state_size * ssm_bytes


@dataclass(frozen=True)
class HybridAlignment:
    block_size: int
    mamba_page: int            # unpadded
    page: int                  # attention page = padded Mamba page
    padding_pct: float | None  # None when nothing was padded
    enlarged: bool


def align_hybrid_block_size(block_size: int, a1: int, mamba_page: int, kernel_alignment: int,
                            backend_alignment: int) -> HybridAlignment:
    """platforms/interface.py::Platform._align_hybrid_block_size (0.20+):
    bs' = A·cdiv(m, A·a1), rounded up to the backends' lcm; only grows; Mamba page padded to bs·a1."""
    bs = kernel_alignment * cdiv(mamba_page, kernel_alignment * a1)
    bs = backend_alignment * cdiv(bs, backend_alignment)
    enlarged = block_size < bs
    if enlarged:
        block_size = bs
    page = block_size * a1
    pad = None if page == mamba_page else 100 * (page - mamba_page) / mamba_page
    return HybridAlignment(block_size, mamba_page, page, pad, enlarged)
