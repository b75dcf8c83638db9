"""Parameter counts per module and weight bytes per GPU under tensor parallelism.

Module names follow the HF checkpoints (so a checkpoint's quantization map applies by name). Sharding follows
SGLang's parallel layers (sglang/srt/layers/linear.py: ColumnParallelLinear splits the output dim,
RowParallelLinear the input dim, QKVParallelLinear keeps one KV head per rank when num_kv_heads < tp, i.e.
replicates it; vocab_parallel_embedding.py::pad_vocab_size pads the vocabulary to a multiple of 64,
DEFAULT_VOCAB_PADDING_SIZE, not of 64·tp, and VocabParallelEmbedding splits the padded rows over the TP ranks).
Small tensors (norms, biases, A_log, dt_bias, conv weights) are counted too, replicated or split as the layers do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from specbench.specs.memo import per_spec
from specbench.specs.model_types import ModelSpec
from specbench.specs.quant import MXFP4, Scheme

MXFP4_BYTES_PER_PARAM = MXFP4.bytes_per_param  # 4-bit value + one e8m0 scale per 32


@dataclass(frozen=True)
class Tensor:
    name: str          # HF module name (normalised, no "model." prefix), e.g. "layers.3.mlp.up_proj"
    params: int        # parameters on ONE rank
    linear: bool       # a quantizable linear weight
    expert: bool = False
    group: str = "other"  # embed, lm_head, attention, linear_attn, mamba, mlp, moe, norm, vision, mtp


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _pad_vocab(vocab: int, tp: int) -> int:
    """sglang/srt/layers/vocab_parallel_embedding.py::pad_vocab_size (DEFAULT_VOCAB_PADDING_SIZE = 64)."""
    return _ceil_div(vocab, 64) * 64


def _round_up(a: int, b: int) -> int:
    return _ceil_div(a, b) * b if b > 1 else a


def tensors_per_rank(m: ModelSpec, tp: int, *, include_vision: bool = True,
                     moe_pad: tuple[int, int] = (1, 1)) -> list[Tensor]:
    """`moe_pad` = (hidden, intermediate) alignment the engine's MoE kernel pads the routed experts to (the MXFP4
    backends: `engines/<engine>/` names it per GPU; (1, 1) = none)."""
    t = max(1, tp)
    h = m.hidden_size
    out: list[Tensor] = []
    vocab_rank = _ceil_div(_pad_vocab(m.vocab_size, t), t)
    out.append(Tensor("embed_tokens", vocab_rank * h, False, group="embed"))
    if not m.tie_word_embeddings:
        out.append(Tensor("lm_head", vocab_rank * h, True, group="lm_head"))
    out.append(Tensor("norm", h, False, group="norm"))
    attn = set(m.attention_layers)
    lin = set(m.linear_layers)
    moe_layers = set(m.moe.moe_layers) if m.moe else set()
    mlp_layers = set(m.mlp_layers)
    for i in range(m.num_layers):
        p = f"layers.{i}"
        out.append(Tensor(f"{p}.norms", 2 * h, False, group="norm"))
        if i in attn and m.num_attention_heads:
            out.extend(_attention(m, p, t))
        if i in lin:
            out.extend(_linear_attention(m, p, t))
        if i in moe_layers:
            out.extend(_moe(m, p, t, moe_pad))
        elif i in mlp_layers:
            out.extend(_mlp(m, p, t, m.intermediate_size))
    if include_vision and m.vision is not None:
        out.append(Tensor("visual", _ceil_div(m.vision.params, t), False, group="vision"))
    return out


def _attention(m: ModelSpec, p: str, t: int) -> list[Tensor]:
    h = m.hidden_size
    if m.mla is not None:
        a = m.mla
        heads = _ceil_div(m.num_attention_heads, t)
        qk = a.qk_nope_head_dim + a.qk_rope_head_dim
        res = []
        if a.q_lora_rank:
            res.append(Tensor(f"{p}.self_attn.q_a_proj", h * a.q_lora_rank, True, group="attention"))
            res.append(Tensor(f"{p}.self_attn.q_b_proj", a.q_lora_rank * heads * qk, True, group="attention"))
        else:
            res.append(Tensor(f"{p}.self_attn.q_proj", h * heads * qk, True, group="attention"))
        res.append(Tensor(f"{p}.self_attn.kv_a_proj_with_mqa", h * (a.kv_lora_rank + a.qk_rope_head_dim), True,
                          group="attention"))
        res.append(Tensor(f"{p}.self_attn.kv_b_proj", a.kv_lora_rank * heads * (a.qk_nope_head_dim + a.v_head_dim),
                          True, group="attention"))
        res.append(Tensor(f"{p}.self_attn.o_proj", heads * a.v_head_dim * h, True, group="attention"))
        return res
    heads = _ceil_div(m.num_attention_heads, t)
    kv = max(1, m.num_kv_heads // t) if m.num_kv_heads else heads
    q_out = heads * m.head_dim * (2 if m.attn_output_gate else 1)
    bias = m.attention_bias
    return [
        Tensor(f"{p}.self_attn.q_proj", h * q_out + (q_out if bias else 0), True, group="attention"),
        Tensor(f"{p}.self_attn.k_proj", h * kv * m.head_dim + (kv * m.head_dim if bias else 0), True, group="attention"),
        Tensor(f"{p}.self_attn.v_proj", h * kv * m.v_head_dim + (kv * m.v_head_dim if bias else 0), True, group="attention"),
        Tensor(f"{p}.self_attn.o_proj", heads * m.v_head_dim * h, True, group="attention"),
        Tensor(f"{p}.self_attn.qk_norm", 2 * m.head_dim, False, group="norm"),
    ]


def _linear_attention(m: ModelSpec, p: str, t: int) -> list[Tensor]:
    h = m.hidden_size
    if m.gdn is not None:
        g = m.gdn
        kd, vd, nv = g.key_dim // t, g.value_dim // t, max(1, g.num_value_heads // t)
        conv_dim = 2 * kd + vd
        if m.model_type.startswith("qwen3_5"):
            names = [(f"{p}.linear_attn.in_proj_qkv", h * (2 * kd + vd)), (f"{p}.linear_attn.in_proj_z", h * vd),
                     (f"{p}.linear_attn.in_proj_b", h * nv), (f"{p}.linear_attn.in_proj_a", h * nv)]
        else:
            names = [(f"{p}.linear_attn.in_proj_qkvz", h * (2 * kd + 2 * vd)),
                     (f"{p}.linear_attn.in_proj_ba", h * 2 * nv)]
        res = [Tensor(n, c, True, group="linear_attn") for n, c in names]
        res.append(Tensor(f"{p}.linear_attn.out_proj", vd * h, True, group="linear_attn"))
        res.append(Tensor(f"{p}.linear_attn.conv1d", conv_dim * g.conv_kernel, False, group="linear_attn"))
        res.append(Tensor(f"{p}.linear_attn.small", 2 * nv + g.value_head_dim, False, group="linear_attn"))
        return res
    mb = m.mamba
    assert mb is not None
    if mb.version == 1:
        d = mb.intermediate // t
        return [
            Tensor(f"{p}.mixer.in_proj", h * 2 * d, True, group="mamba"),
            Tensor(f"{p}.mixer.conv1d", d * mb.conv_kernel + d, False, group="mamba"),
            Tensor(f"{p}.mixer.x_proj", d * (mb.time_step_rank + 2 * mb.state_size), True, group="mamba"),
            Tensor(f"{p}.mixer.dt_proj", mb.time_step_rank * d + d, True, group="mamba"),
            Tensor(f"{p}.mixer.A_D", d * mb.state_size + d, False, group="mamba"),
            Tensor(f"{p}.mixer.out_proj", d * h, True, group="mamba"),
        ]
    d = mb.intermediate // t
    ng = max(1, _ceil_div(mb.n_groups, t))
    nh = max(1, mb.num_heads // t)
    conv_dim = d + 2 * ng * mb.state_size
    return [
        Tensor(f"{p}.mixer.in_proj", h * (2 * d + 2 * ng * mb.state_size + nh), True, group="mamba"),
        Tensor(f"{p}.mixer.conv1d", conv_dim * mb.conv_kernel + conv_dim, False, group="mamba"),
        Tensor(f"{p}.mixer.small", 3 * nh + d, False, group="mamba"),
        Tensor(f"{p}.mixer.out_proj", d * h, True, group="mamba"),
    ]


def _mlp(m: ModelSpec, p: str, t: int, inter: int) -> list[Tensor]:
    h = m.hidden_size
    i = _ceil_div(inter, t)
    # Nemotron-H uses a non-gated relu2 MLP: up_proj and down_proj only (config mlp_hidden_act = relu2).
    gated = str(m.raw.get("mlp_hidden_act", m.raw.get("hidden_act", "silu"))) != "relu2"
    res = [Tensor(f"{p}.mlp.up_proj", h * i, True, group="mlp"), Tensor(f"{p}.mlp.down_proj", i * h, True, group="mlp")]
    if gated:
        res.append(Tensor(f"{p}.mlp.gate_proj", h * i, True, group="mlp"))
    return res


def _moe(m: ModelSpec, p: str, t: int, pad: tuple[int, int] = (1, 1)) -> list[Tensor]:
    assert m.moe is not None
    h = m.hidden_size
    e = m.moe
    i = _round_up(_ceil_div(e.moe_intermediate_size, t), pad[1])
    # latent MoE (Nemotron-3-Super): the routed experts work in `moe_latent_size`, between two replicated
    # projections hidden -> latent -> hidden (sglang/srt/models/nemotron_h.py::NemotronHMoE.__init__@0.5.15.post1)
    hm = _round_up(e.latent_size or h, pad[0])
    gated = str(m.raw.get("mlp_hidden_act", "silu")) != "relu2"
    per_expert = hm * i * (3 if gated else 2)
    res = [Tensor(f"{p}.mlp.gate", h * e.num_experts, False, group="moe"),
           Tensor(f"{p}.mlp.experts", e.num_experts * per_expert, True, expert=True, group="moe")]
    if e.latent_size:
        res.append(Tensor(f"{p}.mlp.fc1_latent_proj", h * e.latent_size, True, group="moe"))
        res.append(Tensor(f"{p}.mlp.fc2_latent_proj", e.latent_size * h, True, group="moe"))
        res.append(Tensor(f"{p}.mlp.gate.e_score_correction_bias", 2 * e.num_experts, False, group="moe"))  # fp32
    if m.model_type == "gpt_oss":
        # gpt-oss experts carry bf16 biases: w13_bias (E, 2I), w2_bias (E, H) (layers/quantization/mxfp4.py::
        # Mxfp4MoEMethod.create_weights@0.5.15.post1), padded like the weights
        res.append(Tensor(f"{p}.mlp.experts.bias", e.num_experts * (2 * i + hm), False, group="moe"))
    if e.shared_intermediate_size:
        si = _ceil_div(e.shared_intermediate_size, t)
        res.append(Tensor(f"{p}.mlp.shared_expert", h * si * (3 if gated else 2), True, group="moe"))
    return res


def weight_bytes(m: ModelSpec, tp: int, *, include_vision: bool = True, scheme_override: Scheme | None = None,
                 moe_pad: tuple[int, int] = (1, 1), rope_itemsize: int = 0, mxfp4_hopper_swizzle: bool = False) -> int:
    """Bytes of weights on one GPU at tensor-parallel size `tp`; `moe_pad` as in `tensors_per_rank`;
    `rope_itemsize` > 0 adds the rotary cos/sin cache the engine builds at model init (`rope_cache_bytes`);
    `mxfp4_hopper_swizzle` adds what the triton_kernels MXFP4 path on sm90 keeps after loading
    (`mxfp4_hopper_swizzle_extra_bytes`)."""
    return per_spec("w", m, tp, include_vision, scheme_override, moe_pad, rope_itemsize, mxfp4_hopper_swizzle,
                 compute=lambda: _weight_bytes(m, tp, include_vision=include_vision, scheme_override=scheme_override,
                                               moe_pad=moe_pad) + rope_cache_bytes(m, rope_itemsize)
                 + (mxfp4_hopper_swizzle_extra_bytes(m, tp, moe_pad) if mxfp4_hopper_swizzle else 0))


# PyTorch caching-allocator blocks the swizzle leaves behind, per byte of swizzled expert values. Measured, not read
# from SGLang: a replay of gpt-oss-20b's allocation order and of Mxfp4MoEMethod.process_weights_after_loading on an
# H200 (torch 2.11, triton_kernels of sglang-kernel 0.4.4; tests/data/sglang-0.5.15.post1/gpt_oss_20b_swizzle_replay.py
# and .txt) ends with memory_allocated 13.64 GiB (= the formula below) but memory_reserved 15.02 GiB (the boot's
# `mem usage=15.02 GB`): 1.38 GiB of inactive split blocks in segments that empty_cache() cannot return, over
# 9.10 GiB of swizzled w13/w2 values. How it scales to other expert shapes (gpt-oss-120b) is not measured.
MXFP4_SWIZZLE_ALLOCATOR_RESIDUE = 0.152


def mxfp4_hopper_swizzle_extra_bytes(m: ModelSpec, tp: int, moe_pad: tuple[int, int] = (1, 64)) -> int:
    """Bytes the triton_kernels MXFP4 MoE path on Hopper holds beyond the checkpoint layout counted by `_moe`
    (layers/quantization/mxfp4.py::Mxfp4MoEMethod.process_weights_after_loading@0.5.15.post1, `use_triton_kernels`):
    - the biases become fp32 copies (`w13_weight_bias.to(torch.float32)`), the bf16 ones are dropped;
    - `_swizzle_mxfp4` converts w13/w2 values to HopperMXValueLayout, which pads both uint8 dims of the transposed
      (E, K/2, N) tensor to multiples of 64 (triton_kernels/tensor_details/layout_details/hopper_value.py::
      HopperMXValueLayout.swizzle_data, sglang-kernel 0.4.4), and the scales to HopperMXScaleLayout, which pads the
      non-MX dim to 2·num_warps·2·8 = 256 (num_warps = 8) and the MX dim to 2 (hopper_scale.py::swizzle_data);
    - only `layer.w13_weight` / `layer.w2_weight` are deleted: the unswizzled `w13_weight_scale` / `w2_weight_scale`
      Parameters stay registered beside the swizzled scales held in the PrecisionConfig;
    - plus the allocator residue `MXFP4_SWIZZLE_ALLOCATOR_RESIDUE` (measured).
    Returns 0 for models without MXFP4 routed experts."""
    if m.moe is None or m.quant.method != "mxfp4":
        return 0
    e = m.moe
    t = max(1, tp)
    h = _round_up(m.hidden_size, moe_pad[0])
    i = _round_up(_ceil_div(e.moe_intermediate_size, t), moe_pad[1])
    n = e.num_experts
    plain = n * 3 * h * i * MXFP4_BYTES_PER_PARAM + n * (2 * i + h) * 2  # what `_moe` counts: values+scales, bf16 bias
    w13_v = n * _round_up(h // 2, 64) * _round_up(2 * i, 64)
    w2_v = n * _round_up(i // 2, 64) * _round_up(h, 64)
    swz_scales = n * _round_up(2 * i, 256) * _round_up(h // 32, 2) + n * _round_up(h, 256) * _round_up(i // 32, 2)
    kept_scales = n * 2 * i * (h // 32) + n * h * (i // 32)
    bias32 = n * (2 * i + h) * 4
    per_layer = w13_v + w2_v + swz_scales + kept_scales + bias32 + MXFP4_SWIZZLE_ALLOCATOR_RESIDUE * (w13_v + w2_v)
    return int(len(e.moe_layers) * (per_layer - plain))


def rope_cache_bytes(m: ModelSpec, itemsize: int, max_positions: int | None = None) -> int:
    """The rotary embedding's `cos_sin_cache` buffer: (max_position_embeddings, rotary_dim) x itemsize, one per
    distinct rope (layers share it: layers/rotary_embedding/factory.py::get_rope caches by key). SGLang keeps it
    in fp32 on CUDA (layers/rotary_embedding/base.py::RotaryEmbedding.__init__@0.5.15.post1: "cache needs to be
    in FP32"), allocated with the model, so `Load weight end ... mem usage` includes it: Llama-3.1-8B logs 15.02 GB
    = 14.96 GiB of parameters + 131072 x 128 x 4 B (tests/data/sglang-0.5.15.post1/llama31_8b_mrr8.log).
    YaRN caches max_position x scaling = the config's max_position_embeddings (gpt-oss: 4096 x 32 = 131072).
    Nemotron-H attention has no rope (models/nemotron_h.py builds none)."""
    if itemsize <= 0 or not m.attention_layers or m.model_type == "nemotron_h":
        return 0
    pos = int(max_positions or m.max_position_embeddings or 0)
    if m.mla is not None:
        rot = m.mla.qk_rope_head_dim
    else:
        tc = m.raw.get("text_config")
        cfg: Mapping[str, Any] = tc if isinstance(tc, Mapping) else m.raw
        rpv = cfg.get("rope_parameters")
        rp: Mapping[str, Any] = rpv if isinstance(rpv, Mapping) else {}
        frac = float(rp.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 1.0)) or 1.0)
        rot = int(m.head_dim * frac)
    return pos * rot * itemsize


def _weight_bytes(m: ModelSpec, tp: int, *, include_vision: bool, scheme_override: Scheme | None,
                  moe_pad: tuple[int, int] = (1, 1)) -> int:
    total = 0.0
    dense = Scheme.dense(m.dtype)
    for ten in tensors_per_rank(m, tp, include_vision=include_vision, moe_pad=moe_pad):
        if not ten.linear:
            s = dense
        elif scheme_override is not None:
            s = scheme_override if ten.group not in ("lm_head",) else dense
        else:
            s = m.quant.scheme_for(ten.name, m.dtype, is_expert=ten.expert)
            if ten.group == "lm_head" and not m.quant.per_module:
                # checkpoints keep lm_head in the model dtype unless their per-module map lists it (HF FP8,
                # ModelOpt, AWQ/GPTQ exports all exclude it)
                s = dense
        total += ten.params * s.bytes_per_param
    return int(total)


def mtp_draft_tensors(m: ModelSpec, tp: int) -> list[Tensor]:
    """Built-in MTP / NextN draft (Qwen3.5/3.6 `mtp.*`, DeepSeek `num_nextn_predict_layers`): per layer one decoder
    layer (full attention + MLP/MoE), `fc`/`eh_proj` (2h -> h) and two norms; plus its own embed_tokens and
    lm_head, which SGLang allocates and only later replaces by the target's (measured: 4.60 GiB come back after the
pools are sized in tests/data/sglang-0.5.15.post1/q36_27b_mrr16_mf85_mtp.log)."""
    t = max(1, tp)
    h = m.hidden_size
    res: list[Tensor] = []
    vocab_rank = _ceil_div(_pad_vocab(m.vocab_size, t), t)
    res.append(Tensor("mtp.embed_tokens", vocab_rank * h, False, group="mtp"))
    res.append(Tensor("mtp.lm_head", vocab_rank * h, False, group="mtp"))
    for k in range(max(1, m.mtp_layers)):
        p = f"mtp.layers.{k}"
        res.extend(_attention(m, p, t))
        if m.moe is not None:
            res.extend(_moe(m, p, t))
        else:
            res.extend(_mlp(m, p, t, m.intermediate_size))
        res.append(Tensor(f"{p}.fc", 2 * h * h // t, True, group="mtp"))
        res.append(Tensor(f"{p}.norms", 5 * h, False, group="norm"))
    return res


def mtp_draft_bytes(m: ModelSpec, tp: int) -> int:
    return per_spec("mtp", m, tp, compute=lambda: _mtp_draft_bytes(m, tp))


def _mtp_draft_bytes(m: ModelSpec, tp: int) -> int:
    dense = Scheme.dense(m.dtype)
    total = 0.0
    for ten in mtp_draft_tensors(m, tp):
        s = dense
        if ten.linear and not m.quant.excluded_any("mtp"):
            s = m.quant.scheme_for(ten.name, m.dtype, is_expert=ten.expert)
        total += ten.params * s.bytes_per_param
    return int(total)


def draft_model_bytes(d: ModelSpec, tp: int, *, shares_target_embed: bool = False, rope_itemsize: int = 0,
                      max_positions: int | None = None) -> int:
    """`shares_target_embed`: the engine drops an EAGLE drafter's own embed_tokens before it measures the weights
    (vLLM: v1/spec_decode/llm_base_proposer.py::_maybe_share_embeddings@0.32.0 when the checkpoint has none);
    SGLang allocates it and only later points it at the target's (`set_embed`), so its log counts it."""
    return per_spec("draft", d, tp, shares_target_embed, rope_itemsize, max_positions,
                 compute=lambda: _draft_model_bytes(d, tp, shares_target_embed)
                 + rope_cache_bytes(d, rope_itemsize, max_positions))


