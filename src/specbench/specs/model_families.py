"""Readers of a `config.json`, one per model family: the fields every family shares (`read_common`), the family's
layer layout (dense, Gated-DeltaNet, Nemotron-H, Falcon-H1, Mamba1, Jamba), then MLA, MoE, sliding windows and the
drafter / vision metadata. The layer-kind rules are in `specs/model.py`'s docstring.

The readers run in a fixed order and each required field is read where the original single reader read it, so a
config missing several fields names the same first one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from specbench.errors import ConfigError
from specbench.specs.config_fields import validate_config
from specbench.specs.model_types import (
    DraftInfo,
    GdnSpec,
    Mamba2Spec,
    MlaSpec,
    MoeSpec,
    VisionSpec,
)
from specbench.specs.quant import QuantSpec, parse_quant

GDN_TYPES = {"qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text"}
DRAFT_ARCHS = {"DFlashDraftModel": "dflash", "DFlash2DraftModel": "dflash", "LlamaForCausalLMEagle3": "eagle3",
               "Eagle3LlamaForCausalLM": "eagle3", "LlamaForCausalLMEagle": "eagle",
               "Qwen3_5MTPDraftModel": "mtp", "DeepseekV3ForCausalLMNextN": "mtp"}


def get(cfg: Mapping[str, Any], *keys: str, default: Any = None) -> Any:
    for k in keys:
        if k in cfg and cfg[k] is not None:
            return cfg[k]
    return default


# no integer field of a config is larger (config_fields.py bounds the known ones more tightly)
MAX_INT_FIELD = 1 << 31


def get_int(cfg: Mapping[str, Any], *keys: str, default: int | None = None, name: str = "") -> int:
    """A non-negative JSON integer (an integral float such as 4096.0 too); a bool, a string, NaN/Infinity or a value
    over MAX_INT_FIELD is a one-line ConfigError."""
    v = get(cfg, *keys, default=default)
    where = f"{name or 'config'}: field {keys[0]!r}"
    if v is None:
        raise ConfigError(f"{name or 'config'}: missing required field {keys[0]!r}")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not v.is_integer()):
        raise ConfigError(f"{where} is not an integer: {str(v)[:60]!r}")
    if not -MAX_INT_FIELD <= v <= MAX_INT_FIELD:
        raise ConfigError(f"{where} is out of range: {v!r} (at most {MAX_INT_FIELD})")
    iv = int(v)
    if iv < 0:
        raise ConfigError(f"{where} is negative: {iv}")
    return iv


def get_bool(cfg: Mapping[str, Any], key: str, default: bool, name: str) -> bool:
    """A JSON true/false (never `"no"` read as True)."""
    v = cfg.get(key)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise ConfigError(f"{name}: field {key!r} must be true or false, got {str(v)[:60]!r}")
    return v


# ------------------------------------------------------------------------------------------------ common fields
@dataclass(frozen=True)
class Common:
    """What every family shares: the identity, the transformer dimensions and the raw hints the families override."""
    name: str
    config: Mapping[str, Any]    # the top level as given
    cfg: Mapping[str, Any]       # the top level with `text_config` merged over it
    arch: str
    model_type: str
    quant: QuantSpec
    dtype: str
    hidden: int
    n_layers: int
    vocab: int
    n_heads: int
    n_kv: int
    head_dim: int
    inter: int
    tie: bool

    @property
    def layers(self) -> tuple[int, ...]:
        return tuple(range(self.n_layers))

    def int_field(self, *keys: str, default: int | None = None) -> int:
        return get_int(self.cfg, *keys, default=default, name=self.name)


def read_common(config: Mapping[str, Any], name: str, hf_quant_config: Mapping[str, Any] | None) -> Common:
    """The identity (architecture, model_type, quantization, dtype) and the transformer dimensions."""
    validate_config(config, name)
    archs = config.get("architectures") or []
    arch = str(archs[0]) if archs else str(config.get("model_type", "unknown"))
    text = config.get("text_config") if isinstance(config.get("text_config"), Mapping) else None
    cfg: Mapping[str, Any] = {**config, **text} if text else config
    model_type = str(cfg.get("model_type") or config.get("model_type") or "")
    if not model_type and not archs:
        raise ConfigError(f"{name}: not a model config (no 'architectures' and no 'model_type')")
    quant = parse_quant(config if "quantization_config" in config else cfg, hf_quant_config)
    dtype = str(get(cfg, "torch_dtype", "dtype", default=None) or get(config, "torch_dtype", "dtype", default="bfloat16"))
    hidden = get_int(cfg, "hidden_size", "d_model", "n_embd", name=name)
    n_layers = get_int(cfg, "num_hidden_layers", "n_layer", "num_layers", name=name)
    vocab = get_int(cfg, "vocab_size", name=name)
    if hidden <= 0 or n_layers <= 0 or vocab <= 0:
        raise ConfigError(f"{name}: hidden_size, num_hidden_layers and vocab_size must be positive")
    n_heads = get_int(cfg, "num_attention_heads", "n_head", default=0, name=name)
    n_kv = get_int(cfg, "num_key_value_heads", default=n_heads, name=name) if n_heads else 0
    head_dim = get_int(cfg, "head_dim", "attention_head_dim", default=(hidden // n_heads if n_heads else 0), name=name)
    inter = get_int(cfg, "intermediate_size", default=4 * hidden, name=name)
    tie = get_bool(config, "tie_word_embeddings", get_bool(cfg, "tie_word_embeddings", False, name), name)
    return Common(name, config, cfg, arch, model_type, quant, dtype, hidden, n_layers, vocab, n_heads, n_kv,
                  head_dim, inter, tie)


# ------------------------------------------------------------------------------------------------ layer layout
@dataclass(frozen=True)
class Layout:
    """Which layers hold what, and the shapes the family sets."""
    attention: tuple[int, ...]            # layers that hold KV
    mlp_layers: tuple[int, ...]           # layers with a dense MLP
    n_heads: int
    n_kv: int
    head_dim: int
    v_head_dim: int
    ssm_dtype: Any
    window: Any                           # sliding_window as the config gives it (None for recurrent families)
    linear: tuple[int, ...] = ()          # GDN / Mamba layers
    gdn: GdnSpec | None = None
    mamba: Mamba2Spec | None = None
    moe: MoeSpec | None = None
    mla: MlaSpec | None = None


def read_layout(c: Common) -> Layout:
    """The family's reader, chosen by model_type / architecture (dense when none matches)."""
    if c.model_type in GDN_TYPES or c.arch.startswith(("Qwen3Next", "Qwen3_5")):
        return read_gdn(c)
    if c.model_type == "nemotron_h" or c.arch.startswith("NemotronH"):
        return read_nemotron_h(c)
    if c.model_type == "falcon_h1":
        return read_falcon_h1(c)
    if c.model_type in ("mamba", "falcon_mamba"):
        return read_mamba1(c)
    if c.model_type == "jamba":
        return read_jamba(c)
    return read_dense(c)


