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

The spec types live in `model_types.py`, the per-family readers in `model_families.py`; this module strings the
readers together and reads the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specbench.errors import ConfigError, UserError
from specbench.specs.model_families import (
    check_heads,
    draft_info,
    get_bool,
    read_common,
    read_layout,
    sliding_layers,
    vision_spec,
    with_mla,
    with_moe,
)
from specbench.specs.model_types import ModelSpec


def model_spec_from_dict(config: Mapping[str, Any], *, name: str = "model",
                         hf_quant_config: Mapping[str, Any] | None = None) -> ModelSpec:
    """Build a ModelSpec from a parsed config.json (top level; `text_config` is looked into)."""
    if not isinstance(config, Mapping):
        raise ConfigError(f"{name}: config.json must be a JSON object")
    c = read_common(config, name, hf_quant_config)
    lay = with_moe(c, with_mla(c, read_layout(c)))
    sliding, window = sliding_layers(c, lay)
    check_heads(c, lay)
    draft = draft_info(config, c.arch)
    mtp = c.int_field("mtp_num_hidden_layers", "num_nextn_predict_layers", default=0)
    vision_cfg = config.get("vision_config")
    vision = vision_spec(vision_cfg) if isinstance(vision_cfg, Mapping) else None
    cfg, ssm_dtype = c.cfg, lay.ssm_dtype
    return ModelSpec(
        name=name, architecture=c.arch, model_type=c.model_type, dtype=c.dtype, hidden_size=c.hidden,
        num_layers=c.n_layers, vocab_size=c.vocab, tie_word_embeddings=c.tie, intermediate_size=c.inter,
        num_attention_heads=lay.n_heads, num_kv_heads=lay.n_kv, head_dim=lay.head_dim, v_head_dim=lay.v_head_dim,
        attn_output_gate=get_bool(cfg, "attn_output_gate", False, name),
        attention_layers=tuple(lay.attention), linear_layers=tuple(lay.linear), sliding_layers=tuple(sliding),
        sliding_window=int(window) if window else None, mla=lay.mla, moe=lay.moe, gdn=lay.gdn, mamba=lay.mamba,
        mamba_ssm_dtype=str(ssm_dtype) if ssm_dtype else None, mlp_layers=tuple(lay.mlp_layers), vision=vision,
        mtp_layers=mtp, draft=draft, max_position_embeddings=cfg.get("max_position_embeddings"), quant=c.quant,
        attention_bias=(get_bool(cfg, "attention_bias", False, name) or get_bool(cfg, "qkv_bias", False, name)
                        or c.model_type in ("qwen2",)),
        raw=config,
    )


CONFIG_MAX_BYTES = 32 << 20  # the largest published config.json is tens of kB


def load_config_file(path: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Read config.json (and a sibling hf_quant_config.json if present). One-line errors on bad input."""
    import os

    from specbench.userfile import read_json

    try:  # a regular UTF-8 file (userfile.py: a FIFO, a device, another encoding, a 5,000-digit number: one line)
        data = read_json(path, "config.json", CONFIG_MAX_BYTES)
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except IsADirectoryError:
        raise ConfigError(f"expected a config.json file, got a directory: {path}") from None
    except UserError as exc:
        raise ConfigError(str(exc)) from None
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
                hq = read_json(cand, "hf_quant_config.json", CONFIG_MAX_BYTES)
            except (OSError, UserError):
                raise ConfigError(f"{cand}: not valid JSON") from None
            break
    return data, hq


def draft_vocab_warning(m: ModelSpec, draft: ModelSpec | None) -> str | None:
    """The drafter's vocabulary is not the target's: engines serve it, but its token ids are not the target's, so
    its drafts are rejected. An EAGLE3 drafter's `vocab_size` is the vocabulary of the target it was trained for
    (its own smaller one, `draft_vocab_size`, maps into it through `d2t`: SpecForge's configs, SGLang
    models/llama_eagle3.py@0.5.15.post1), so it too must equal the target's; one that states only its own draft
    vocabulary (vocab_size = draft_vocab_size) says nothing about the target's and is not warned about."""
    if draft is None or draft.vocab_size == m.vocab_size:
        return None
    own = draft.raw.get("draft_vocab_size")
    if own:
        if own == draft.vocab_size:  # its vocab_size is its own draft vocabulary: d2t says where it maps
            return None
        return (f"the EAGLE3 drafter was trained for a vocabulary of {draft.vocab_size} tokens (its d2t maps its "
                f"{draft.raw['draft_vocab_size']} into it), the target has {m.vocab_size}: its drafts are another "
                "tokenizer's ids and are rejected (acceptance near zero)")
    return (f"the drafter's vocab_size {draft.vocab_size} is not the target's {m.vocab_size}: its token ids "
            "are not the target's, so its drafts are rejected (acceptance near zero)")


def moe_without_experts_warning(m: ModelSpec) -> str | None:
    """A MoE config whose expert count is 0 while it routes tokens to experts (num_experts_per_tok > 0): the model
    code builds every layer as a dense MLP of `intermediate_size` instead (transformers' and the engines' Qwen3-MoE
    / Qwen2-MoE classes: `num_experts > 0` gates the sparse block), so it starts with a fraction of the weights."""
    text = m.raw.get("text_config")
    raw: Mapping[str, Any] = text if isinstance(text, dict) else m.raw
    count = next((raw[k] for k in ("num_experts", "n_routed_experts", "num_local_experts") if k in raw), None)
    top_k = next((raw[k] for k in ("num_experts_per_tok", "moe_topk") if k in raw), None)
    if count == 0 and isinstance(top_k, int) and top_k > 0:
        return (f"the config has 0 experts but routes each token to {top_k} (num_experts_per_tok): the model code "
                "then builds every layer as a dense MLP, so it is planned with a fraction of a MoE's weights; the "
                "config is wrong")
    return None