def _draft_model_bytes(d: ModelSpec, tp: int, shares_target_embed: bool = False) -> int:
    """A separate drafter checkpoint (DFlash, EAGLE/EAGLE3).

    DFlash (sglang/srt/models/dflash.py::DFlashDraftModel.__init__@0.5.15.post1): no embedding, no lm_head; its
    layers, `fc` (len(target_layer_ids) x hidden -> hidden), hidden_norm and norm.
    EAGLE3 (models/llama_eagle3.py::LlamaModel/LlamaForCausalLMEagle3.__init__@0.5.15.post1): its OWN
    VocabParallelEmbedding(vocab_size, hidden); layer 0's qkv_proj reads 2·hidden (embeds + target hidden);
    `fc` = Linear(target_hidden_size x num_aux_hidden_states (3, or len(eagle_aux_hidden_state_layer_ids)),
    hidden); lm_head = ParallelLMHead(draft_vocab_size or vocab_size) unless tied; d2t/t2d are loaded into
    `hot_token_id` (draft_vocab int64, not a parameter: ignored here, < 1 MB).
    """
    t = max(1, tp)
    h = d.hidden_size
    total = 0.0
    dense = Scheme.dense(d.dtype)
    kind = d.draft.kind if d.draft else "separate"
    eagle = kind in ("eagle3", "eagle")
    for ten in tensors_per_rank(d, t, include_vision=False):
        if ten.group == "embed" and (kind == "dflash" or (eagle and shares_target_embed)):
            continue
        if ten.group == "lm_head" and kind == "dflash":
            continue
        if ten.group == "lm_head" and kind == "eagle3" and d.draft and d.draft.draft_vocab_size:
            dv = _ceil_div(_pad_vocab(int(d.draft.draft_vocab_size), t), t)
            total += dv * h * dense.bytes_per_param
            continue
        s = d.quant.scheme_for(ten.name, d.dtype) if ten.linear else dense
        total += ten.params * s.bytes_per_param
    if kind == "dflash" and d.draft:
        # fc: concat of the target hidden states at target_layer_ids -> hidden (dflash.py `fc`), plus hidden_norm.
        # DFlash drafters read 5 target layers unless their config lists them (SpecForge templates, dflash_config)
        n_t = max(1, len(d.draft.target_layer_ids) or 5)
        total += (n_t * h * h + h) * dense.bytes_per_param
    if kind == "eagle3":
        raw = d.raw
        h_in = int(raw.get("target_hidden_size") or h)
        ecv = raw.get("eagle_config")
        ec: Mapping[str, Any] = ecv if isinstance(ecv, Mapping) else {}
        n_aux = int(raw.get("num_aux_hidden_states") or len(ec.get("eagle_aux_hidden_state_layer_ids") or ()) or 3)
        total += n_aux * h_in * h * dense.bytes_per_param  # fc
        if d.attention_layers and d.num_attention_heads:  # layer 0's qkv_proj reads 2h: the extra h inputs
            heads, kv = _ceil_div(d.num_attention_heads, t), max(1, d.num_kv_heads // t)
            total += h * (heads + 2 * kv) * d.head_dim * dense.bytes_per_param
        total += h * dense.bytes_per_param  # hidden_norm
        if not shares_target_embed:
            total += eagle3_replaced_module_bytes(d, t)
    return int(total)


def eagle3_replaced_module_bytes(d: ModelSpec, tp: int) -> int:
    """What SGLang's EAGLE3 drafter still holds from the modules it replaces at init.

    models/llama_eagle3.py::LlamaDecoderLayer.__init__@0.5.15.post1 first runs models/llama.py::LlamaDecoderLayer.
    __init__ (a LlamaAttention whose qkv_proj reads `hidden`, a LlamaMLP), then assigns a new `self_attn.qkv_proj`
    (2·hidden at layer 0) and a new `self.mlp`. The old modules are unreachable but not freed: each parameter keeps
    its module's bound `weight_loader` (layers/linear.py create_weights -> set_weight_attrs), a reference cycle only
    Python's cyclic GC breaks, and no gc.collect() runs before `Load weight end` (the dummy loader,
    model_loader/loader.py::DummyModelLoader.load_model, calls none). Measured: the Llama-3 8B drafter logs
    mem usage=2.15 GB = 1.77 GiB of live parameters + 0.375 GiB of old qkv_proj (4096 x 6144) and MLP
    (3 x 4096 x 14336), bf16 (tests/data/h200-simulated-sglang-0.5.15.post1/report/logs/
    h200-eagle3__server-srv-3b32fe24af89.log), and the target's KV pool, sized after it, is smaller by as much."""
    t = max(1, tp)
    h = d.hidden_size
    heads, kv = _ceil_div(d.num_attention_heads, t), max(1, d.num_kv_heads // t)
    per_layer = h * (heads + 2 * kv) * d.head_dim + 3 * h * _ceil_div(d.intermediate_size, t)
    return int(d.num_layers * per_layer * Scheme.dense(d.dtype).bytes_per_param)