def read_dense(c: Common) -> Layout:
    """Every layer holds attention and a dense MLP."""
    return Layout(attention=c.layers, mlp_layers=c.layers, n_heads=c.n_heads, n_kv=c.n_kv, head_dim=c.head_dim,
                  v_head_dim=c.head_dim, ssm_dtype=get(c.cfg, "mamba_ssm_dtype", "mamba_ssm_cache_dtype"),
                  window=get(c.cfg, "sliding_window"))


def read_gdn(c: Common) -> Layout:
    """Qwen3-Next / Qwen3.5 / 3.6: layer l is linear iff (l+1) % full_attention_interval != 0."""
    interval = c.int_field("full_attention_interval", default=4)
    if interval <= 0:
        raise ConfigError(f"{c.name}: full_attention_interval must be positive")
    gdn = GdnSpec(
        num_key_heads=c.int_field("linear_num_key_heads"),
        num_value_heads=c.int_field("linear_num_value_heads"),
        key_head_dim=c.int_field("linear_key_head_dim"),
        value_head_dim=c.int_field("linear_value_head_dim"),
        conv_kernel=c.int_field("linear_conv_kernel_dim", default=4),
    )
    return replace(read_dense(c), attention=tuple(i for i in c.layers if (i + 1) % interval == 0),
                   linear=tuple(i for i in c.layers if (i + 1) % interval != 0), gdn=gdn, window=None)


