"""A Hugging Face `config.json` read into a frozen `ModelSpec`.

Only what memory planning needs: layer kinds (full attention, Gated-DeltaNet, Mamba2/Mamba1, sliding window),
their shapes, MLA, MoE, the vision tower size, built-in MTP layers and drafter metadata (DFlash, EAGLE3).

Layer-kind rules follow the engines, not the config's optional hints:
- Qwen3-Next / Qwen3.5 / Qwen3.6 (GDN): layer l is linear iff `(l+1) % full_attention_interval != 0`
  (sglang/srt/configs/qwen3_next.py::Qwen3NextConfig.layers_block_type; `layer_types` is ignored there).
- Nemotron-H: `hybrid_override_pattern`, one char per layer: M mamba2, * attention, - MLP, E MoE
  (sglang/srt/configs/nemotron_h.py).
- Falcon-H1: every layer holds attention and Mamba2 in parallel (sglang/srt/configs/falcon_h1.py).
- Mamba / FalconMamba: Mamba1, no attention.
- Jamba: attention where `i % attn_layer_period == attn_layer_offset`, Mamba1 elsewhere.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from specbench.errors import ConfigError
from specbench.specs.quant import QuantSpec, parse_quant


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
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def is_hybrid(self) -> bool:
        return bool(self.linear_layers)

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


# ---------------------------------------------------------------------------------------------------------

GDN_TYPES = {"qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text"}
DRAFT_ARCHS = {"DFlashDraftModel": "dflash", "DFlash2DraftModel": "dflash", "LlamaForCausalLMEagle3": "eagle3",
               "Eagle3LlamaForCausalLM": "eagle3", "LlamaForCausalLMEagle": "eagle",
               "Qwen3_5MTPDraftModel": "mtp", "DeepseekV3ForCausalLMNextN": "mtp"}


def _get(cfg: Mapping[str, Any], *keys: str, default: Any = None) -> Any:
    for k in keys:
        if k in cfg and cfg[k] is not None:
            return cfg[k]
    return default


def _int(cfg: Mapping[str, Any], *keys: str, default: int | None = None, name: str = "") -> int:
    v = _get(cfg, *keys, default=default)
    if v is None:
        raise ConfigError(f"{name or 'config'}: missing required field {keys[0]!r}")
    try:
        iv = int(v)
    except (TypeError, ValueError):
        raise ConfigError(f"{name or 'config'}: field {keys[0]!r} is not an integer: {v!r}") from None
    if iv < 0:
        raise ConfigError(f"{name or 'config'}: field {keys[0]!r} is negative: {iv}")
    return iv


def model_spec_from_dict(config: Mapping[str, Any], *, name: str = "model",
                         hf_quant_config: Mapping[str, Any] | None = None) -> ModelSpec:
    """Build a ModelSpec from a parsed config.json (top level; `text_config` is looked into)."""
    if not isinstance(config, Mapping):
        raise ConfigError(f"{name}: config.json must be a JSON object")
    archs = config.get("architectures") or []
    arch = str(archs[0]) if archs else str(config.get("model_type", "unknown"))
    text = config.get("text_config") if isinstance(config.get("text_config"), Mapping) else None
    cfg: Mapping[str, Any] = {**config, **text} if text else config
    model_type = str(cfg.get("model_type") or config.get("model_type") or "")
    if not model_type and not archs:
        raise ConfigError(f"{name}: not a model config (no 'architectures' and no 'model_type')")
    quant = parse_quant(config if "quantization_config" in config else cfg, hf_quant_config)
    dtype = str(_get(cfg, "torch_dtype", "dtype", default=None) or _get(config, "torch_dtype", "dtype", default="bfloat16"))

    hidden = _int(cfg, "hidden_size", "d_model", "n_embd", name=name)
    n_layers = _int(cfg, "num_hidden_layers", "n_layer", "num_layers", name=name)
    vocab = _int(cfg, "vocab_size", name=name)
    if hidden <= 0 or n_layers <= 0 or vocab <= 0:
        raise ConfigError(f"{name}: hidden_size, num_hidden_layers and vocab_size must be positive")
    n_heads = _int(cfg, "num_attention_heads", "n_head", default=0, name=name)
    n_kv = _int(cfg, "num_key_value_heads", default=n_heads, name=name) if n_heads else 0
    head_dim = _int(cfg, "head_dim", "attention_head_dim", default=(hidden // n_heads if n_heads else 0), name=name)
    v_head_dim = head_dim
    inter = _int(cfg, "intermediate_size", default=4 * hidden, name=name)
    tie = bool(_get(config, "tie_word_embeddings", default=_get(cfg, "tie_word_embeddings", default=False)))
    layers = list(range(n_layers))
    attention = layers
    linear: list[int] = []
    sliding: list[int] = []
    mla = moe = gdn = mamba = None
    mlp_layers = layers
    ssm_dtype = _get(cfg, "mamba_ssm_dtype", "mamba_ssm_cache_dtype")
    window = _get(cfg, "sliding_window")

    if model_type in GDN_TYPES or arch.startswith(("Qwen3Next", "Qwen3_5")):
        interval = _int(cfg, "full_attention_interval", default=4, name=name)
        if interval <= 0:
            raise ConfigError(f"{name}: full_attention_interval must be positive")
        attention = [i for i in layers if (i + 1) % interval == 0]
        linear = [i for i in layers if (i + 1) % interval != 0]
        gdn = GdnSpec(
            num_key_heads=_int(cfg, "linear_num_key_heads", name=name),
            num_value_heads=_int(cfg, "linear_num_value_heads", name=name),
            key_head_dim=_int(cfg, "linear_key_head_dim", name=name),
            value_head_dim=_int(cfg, "linear_value_head_dim", name=name),
            conv_kernel=_int(cfg, "linear_conv_kernel_dim", default=4, name=name),
        )
        window = None
    elif model_type == "nemotron_h" or arch.startswith("NemotronH"):
        pattern = str(_get(cfg, "hybrid_override_pattern", default=""))
        if len(pattern) != n_layers:
            raise ConfigError(f"{name}: hybrid_override_pattern has {len(pattern)} chars for {n_layers} layers")
        attention = [i for i, c in enumerate(pattern) if c == "*"]
        linear = [i for i, c in enumerate(pattern) if c == "M"]
        mlp_layers = [i for i, c in enumerate(pattern) if c == "-"]
        moe_layers = [i for i, c in enumerate(pattern) if c == "E"]
        heads = _int(cfg, "mamba_num_heads", name=name)
        hd = _int(cfg, "mamba_head_dim", name=name)
        mamba = Mamba2Spec(intermediate=heads * hd, n_groups=_int(cfg, "n_groups", default=1, name=name),
                           num_heads=heads, head_dim=hd, state_size=_int(cfg, "ssm_state_size", name=name),
                           conv_kernel=_int(cfg, "conv_kernel", default=4, name=name))
        head_dim = _int(cfg, "head_dim", "attention_head_dim", default=hidden // max(n_heads, 1), name=name)
        v_head_dim = head_dim
        if moe_layers:
            n_shared = _int(cfg, "n_shared_experts", default=0, name=name)
            moe = MoeSpec(num_experts=_int(cfg, "n_routed_experts", name=name),
                          experts_per_tok=_int(cfg, "num_experts_per_tok", name=name),
                          moe_intermediate_size=_int(cfg, "moe_intermediate_size", name=name),
                          shared_intermediate_size=_int(cfg, "moe_shared_expert_intermediate_size", default=0, name=name)
                          if n_shared else 0,
                          moe_layers=tuple(moe_layers))
        ssm_dtype = ssm_dtype or "float32"
        window = None
    elif model_type == "falcon_h1":
        idx = cfg.get("attn_layer_indices")
        attention = list(idx) if idx else layers
        linear = layers
        heads = _int(cfg, "mamba_n_heads", name=name)
        hd = _int(cfg, "mamba_d_head", name=name)
        d_ssm = _get(cfg, "mamba_d_ssm")
        mamba = Mamba2Spec(intermediate=int(d_ssm) if d_ssm else heads * hd,
                           n_groups=_int(cfg, "mamba_n_groups", default=1, name=name), num_heads=heads, head_dim=hd,
                           state_size=_int(cfg, "mamba_d_state", name=name),
                           conv_kernel=_int(cfg, "mamba_d_conv", default=4, name=name))
        window = None
    elif model_type in ("mamba", "falcon_mamba"):
        attention = []
        linear = layers
        mlp_layers = []
        d_inner = _int(cfg, "intermediate_size", "d_inner", default=2 * hidden, name=name)
        mamba = Mamba2Spec(intermediate=d_inner, n_groups=1, num_heads=d_inner, head_dim=1,
                           state_size=_int(cfg, "state_size", default=16, name=name),
                           conv_kernel=_int(cfg, "conv_kernel", default=4, name=name), version=1,
                           time_step_rank=_int(cfg, "time_step_rank", default=max(1, hidden // 16), name=name))
        n_heads = n_kv = head_dim = v_head_dim = 0
        window = None
    elif model_type == "jamba":
        period = _int(cfg, "attn_layer_period", default=8, name=name)
        offset = _int(cfg, "attn_layer_offset", default=4, name=name)
        attention = [i for i in layers if i % period == offset]
        linear = [i for i in layers if i % period != offset]
        d_inner = _int(cfg, "mamba_expand", default=2, name=name) * hidden
        mamba = Mamba2Spec(intermediate=d_inner, n_groups=1, num_heads=d_inner, head_dim=1,
                           state_size=_int(cfg, "mamba_d_state", default=16, name=name),
                           conv_kernel=_int(cfg, "mamba_d_conv", default=4, name=name), version=1,
                           time_step_rank=_int(cfg, "mamba_dt_rank", default=max(1, hidden // 16), name=name))
        ssm_dtype = ssm_dtype or "float32"
        n_exp = _int(cfg, "num_experts", default=0, name=name)
        if n_exp > 1:
            period_e = _int(cfg, "expert_layer_period", default=2, name=name)
            off_e = _int(cfg, "expert_layer_offset", default=1, name=name)
            ml = tuple(i for i in layers if i % period_e == off_e)
            moe = MoeSpec(n_exp, _int(cfg, "num_experts_per_tok", default=2, name=name), inter, 0, ml)
            mlp_layers = [i for i in layers if i not in ml]
        window = None

    if _get(cfg, "kv_lora_rank") is not None:
        mla = MlaSpec(kv_lora_rank=_int(cfg, "kv_lora_rank", name=name),
                      qk_rope_head_dim=_int(cfg, "qk_rope_head_dim", name=name),
                      qk_nope_head_dim=_int(cfg, "qk_nope_head_dim", default=128, name=name),
                      v_head_dim=_int(cfg, "v_head_dim", default=128, name=name),
                      q_lora_rank=_get(cfg, "q_lora_rank"))
        head_dim = mla.qk_nope_head_dim + mla.qk_rope_head_dim
        v_head_dim = mla.v_head_dim

    if moe is None:
        n_exp = _int(cfg, "n_routed_experts", "num_experts", "num_local_experts", default=0, name=name)
        if n_exp > 1:
            first_dense = _int(cfg, "first_k_dense_replace", default=0, name=name)
            sparse_step = _int(cfg, "decoder_sparse_step", "moe_layer_freq", default=1, name=name) or 1
            mlp_only = set(cfg.get("mlp_only_layers") or ())
            moe_layers = [i for i in layers if i >= first_dense and (i + 1) % sparse_step == 0 and i not in mlp_only]
            shared = _int(cfg, "shared_expert_intermediate_size", default=0, name=name)
            n_shared = _int(cfg, "n_shared_experts", default=0, name=name)
            moe_inter = _int(cfg, "moe_intermediate_size", default=inter, name=name)
            if not shared and n_shared:
                shared = n_shared * moe_inter
            moe = MoeSpec(num_experts=n_exp,
                          experts_per_tok=_int(cfg, "num_experts_per_tok", "experts_per_token", "top_k", default=2, name=name),
                          moe_intermediate_size=moe_inter, shared_intermediate_size=shared, moe_layers=tuple(moe_layers))
            mlp_layers = [i for i in mlp_layers if i not in set(moe_layers)]

    lt = cfg.get("layer_types")
    if gdn is None and mamba is None and isinstance(lt, list) and len(lt) == n_layers:
        sliding = [i for i, t in enumerate(lt) if "sliding" in str(t)]
    elif gdn is None and mamba is None and window and cfg.get("use_sliding_window", True) is not False \
            and model_type not in ("qwen3", "qwen2"):
        # Mistral-style global sliding window: every layer slides (only if the config says so).
        if cfg.get("use_sliding_window") is True or model_type in ("mistral",):
            sliding = list(attention)
    if not sliding:
        window = window if cfg.get("use_sliding_window") else None

    if n_heads and head_dim <= 0:
        raise ConfigError(f"{name}: head_dim must be positive")
    if n_heads and n_kv and n_heads % n_kv != 0 and mla is None:
        raise ConfigError(f"{name}: num_attention_heads={n_heads} is not a multiple of num_key_value_heads={n_kv}")

    draft = _draft_info(config, arch)
    mtp = _int(cfg, "mtp_num_hidden_layers", "num_nextn_predict_layers", default=0, name=name)
    vision_cfg = config.get("vision_config")
    vision = _vision_spec(vision_cfg) if isinstance(vision_cfg, Mapping) else None

    return ModelSpec(
        name=name, architecture=arch, model_type=model_type, dtype=dtype, hidden_size=hidden, num_layers=n_layers,
        vocab_size=vocab, tie_word_embeddings=tie, intermediate_size=inter, num_attention_heads=n_heads,
        num_kv_heads=n_kv, head_dim=head_dim, v_head_dim=v_head_dim,
        attn_output_gate=bool(cfg.get("attn_output_gate", False)),
        attention_layers=tuple(attention), linear_layers=tuple(linear), sliding_layers=tuple(sliding),
        sliding_window=int(window) if window else None, mla=mla, moe=moe, gdn=gdn, mamba=mamba,
        mamba_ssm_dtype=str(ssm_dtype) if ssm_dtype else None, mlp_layers=tuple(mlp_layers), vision=vision,
        mtp_layers=mtp, draft=draft, max_position_embeddings=_get(cfg, "max_position_embeddings"), quant=quant,
        attention_bias=bool(cfg.get("attention_bias", False) or cfg.get("qkv_bias", False)
                            or model_type in ("qwen2",)),
        raw=config,
    )


def _draft_info(config: Mapping[str, Any], arch: str) -> DraftInfo | None:
    kind = DRAFT_ARCHS.get(arch)
    if kind is None and "dflash_config" in config:
        kind = "dflash"
    if kind is None:
        return None
    dcfg = config.get("dflash_config") or {}
    block = dcfg.get("block_size", config.get("block_size"))
    return DraftInfo(kind=kind, block_size=int(block) if block else None,
                     target_layer_ids=tuple(dcfg.get("target_layer_ids") or ()),
                     draft_vocab_size=config.get("draft_vocab_size"))


def _vision_spec(v: Mapping[str, Any]) -> VisionSpec:
    """Parameter count of a Qwen-VL-style ViT (qwen3_5_vision / qwen3_vl / qwen2_5_vl): blocks + merger + patch.

    Per block: fused qkv (3h^2+3h), proj (h^2+h), MLP (2·h·i + h + i), two norms (4h).
    Merger: LN + Linear(4h->4h) + Linear(4h->out) with spatial_merge_size 2 (merge^2 · h inputs).
    """
    h = int(v.get("hidden_size", v.get("embed_dim", 1152)))
    depth = int(v.get("depth", v.get("num_hidden_layers", 24)))
    i = int(v.get("intermediate_size", 4 * h))
    out = int(v.get("out_hidden_size", h))
    merge = int(v.get("spatial_merge_size", 2))
    patch = int(v.get("patch_size", 14))
    tps = int(v.get("temporal_patch_size", 2))
    cin = int(v.get("in_channels", 3))
    block = 3 * h * h + 3 * h + h * h + h + 2 * h * i + h + i + 4 * h
    mh = h * merge * merge
    merger = 2 * mh + mh * mh + mh + mh * out + out
    deep = len(v.get("deepstack_visual_indexes") or ())
    pos = int(v.get("num_position_embeddings", 0)) * h
    params = depth * block + merger * (1 + deep) + cin * tps * patch * patch * h + h + pos
    return VisionSpec(params=params, label=str(v.get("model_type", "vision")))


def load_config_file(path: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Read config.json (and a sibling hf_quant_config.json if present). One-line errors on bad input."""
    import os

    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except IsADirectoryError:
        raise ConfigError(f"expected a config.json file, got a directory: {path}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc.__class__.__name__}: {str(exc).splitlines()[0]})") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: config.json must hold a JSON object")
    hq = None
    base = os.path.dirname(path)
    for cand in (os.path.join(base, "hf_quant_config.json"),
                 path[: -len(".json")] + "__hf_quant_config.json" if path.endswith(".json") else ""):
        if cand and os.path.isfile(cand) and os.path.abspath(cand) != os.path.abspath(path):
            try:
                with open(cand, encoding="utf-8") as fh:
                    hq = json.load(fh)
            except (OSError, ValueError):
                raise ConfigError(f"{cand}: not valid JSON") from None
            break
    return data, hq
