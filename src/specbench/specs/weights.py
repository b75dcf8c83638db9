"""Parameter counts per module and weight bytes per GPU under tensor parallelism.

Module names follow the HF checkpoints (so a checkpoint's quantization map applies by name). Sharding follows
SGLang's parallel layers (sglang/srt/layers/linear.py: ColumnParallelLinear splits the output dim,
RowParallelLinear the input dim, QKVParallelLinear keeps one KV head per rank when num_kv_heads < tp, i.e.
replicates it; vocab_parallel_embedding.py::pad_vocab_size pads the vocabulary to a multiple of 64,
DEFAULT_VOCAB_PADDING_SIZE, not of 64·tp, and VocabParallelEmbedding splits the padded rows over the TP ranks).
Small tensors (norms, biases, A_log, dt_bias, conv weights) are counted too, replicated or split as the layers do.
"""

from __future__ import annotations

from dataclasses import dataclass

from specbench.specs.model import ModelSpec
from specbench.specs.quant import Scheme

GIB = float(1 << 30)


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


def tensors_per_rank(m: ModelSpec, tp: int, *, include_vision: bool = True) -> list[Tensor]:
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
            out.extend(_moe(m, p, t))
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


def _moe(m: ModelSpec, p: str, t: int) -> list[Tensor]:
    assert m.moe is not None
    h = m.hidden_size
    e = m.moe
    i = _ceil_div(e.moe_intermediate_size, t)
    gated = str(m.raw.get("mlp_hidden_act", "silu")) != "relu2"
    per_expert = h * i * (3 if gated else 2)
    res = [Tensor(f"{p}.mlp.gate", h * e.num_experts, False, group="moe"),
           Tensor(f"{p}.mlp.experts", e.num_experts * per_expert, True, expert=True, group="moe")]
    if e.shared_intermediate_size:
        si = _ceil_div(e.shared_intermediate_size, t)
        res.append(Tensor(f"{p}.mlp.shared_expert", h * si * (3 if gated else 2), True, group="moe"))
    return res


_CACHE: dict[tuple, tuple[ModelSpec, int]] = {}


def _memo(kind: str, m: ModelSpec, *key, compute):
    """Memoise per (ModelSpec object, args): a plan search asks for the same weights hundreds of times.
    The spec is kept in the value so its id() cannot be reused while cached."""
    k = (kind, id(m), *key)
    hit = _CACHE.get(k)
    if hit is not None and hit[0] is m:
        return hit[1]
    v = compute()
    if len(_CACHE) > 4096:
        _CACHE.clear()
    _CACHE[k] = (m, v)
    return v


def weight_bytes(m: ModelSpec, tp: int, *, include_vision: bool = True, scheme_override: Scheme | None = None) -> int:
    """Bytes of weights on one GPU at tensor-parallel size `tp`."""
    return _memo("w", m, tp, include_vision, scheme_override,
                 compute=lambda: _weight_bytes(m, tp, include_vision=include_vision, scheme_override=scheme_override))


def _weight_bytes(m: ModelSpec, tp: int, *, include_vision: bool, scheme_override: Scheme | None) -> int:
    total = 0.0
    dense = Scheme.dense(m.dtype)
    for ten in tensors_per_rank(m, tp, include_vision=include_vision):
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
    return _memo("mtp", m, tp, compute=lambda: _mtp_draft_bytes(m, tp))


def _mtp_draft_bytes(m: ModelSpec, tp: int) -> int:
    dense = Scheme.dense(m.dtype)
    total = 0.0
    for ten in mtp_draft_tensors(m, tp):
        s = dense
        if ten.linear and not m.quant.excluded_any("mtp"):
            s = m.quant.scheme_for(ten.name, m.dtype, is_expert=ten.expert)
        total += ten.params * s.bytes_per_param
    return int(total)


def draft_model_bytes(d: ModelSpec, tp: int) -> int:
    return _memo("draft", d, tp, compute=lambda: _draft_model_bytes(d, tp))


def _draft_model_bytes(d: ModelSpec, tp: int) -> int:
    """A separate drafter checkpoint (DFlash, EAGLE3): its own layers; DFlash borrows the target's embedding and
    lm_head (sglang/srt/models/dflash.py loads none), EAGLE3 has its own lm_head over draft_vocab_size and shares
    the target's embedding."""
    t = max(1, tp)
    h = d.hidden_size
    total = 0.0
    dense = Scheme.dense(d.dtype)
    kind = d.draft.kind if d.draft else "separate"
    for ten in tensors_per_rank(d, t, include_vision=False):
        if ten.group == "embed" and kind in ("dflash", "eagle3", "eagle"):
            continue
        if ten.group == "lm_head" and kind == "dflash":
            continue
        if ten.group == "lm_head" and kind == "eagle3" and d.draft and d.draft.draft_vocab_size:
            total += _ceil_div(int(d.draft.draft_vocab_size), t) * h * dense.bytes_per_param
            continue
        s = d.quant.scheme_for(ten.name, d.dtype) if ten.linear else dense
        total += ten.params * s.bytes_per_param
    if kind == "dflash" and d.draft:
        # fc: concat of the target hidden states at target_layer_ids -> hidden (dflash.py `fc`), plus hidden_norm.
        # DFlash drafters read 5 target layers unless their config lists them (SpecForge templates, dflash_config)
        n_t = max(1, len(d.draft.target_layer_ids) or 5)
        total += (n_t * h * h + h) * dense.bytes_per_param
    if kind == "eagle3":
        total += 3 * h * h * dense.bytes_per_param  # fc: 3 target hidden states -> hidden
    return int(total)
