"""The typed model of the `config.json` fields the planner reads: the input edge of `specs/model.py`.

Every field the readers of `model_families.py` / `quant.py` use is declared here with its JSON type (strict: no
bool for an int, no string for a number, no `"no"` for a bool), a finite value, and a range that bounds what the
planner allocates (a layer count of 1e8 is a one-line error here, never a 10^8-entry tuple later). Unknown fields
are kept and ignored (configs carry many the planner does not need).

Bounds: generous multiples of the largest public configs (DeepSeek-V3 / Kimi-K2: 61 layers, hidden 7168, vocab
163,840, 384 experts; Llama-4: 10 M positions), so a real config never trips them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from specbench.errors import ConfigError
from specbench.specs.quant import KNOWN_METHODS

# the largest value each kind of field may take (see the module docstring)
MAX_LAYERS = 4_096
MAX_HIDDEN = 1 << 20
MAX_VOCAB = 1 << 24
MAX_HEADS = 1 << 16
MAX_EXPERTS = 1 << 16
MAX_POSITIONS = 1 << 31

Layers = Annotated[int, Field(ge=0, le=MAX_LAYERS, strict=True)]
Dim = Annotated[int, Field(ge=0, le=MAX_HIDDEN, strict=True)]
Heads = Annotated[int, Field(ge=0, le=MAX_HEADS, strict=True)]
Experts = Annotated[int, Field(ge=0, le=MAX_EXPERTS, strict=True)]
Count = Annotated[int, Field(ge=0, le=MAX_HIDDEN, strict=True)]
StrictBool = Annotated[bool, Field(strict=True)]

# quantization methods `quant.py::parse_quant` knows (its KNOWN_METHODS); any other is an error (never planned as
# fp8 silently)
QUANT_METHODS = KNOWN_METHODS


class _Fields(BaseModel):
    # built at the end of this module, without pydantic's plugin lookup (_build_without_plugins)
    model_config = ConfigDict(extra="allow", frozen=True, allow_inf_nan=False, protected_namespaces=(),
                              defer_build=True)


class QuantFields(_Fields):
    quant_method: str | None = None
    bits: Annotated[int, Field(ge=1, le=32, strict=True)] | None = None
    w_bit: Annotated[int, Field(ge=1, le=32, strict=True)] | None = None
    group_size: Annotated[int, Field(ge=-1, le=MAX_HIDDEN, strict=True)] | None = None
    q_group_size: Annotated[int, Field(ge=-1, le=MAX_HIDDEN, strict=True)] | None = None
    weight_block_size: list[Annotated[int, Field(ge=1, le=MAX_HIDDEN, strict=True)]] | None = None
    modules_to_not_convert: list[str] | None = None
    ignore: list[str] | None = None
    exclude_modules: list[str] | None = None
    kv_cache_quant_algo: str | None = None

    @field_validator("quant_method")
    @classmethod
    def _method(cls, v: str | None) -> str | None:
        if v is not None and v.lower() not in QUANT_METHODS:
            raise ValueError(f"unknown quantization method {v!r} (known: {', '.join(QUANT_METHODS)})")
        return v


class ConfigFields(_Fields):
    """The fields of one level of a config.json (the top level, or `text_config`)."""

    architectures: list[str] | None = None
    model_type: str | None = None
    torch_dtype: str | None = None
    dtype: str | None = None
    quantization_config: QuantFields | None = None
    text_config: dict[str, Any] | None = None
    vision_config: dict[str, Any] | None = None
    dflash_config: dict[str, Any] | None = None
    hidden_size: Dim | None = None
    d_model: Dim | None = None
    n_embd: Dim | None = None
    num_hidden_layers: Layers | None = None
    n_layer: Layers | None = None
    num_layers: Layers | None = None
    vocab_size: Annotated[int, Field(ge=0, le=MAX_VOCAB, strict=True)] | None = None
    draft_vocab_size: Annotated[int, Field(ge=0, le=MAX_VOCAB, strict=True)] | None = None
    num_attention_heads: Heads | None = None
    n_head: Heads | None = None
    num_key_value_heads: Annotated[int, Field(ge=1, le=MAX_HEADS, strict=True)] | None = None
    head_dim: Dim | None = None
    attention_head_dim: Dim | None = None
    intermediate_size: Dim | None = None
    moe_intermediate_size: Dim | None = None
    shared_expert_intermediate_size: Dim | None = None
    max_position_embeddings: Annotated[int, Field(ge=1, le=MAX_POSITIONS, strict=True)] | None = None
    sliding_window: Annotated[int, Field(ge=0, le=MAX_POSITIONS, strict=True)] | None = None
    tie_word_embeddings: StrictBool | None = None
    attention_bias: StrictBool | None = None
    qkv_bias: StrictBool | None = None
    attn_output_gate: StrictBool | None = None
    use_sliding_window: StrictBool | None = None
    layer_types: list[str] | None = None
    hybrid_override_pattern: Annotated[str, Field(max_length=MAX_LAYERS)] | None = None
    mlp_only_layers: list[Layers] | None = None
    attn_layer_indices: list[Layers] | None = None
    n_routed_experts: Experts | None = None
    num_experts: Experts | None = None
    num_local_experts: Experts | None = None
    num_experts_per_tok: Experts | None = None
    n_shared_experts: Experts | None = None
    kv_lora_rank: Dim | None = None
    q_lora_rank: Dim | None = None
    qk_rope_head_dim: Dim | None = None
    qk_nope_head_dim: Dim | None = None
    v_head_dim: Dim | None = None
    full_attention_interval: Layers | None = None
    mtp_num_hidden_layers: Layers | None = None
    num_nextn_predict_layers: Layers | None = None
    linear_num_key_heads: Heads | None = None
    linear_num_value_heads: Heads | None = None
    linear_key_head_dim: Dim | None = None
    linear_value_head_dim: Dim | None = None
    mamba_num_heads: Heads | None = None
    mamba_head_dim: Dim | None = None
    ssm_state_size: Dim | None = None
    block_size: Count | None = None


def _build_without_plugins(*models: type[BaseModel]) -> None:
    """Build the validators now, as typer builds its own (typer/_adapters.py::disabled_pydantic_plugins@0.29):
    without pydantic's plugin lookup (pydantic/plugin/_loader.py::get_plugins@2, an entry-point scan of every
    installed distribution, a fifth of what `specbench plan` executes), which these input models have no use for."""
    before = os.environ.get(_NO_PLUGINS)
    os.environ[_NO_PLUGINS] = "__all__"
    try:
        for model in models:
            model.model_rebuild(force=True)
    finally:
        if before is None:
            del os.environ[_NO_PLUGINS]
        else:
            os.environ[_NO_PLUGINS] = before


_NO_PLUGINS = "PYDANTIC_DISABLE_PLUGINS"
_build_without_plugins(QuantFields, ConfigFields)


def _first_line(name: str, exc: ValidationError, prefix: str) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"] if not (isinstance(p, str) and p.startswith(("constrained-", "int", "str"))))
    value = err.get("input")
    shown = repr(value) if not isinstance(value, (dict, list)) else type(value).__name__
    if len(shown) > 60:
        shown = shown[:57] + "..."
    msg = str(err["msg"]).removeprefix("Value error, ")
    more = f" (+{len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
    return f"{name}: config.json field {prefix}{loc!r}: {msg} (got {shown}){more}"


def validate_config(config: Mapping[str, Any], name: str) -> None:
    """Check the fields the planner reads (top level and `text_config`); a ConfigError of one line on the first bad
    one."""
    for prefix, level in (("", config), ("text_config.", config.get("text_config"))):
        if not isinstance(level, Mapping):
            continue
        try:
            ConfigFields.model_validate(dict(level))
        except ValidationError as exc:
            raise ConfigError(_first_line(name, exc, prefix)) from None