def read_nemotron_h(c: Common) -> Layout:
    """Nemotron-H: `hybrid_override_pattern`, one char per layer: M mamba2, * attention, - MLP, E MoE."""
    pattern = str(get(c.cfg, "hybrid_override_pattern", default=""))
    if len(pattern) != c.n_layers:
        raise ConfigError(f"{c.name}: hybrid_override_pattern has {len(pattern)} chars for {c.n_layers} layers")
    moe_layers = tuple(i for i, ch in enumerate(pattern) if ch == "E")
    heads = c.int_field("mamba_num_heads")
    hd = c.int_field("mamba_head_dim")
    mamba = Mamba2Spec(intermediate=heads * hd, n_groups=c.int_field("n_groups", default=1),
                       num_heads=heads, head_dim=hd, state_size=c.int_field("ssm_state_size"),
                       conv_kernel=c.int_field("conv_kernel", default=4))
    head_dim = c.int_field("head_dim", "attention_head_dim", default=c.hidden // max(c.n_heads, 1))
    moe = None
    if moe_layers:
        n_shared = c.int_field("n_shared_experts", default=0)
        moe = MoeSpec(num_experts=c.int_field("n_routed_experts"),
                      experts_per_tok=c.int_field("num_experts_per_tok"),
                      moe_intermediate_size=c.int_field("moe_intermediate_size"),
                      shared_intermediate_size=c.int_field("moe_shared_expert_intermediate_size", default=0)
                      if n_shared else 0,
                      moe_layers=moe_layers,
                      # sglang/srt/models/nemotron_h.py::NemotronHMoE.__init__@0.5.15.post1: experts get
                      # hidden_size=moe_latent_size, with fc1/fc2_latent_proj (hidden <-> latent) around them
                      latent_size=c.int_field("moe_latent_size", default=0))
    dense = read_dense(c)
    return replace(dense, attention=tuple(i for i, ch in enumerate(pattern) if ch == "*"),
                   linear=tuple(i for i, ch in enumerate(pattern) if ch == "M"),
                   mlp_layers=tuple(i for i, ch in enumerate(pattern) if ch == "-"), mamba=mamba, moe=moe,
                   head_dim=head_dim, v_head_dim=head_dim, ssm_dtype=dense.ssm_dtype or "float32", window=None)


def read_falcon_h1(c: Common) -> Layout:
    """Falcon-H1: every layer holds attention and Mamba2 in parallel."""
    idx = c.cfg.get("attn_layer_indices")
    attention = tuple(idx) if idx else c.layers
    heads = c.int_field("mamba_n_heads")
    hd = c.int_field("mamba_d_head")
    d_ssm = get(c.cfg, "mamba_d_ssm")
    mamba = Mamba2Spec(intermediate=int(d_ssm) if d_ssm else heads * hd,
                       n_groups=c.int_field("mamba_n_groups", default=1), num_heads=heads, head_dim=hd,
                       state_size=c.int_field("mamba_d_state"),
                       conv_kernel=c.int_field("mamba_d_conv", default=4))
    return replace(read_dense(c), attention=attention, linear=c.layers, mamba=mamba, window=None)


def read_mamba1(c: Common) -> Layout:
    """Mamba / FalconMamba: Mamba1 in every layer, no attention, no MLP."""
    d_inner = c.int_field("intermediate_size", "d_inner", default=2 * c.hidden)
    mamba = Mamba2Spec(intermediate=d_inner, n_groups=1, num_heads=d_inner, head_dim=1,
                       state_size=c.int_field("state_size", default=16),
                       conv_kernel=c.int_field("conv_kernel", default=4), version=1,
                       time_step_rank=c.int_field("time_step_rank", default=max(1, c.hidden // 16)))
    return replace(read_dense(c), attention=(), linear=c.layers, mlp_layers=(), mamba=mamba, n_heads=0, n_kv=0,
                   head_dim=0, v_head_dim=0, window=None)


def read_jamba(c: Common) -> Layout:
    """Jamba: attention where i % attn_layer_period == attn_layer_offset, Mamba1 elsewhere; MoE every other layer."""
    period = c.int_field("attn_layer_period", default=8)
    offset = c.int_field("attn_layer_offset", default=4)
    attention = tuple(i for i in c.layers if i % period == offset)
    linear = tuple(i for i in c.layers if i % period != offset)
    d_inner = c.int_field("mamba_expand", default=2) * c.hidden
    mamba = Mamba2Spec(intermediate=d_inner, n_groups=1, num_heads=d_inner, head_dim=1,
                       state_size=c.int_field("mamba_d_state", default=16),
                       conv_kernel=c.int_field("mamba_d_conv", default=4), version=1,
                       time_step_rank=c.int_field("mamba_dt_rank", default=max(1, c.hidden // 16)))
    dense = read_dense(c)
    moe, mlp_layers = None, c.layers
    n_exp = c.int_field("num_experts", default=0)
    if n_exp > 1:
        period_e = c.int_field("expert_layer_period", default=2)
        off_e = c.int_field("expert_layer_offset", default=1)
        ml = tuple(i for i in c.layers if i % period_e == off_e)
        moe = MoeSpec(n_exp, c.int_field("num_experts_per_tok", default=2), c.inter, 0, ml)
        mlp_layers = tuple(i for i in c.layers if i not in ml)
    return replace(dense, attention=attention, linear=linear, mamba=mamba, moe=moe, mlp_layers=mlp_layers,
                   ssm_dtype=dense.ssm_dtype or "float32", window=None)


# ------------------------------------------------------------------------------------------------ MLA, MoE, windows
def with_mla(c: Common, lay: Layout) -> Layout:
    """DeepSeek-style multi-head latent attention (`kv_lora_rank` present)."""
    if get(c.cfg, "kv_lora_rank") is None:
        return lay
    mla = MlaSpec(kv_lora_rank=c.int_field("kv_lora_rank"),
                  qk_rope_head_dim=c.int_field("qk_rope_head_dim"),
                  qk_nope_head_dim=c.int_field("qk_nope_head_dim", default=128),
                  v_head_dim=c.int_field("v_head_dim", default=128),
                  q_lora_rank=get(c.cfg, "q_lora_rank"))
    return replace(lay, mla=mla, head_dim=mla.qk_nope_head_dim + mla.qk_rope_head_dim, v_head_dim=mla.v_head_dim)


def with_moe(c: Common, lay: Layout) -> Layout:
    """Routed experts of the generic configs (DeepSeek, Qwen-MoE, Mixtral, gpt-oss) unless the family set them."""
    if lay.moe is not None:
        return lay
    cfg = c.cfg
    n_exp = c.int_field("n_routed_experts", "num_experts", "num_local_experts", default=0)
    if n_exp <= 1:
        return lay
    first_dense = c.int_field("first_k_dense_replace", default=0)
    sparse_step = c.int_field("decoder_sparse_step", "moe_layer_freq", default=1) or 1
    mlp_only = set(cfg.get("mlp_only_layers") or ())
    moe_layers = [i for i in c.layers if i >= first_dense and (i + 1) % sparse_step == 0 and i not in mlp_only]
    shared = c.int_field("shared_expert_intermediate_size", default=0)
    n_shared = c.int_field("n_shared_experts", default=0)
    moe_inter = c.int_field("moe_intermediate_size", default=c.inter)
    if not shared and n_shared:
        shared = n_shared * moe_inter
    moe = MoeSpec(num_experts=n_exp,
                  experts_per_tok=c.int_field("num_experts_per_tok", "experts_per_token", "top_k", default=2),
                  moe_intermediate_size=moe_inter, shared_intermediate_size=shared, moe_layers=tuple(moe_layers))
    return replace(lay, moe=moe, mlp_layers=tuple(i for i in lay.mlp_layers if i not in set(moe_layers)))


def sliding_layers(c: Common, lay: Layout) -> tuple[tuple[int, ...], Any]:
    """(the attention layers with a sliding window, the window) from `layer_types` or a Mistral-style global window."""
    cfg, window = c.cfg, lay.window
    sliding: tuple[int, ...] = ()
    lt = cfg.get("layer_types")
    if lay.gdn is None and lay.mamba is None and isinstance(lt, list) and len(lt) == c.n_layers:
        sliding = tuple(i for i, t in enumerate(lt) if "sliding" in str(t))
    elif lay.gdn is None and lay.mamba is None and window and cfg.get("use_sliding_window", True) is not False \
            and c.model_type not in ("qwen3", "qwen2"):
        # Mistral-style global sliding window: every layer slides (only if the config says so).
        if cfg.get("use_sliding_window") is True or c.model_type in ("mistral",):
            sliding = tuple(lay.attention)
    if not sliding:
        window = window if cfg.get("use_sliding_window") else None
    return sliding, window


def check_heads(c: Common, lay: Layout) -> None:
    if lay.attention and lay.mla is None and (lay.n_kv <= 0 or lay.head_dim <= 0):
        raise ConfigError(f"{c.name}: {len(lay.attention)} attention layers but num_key_value_heads={lay.n_kv} and "
                          f"head_dim={lay.head_dim}: both must be positive (is num_attention_heads missing?)")
    if lay.n_heads and lay.head_dim <= 0:
        raise ConfigError(f"{c.name}: head_dim must be positive")
    if lay.n_heads and lay.n_kv and lay.n_heads % lay.n_kv != 0 and lay.mla is None:
        raise ConfigError(f"{c.name}: num_attention_heads={lay.n_heads} is not a multiple of "
                          f"num_key_value_heads={lay.n_kv}")


# ------------------------------------------------------------------------------------------------ drafters, vision
def draft_info(config: Mapping[str, Any], arch: str) -> DraftInfo | None:
    """Drafter metadata (DFlash block size and target layers, EAGLE3 draft vocabulary) by architecture."""
    kind = DRAFT_ARCHS.get(arch)
    if kind is None and "dflash_config" in config:
        kind = "dflash"
    if kind is None:
        return None
    dcfg = config.get("dflash_config") or {}
    block = get_int(dcfg, "block_size", default=get_int(config, "block_size", default=0, name="config"),
                    name="dflash_config")
    ids = dcfg.get("target_layer_ids") or ()
    if not isinstance(ids, (list, tuple)):
        raise ConfigError(f"dflash_config: field 'target_layer_ids' must be a list of layer numbers, got {ids!r}")
    return DraftInfo(kind=kind, block_size=block or None,
                     target_layer_ids=tuple(get_int({"i": i}, "i", name="dflash_config.target_layer_ids")
                                            for i in ids),
                     draft_vocab_size=config.get("draft_vocab_size"))


def vision_spec(v: Mapping[str, Any]) -> VisionSpec:
    """Parameter count of a Qwen-VL-style ViT (qwen3_5_vision / qwen3_vl / qwen2_5_vl): blocks + merger + patch.

    Per block: fused qkv (3h^2+3h), proj (h^2+h), MLP (2·h·i + h + i), two norms (4h).
    Merger: LN + Linear(4h->4h) + Linear(4h->out) with spatial_merge_size 2 (merge^2 · h inputs).
    """
    def num(*keys: str, default: int) -> int:
        return get_int(v, *keys, default=default, name="vision_config")

    h = num("hidden_size", "embed_dim", default=1152)
    depth = num("depth", "num_hidden_layers", default=24)
    i = num("intermediate_size", default=4 * h)
    out = num("out_hidden_size", default=h)
    merge = num("spatial_merge_size", default=2)
    patch = num("patch_size", default=14)
    tps = num("temporal_patch_size", default=2)
    cin = num("in_channels", default=3)
    block = 3 * h * h + 3 * h + h * h + h + 2 * h * i + h + i + 4 * h
    mh = h * merge * merge
    merger = 2 * mh + mh * mh + mh + mh * out + out
    deep = len(v.get("deepstack_visual_indexes") or ())
    pos = num("num_position_embeddings", default=0) * h
    params = depth * block + merger * (1 + deep) + cin * tps * patch * patch * h + h + pos
    return VisionSpec(params=params, label=str(v.get("model_type", "vision")))
