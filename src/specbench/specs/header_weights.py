"""Exact weight bytes per GPU from a checkpoint's safetensors headers: dtype x shape per tensor, split by its role
under tensor parallelism, as SGLang and vLLM shard them.

Pure: the tensors come from `specs/hub.py` through `ModelSpec.origin` (`specs/resolve.py::ModelOrigin`).

Role rules (the same in both engines; SGLang's layers are ports of vLLM's):
- column-parallel linears (q/k/v/qkv, gate/up/gate_up, w1/w3, MLA q_b/kv_b, Mamba/GDN in_proj*, vision fc1/qkv)
  hold out/tp rows (vllm/model_executor/layers/linear.py::ColumnParallelLinear, QKVParallelLinear,
  MergedColumnParallelLinear; sglang/srt/layers/linear.py, the same classes);
- KV heads are replicated when num_kv_heads < tp: each rank holds max(1, kv/tp) heads
  (linear.py::QKVParallelLinear: `num_kv_head_replicas = divide(tp_size, total_num_kv_heads)`);
- row-parallel linears (o_proj, down_proj, w2, out_proj, dense, fc2, vision proj) hold in/tp columns, their bias
  whole (linear.py::RowParallelLinear: the bias is added once after the all-reduce and kept on every rank);
- replicated: norms, the MoE router (`mlp.gate`, `router`; sglang/srt/models/qwen2_moe.py::Qwen2MoeSparseMoeBlock
  `gate = ReplicatedLinear`), `e_score_correction_bias`, MLA `q_a_proj` / `kv_a_proj_with_mqa`
  (sglang/srt/models/deepseek_v2.py: ReplicatedLinear), a drafter's `fc` (sglang/srt/models/llama_eagle3.py and
  dflash.py: a plain torch.nn.Linear);
- MoE experts under TP hold 1/tp of every expert (sglang/srt/layers/moe/fused_moe_triton/layer.py::FusedMoE,
  intermediate_size_per_partition); Mamba2 conv1d / A_log / D / dt_bias / gated norm are split by heads
  (vllm/model_executor/layers/mamba/mamba_mixer2.py);
- embeddings and lm_head: rows padded to a multiple of 64, then 1/tp (vocab_parallel_embedding.py::
  DEFAULT_VOCAB_PADDING_SIZE = 64, pad_vocab_size; both engines); a tied lm_head is the embedding, counted once;
- quantization scales (weight_scale, weight_scale_inv, input_scale, qweight/qzeros/scales/g_idx, *_blocks,
  *_scales) are sharded with their weight; a per-tensor scale (<= 1 element) is kept whole;
- float tensors are loaded in the model dtype (the engines build the model under set_default_torch_dtype(
  model_config.dtype): vllm/model_executor/model_loader/utils.py, sglang/srt/model_loader/loader.py) except
  quantization scales, which are created float32; integer / fp8 / packed tensors keep their stored dtype;
- skipped: built-in MTP layers for the target (`mtp.*`, `model.layers.{i >= num_hidden_layers}`: DeepSeek's NextN
  layer; sglang/srt/models/deepseek_v2.py::load_weights skips them), vision / audio towers with
  `--language-only` / `--language-model-only`, a DFlash drafter's embed/lm_head (dflash.py borrows the target's),
  EAGLE3's `t2d` (llama_eagle3.py::load_weights). GPTQ's qzeros / g_idx, which Marlin frees after loading, are
  counted: the freed bytes stay reserved (specs/quant.py has the boots).
- an EAGLE3 drafter whose checkpoint has no embed_tokens still allocates one (llama_eagle3.py::LlamaModel.__init__
  builds VocabParallelEmbedding(config.vocab_size)) and it is counted.

Online quantization (`--quantization fp8` of a bf16 checkpoint: the spec's quantization is not the checkpoint's)
falls back to the config estimate. Not modelled: a checkpoint the engine re-lays out at load (MXFP4 experts for
the Hopper kernels, ~15% more than stored per issue #12): the header gives the stored bytes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

from specbench.errors import ConfigError
from specbench.specs.dtypes import TENSOR_BYTES, canonical, dtype_bytes

VOCAB_PADDING = 64  # vocab_parallel_embedding.py::DEFAULT_VOCAB_PADDING_SIZE (vLLM and SGLang)

# safetensors dtype names (safetensors/src/tensor.rs::Dtype) -> the names of specs/dtypes.py's table; F4 is one
# e2m1 value per element (half a byte), where the table's fp4 counts a packed pair
_ST_NAMES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "F8_E4M3": "float8_e4m3fn",
             "F8_E5M2": "float8_e5m2", "F8_E8M0": "float8_e8m0fnu", "I64": "int64", "I32": "int32", "I16": "int16",
             "I8": "int8", "U64": "uint64", "U32": "uint32", "U16": "uint16", "U8": "uint8", "BOOL": "bool"}
_FLOAT = {"F64", "F32", "F16", "BF16"}
_LOAD_DTYPES = ("float32", "float", "bfloat16", "float16", "half")  # model dtypes float tensors are loaded in

_COLUMN = {"q_proj", "k_proj", "v_proj", "qkv_proj", "gate_proj", "up_proj", "gate_up_proj", "w1", "w3",
           "q_b_proj", "kv_b_proj", "in_proj", "in_proj_qkvz", "in_proj_ba", "in_proj_qkv", "in_proj_z",
           "in_proj_a", "in_proj_b", "fc1", "linear_fc1", "query_key_value", "c_fc", "qkv", "c_attn", "wqkv",
           "shared_expert_up", "up", "gate_up"}
_ROW = {"o_proj", "down_proj", "w2", "out_proj", "dense", "fc2", "linear_fc2", "c_proj", "proj", "wo", "down",
        "dense_4h_to_h"}
_REPLICATED = {"gate", "router", "q_a_proj", "kv_a_proj_with_mqa", "fused_qkv_a_proj_with_mqa", "fc",
               "shared_expert_gate", "hidden_norm", "enorm", "hnorm", "eh_proj"}
_VOCAB = {"embed_tokens", "lm_head", "wte", "word_embeddings", "embed_in", "embed_out", "tok_embeddings",
          "output", "embedding"}
_SPLIT_LEAVES = {"A_log", "D", "dt_bias", "sinks"}
_SCALE = re.compile(r"(scale|scales|scale_inv|scale_2|qzeros|g_idx|zeros)$")
_VISION = ("visual.", "vision_tower", "vision_model", "multi_modal_projector", "mm_projector", "audio_tower",
           "vision_encoder", "merger.")
_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")


def _pad(n: int, to: int) -> int:
    return -(-n // to) * to


def _kv_fraction(m: Any, tp: int, mod: str) -> float:
    """Share of a q/k/v (or fused qkv) tensor one rank holds, KV heads replicated below tp."""
    nq, nkv, hd = m.num_attention_heads, max(1, m.num_kv_heads), m.head_dim
    kv_per_rank = max(1.0, nkv / tp)
    if mod in ("k_proj", "v_proj"):
        return kv_per_rank / nkv
    if mod == "q_proj":
        return 1.0 / tp
    q = nq * hd * (2 if m.attn_output_gate else 1)
    return (q / tp + 2 * hd * kv_per_rank) / (q + 2 * nkv * hd)


def _module(name: str) -> tuple[str, str, str]:
    """(path before the module, module name, leaf): `model.layers.0.self_attn.k_proj.weight_scale` ->
    (`model.layers.0.self_attn`, `k_proj`, `weight_scale`)."""
    parts = name.split(".")
    if len(parts) == 1:
        return "", parts[0], ""
    leaf = parts[-1]
    return ".".join(parts[:-2]), parts[-2], leaf


def _fused_expert_module(leaf: str) -> str | None:
    """gpt-oss style fused experts `experts.gate_up_proj_blocks` / `experts.down_proj_bias` -> the linear."""
    for base in ("gate_up_proj", "down_proj"):
        if leaf.startswith(base):
            return base
    return None


def _share(m: Any, tp: int, name: str, shape: tuple[int, ...]) -> tuple[float, str]:
    """(share one rank holds, role)."""
    path, mod, leaf = _module(name)
    numel = math.prod(shape) if shape else 1
    if mod == "experts" and _fused_expert_module(leaf):  # gpt-oss: model.layers.N.mlp.experts.gate_up_proj_bias
        mod, leaf = _fused_expert_module(leaf) or mod, leaf.split("_")[-1]
    is_scale = bool(_SCALE.search(leaf)) or leaf in ("qweight", "blocks", "scales")
    if is_scale and numel <= 1:
        return 1.0, "replicated"
    if "norm" in mod or mod in ("ln_f", "ln_1", "ln_2"):
        return (1.0 / tp, "split") if mod == "norm" and path.endswith("mixer") else (1.0, "replicated")
    if leaf in _SPLIT_LEAVES or mod in ("conv1d",):
        return 1.0 / tp, "split"
    if leaf == "e_score_correction_bias" or mod in _REPLICATED:
        return 1.0, "replicated"
    if mod in _VOCAB:
        return 0.0, "vocab"  # sized by the caller
    if mod in ("q_proj", "k_proj", "v_proj", "qkv_proj", "query_key_value", "wqkv") and "self_attn" in path:
        return _kv_fraction(m, tp, mod), "column"
    if mod in _COLUMN:
        return 1.0 / tp, "column"
    if mod in _ROW:
        return (1.0, "replicated") if leaf == "bias" else (1.0 / tp, "row")
    return (1.0 / tp, "split") if len(shape) >= 2 else (1.0, "replicated")


def _skipped(m: Any, name: str, *, include_vision: bool, draft_kind: str | None) -> bool:
    if not include_vision and any(v in name for v in _VISION):
        return True
    if draft_kind is None:
        if name.startswith(("mtp.", "model.mtp.")):
            return True
        lay = _LAYER.search(name)
        if lay and m.mtp_layers and int(lay.group(1)) >= m.num_layers:
            return True
    if draft_kind == "eagle3" and name.endswith("t2d"):
        return True
    if draft_kind == "dflash":
        return _module(name)[1] in ("embed_tokens", "lm_head")
    return False


def _elem_bytes(dtype: str, name: str, load: float | None) -> float:
    d = dtype.upper()
    if d == "F4":
        return 0.5
    if d not in _ST_NAMES:  # never a silent 2 bytes
        raise ConfigError(f"safetensors header: tensor {name!r} has dtype {dtype!r}, which this planner cannot size "
                          f"(known: F4, {', '.join(_ST_NAMES)})")
    b = TENSOR_BYTES[_ST_NAMES[d]]
    if dtype.upper() in _FLOAT and load is not None and not _SCALE.search(name.rsplit(".", 1)[-1]):
        return load
    return b


def tensor_bytes(m: Any, tensors: Iterable[tuple[str, str, tuple[int, ...]]], tp: int, *,
                 include_vision: bool = True, draft_kind: str | None = None) -> int:
    """Bytes one of `tp` ranks holds for these tensors of model `m` (a ModelSpec)."""
    tp = max(1, tp)
    dt = canonical(str(m.dtype))
    load = dtype_bytes(dt) if dt in _LOAD_DTYPES else None
    tensors = list(tensors)
    names = {n for n, _d, _s in tensors}
    has_embed = any(_module(n)[1] in ("embed_tokens", "wte", "word_embeddings", "tok_embeddings") for n in names)
    total = 0.0
    for name, dtype, shape in tensors:
        if _skipped(m, name, include_vision=include_vision, draft_kind=draft_kind):
            continue
        eb = _elem_bytes(dtype, name, load)
        share, role = _share(m, tp, name, shape)
        if role == "vocab":
            if _module(name)[1] in ("lm_head", "embed_out", "output") and m.tie_word_embeddings and has_embed:
                continue  # tied: the lm_head is the embedding
            rows = _pad(shape[0], VOCAB_PADDING) // tp if shape else 1
            total += rows * math.prod(shape[1:]) * eb
            continue
        total += math.ceil(math.prod(shape) * share) * eb if shape else eb
    if draft_kind in ("eagle3", "eagle") and not has_embed:
        total += (_pad(m.vocab_size, VOCAB_PADDING) // tp) * m.hidden_size * (load or 2)
    return int(total)


def header_weight_bytes(m: Any, tp: int, *, include_vision: bool = True, as_draft: bool = False) -> int | None:
    """Bytes per rank from the model's safetensors headers; None without headers or when the engine converts the
    checkpoint at load (online quantization: the spec's quantization is not the checkpoint's)."""
    origin = getattr(m, "origin", None)
    tensors = getattr(origin, "tensors", None)
    if not tensors:
        return None
    if getattr(origin, "quant_method", None) != m.quant.method:
        return None
    kind = m.draft.kind if (as_draft and m.draft is not None) else ("separate" if as_draft else None)
    return tensor_bytes(m, tensors, tp, include_vision=include_vision, draft_kind=kind)


WEIGHTS_SOURCE = "safetensors headers"
ESTIMATE_ERROR = ("weights estimated from config.json (no safetensors header was reachable): the expected error "
                  "for this kind of checkpoint is `weights_estimate_error`, with the H200 boots it rests on "
                  "(tests/data/sglang-*); a reachable checkpoint's safetensors headers give the exact bytes")
