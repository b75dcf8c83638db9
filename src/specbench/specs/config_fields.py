"""The typed model of the `config.json` fields the planner reads: the input edge of `specs/model.py`.

Every field the readers of `model_families.py` / `quant.py` use is declared here with its JSON type (strict: no
bool for an int, no string for a number, no `"no"` for a bool), a finite value, and a range that bounds what the
planner allocates (a layer count of 1e8 is a one-line error here, never a 10^8-entry tuple later). Unknown fields
are kept and ignored (configs carry many the planner does not need).

Bounds: generous multiples of the largest public configs (DeepSeek-V3 / Kimi-K2: 61 layers, hidden 7168, vocab
163,840, 384 experts; Llama-4: 10 M positions), so a real config never trips them.

One table owns the fields (CONFIG_FIELDS / QUANT_FIELDS: name -> Kind). A config is checked against it in plain
Python first (`_plainly_valid`: it only ever answers "valid" for values the pydantic model accepts, and "not sure"
for anything else); only a config it is not sure of builds the pydantic models from the same table, whose first
error is the one-line message. pydantic is thus off the path of a valid config (two thirds of the cost of a
`specbench plan` was importing it and building these models; benchmarks/RESULTS.md "plan latency").
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from specbench.errors import ConfigError
from specbench.specs.quant import KNOWN_METHODS

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError

# the largest value each kind of field may take (see the module docstring)
MAX_LAYERS = 4_096
MAX_HIDDEN = 1 << 20
MAX_VOCAB = 1 << 24
MAX_HEADS = 1 << 16
MAX_EXPERTS = 1 << 16
MAX_POSITIONS = 1 << 31

# quantization methods `quant.py::parse_quant` knows (its KNOWN_METHODS); any other is an error (never planned as
# fp8 silently)
QUANT_METHODS = KNOWN_METHODS


@dataclass(frozen=True)
class Kind:
    """The JSON type of one field (every field may also be null/absent).

    kind: "int" (strict: no bool, no float; lo <= v <= hi), "bool" (strict), "str" (at most `hi` characters when hi is
    set), "method" (a str naming one of QUANT_METHODS, any case), "list_str", "list_int" (each element an "int"),
    "dict" (str keys, any values), "quant" (an object checked against QUANT_FIELDS)."""

    kind: str
    lo: int | None = None
    hi: int | None = None


def _int(lo: int, hi: int) -> Kind:
    return Kind("int", lo, hi)


_STR, _BOOL, _LIST_STR, _DICT = Kind("str"), Kind("bool"), Kind("list_str"), Kind("dict")
_LAYERS, _DIM, _HEADS = _int(0, MAX_LAYERS), _int(0, MAX_HIDDEN), _int(0, MAX_HEADS)
_EXPERTS, _COUNT = _int(0, MAX_EXPERTS), _int(0, MAX_HIDDEN)

QUANT_FIELDS: dict[str, Kind] = {
    "quant_method": Kind("method"),
    "bits": _int(1, 32),
    "w_bit": _int(1, 32),
    "group_size": _int(-1, MAX_HIDDEN),
    "q_group_size": _int(-1, MAX_HIDDEN),
    "weight_block_size": Kind("list_int", 1, MAX_HIDDEN),
    "modules_to_not_convert": _LIST_STR,
    "ignore": _LIST_STR,
    "exclude_modules": _LIST_STR,
    "kv_cache_quant_algo": _STR,
}

# the fields of one level of a config.json (the top level, or `text_config`)
CONFIG_FIELDS: dict[str, Kind] = {
    "architectures": _LIST_STR,
    "model_type": _STR,
    "torch_dtype": _STR,
    "dtype": _STR,
    "quantization_config": Kind("quant"),
    "text_config": _DICT,
    "vision_config": _DICT,
    "dflash_config": _DICT,
    "hidden_size": _DIM,
    "d_model": _DIM,
    "n_embd": _DIM,
    "num_hidden_layers": _LAYERS,
    "n_layer": _LAYERS,
    "num_layers": _LAYERS,
    "vocab_size": _int(0, MAX_VOCAB),
    "draft_vocab_size": _int(0, MAX_VOCAB),
    "num_attention_heads": _HEADS,
    "n_head": _HEADS,
    "num_key_value_heads": _int(1, MAX_HEADS),
    "head_dim": _DIM,
    "attention_head_dim": _DIM,
    "intermediate_size": _DIM,
    "moe_intermediate_size": _DIM,
    "shared_expert_intermediate_size": _DIM,
    "max_position_embeddings": _int(1, MAX_POSITIONS),
    "sliding_window": _int(0, MAX_POSITIONS),
    "tie_word_embeddings": _BOOL,
    "attention_bias": _BOOL,
    "qkv_bias": _BOOL,
    "attn_output_gate": _BOOL,
    "use_sliding_window": _BOOL,
    "layer_types": _LIST_STR,
    "hybrid_override_pattern": Kind("str", None, MAX_LAYERS),
    "mlp_only_layers": Kind("list_int", 0, MAX_LAYERS),
    "attn_layer_indices": Kind("list_int", 0, MAX_LAYERS),
    "n_routed_experts": _EXPERTS,
    "num_experts": _EXPERTS,
    "num_local_experts": _EXPERTS,
    "num_experts_per_tok": _EXPERTS,
    "n_shared_experts": _EXPERTS,
    "kv_lora_rank": _DIM,
    "q_lora_rank": _DIM,
    "qk_rope_head_dim": _DIM,
    "qk_nope_head_dim": _DIM,
    "v_head_dim": _DIM,
    "full_attention_interval": _LAYERS,
    "mtp_num_hidden_layers": _LAYERS,
    "num_nextn_predict_layers": _LAYERS,
    "linear_num_key_heads": _HEADS,
    "linear_num_value_heads": _HEADS,
    "linear_key_head_dim": _DIM,
    "linear_value_head_dim": _DIM,
    "mamba_num_heads": _HEADS,
    "mamba_head_dim": _DIM,
    "ssm_state_size": _DIM,
    "block_size": _COUNT,
}


# --- the plain check: "valid" only where pydantic surely agrees, else "not sure" ---------------------------------

def _plain_str(k: object) -> bool:
    # pydantic refuses a key that is not a str, and a key or a constrained str it cannot encode as UTF-8 (a lone
    # surrogate); every str is held to that here
    if type(k) is not str:
        return False
    if k.isascii():
        return True
    try:
        k.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _plain_int(v: object, kind: Kind) -> bool:
    return type(v) is int and kind.lo is not None and kind.hi is not None and kind.lo <= v <= kind.hi  # type: ignore[operator]


def _plain_value(v: object, kind: Kind) -> bool:  # noqa: PLR0911 - one branch a kind
    if v is None:
        return True
    k = kind.kind
    if k == "int":
        return _plain_int(v, kind)
    if k == "bool":
        return type(v) is bool
    if k == "str":
        return _plain_str(v) and (kind.hi is None or len(v) <= kind.hi)  # type: ignore[arg-type]
    if k == "method":
        return _plain_str(v) and v.lower() in QUANT_METHODS  # type: ignore[attr-defined]
    if k == "list_str":
        return type(v) is list and all(_plain_str(x) for x in v)
    if k == "list_int":
        return type(v) is list and all(_plain_int(x, kind) for x in v)
    if k == "dict":
        return type(v) is dict and all(_plain_str(x) for x in v)
    if k == "quant":
        return type(v) is dict and _plain_level(v, QUANT_FIELDS)
    return False


def _plain_level(level: dict[Any, Any], fields: Mapping[str, Kind]) -> bool:
    for key, value in level.items():
        if not _plain_str(key):
            return False
        kind = fields.get(key)
        if kind is not None and not _plain_value(value, kind):
            return False
    return True


# --- the pydantic models, built from the same table when the plain check is not sure -----------------------------

def _annotation(kind: Kind, quant_model: Any) -> Any:
    from typing import Annotated

    from pydantic import Field

    def strict_int(lo: int | None, hi: int | None) -> Any:
        return Annotated[int, Field(ge=lo, le=hi, strict=True)]

    k = kind.kind
    base: Any
    if k == "int":
        base = strict_int(kind.lo, kind.hi)
    elif k == "bool":
        base = Annotated[bool, Field(strict=True)]
    elif k == "str":
        base = str if kind.hi is None else Annotated[str, Field(max_length=kind.hi)]
    elif k == "method":
        base = str
    elif k == "list_str":
        base = list[str]
    elif k == "list_int":
        base = list[strict_int(kind.lo, kind.hi)]  # type: ignore[misc]
    elif k == "dict":
        base = dict[str, Any]
    elif k == "quant":
        base = quant_model
    else:  # pragma: no cover - every Kind of the tables is handled above
        raise AssertionError(k)
    return (base | None, None)


def _method(cls: Any, v: str | None) -> str | None:
    if v is not None and v.lower() not in QUANT_METHODS:
        raise ValueError(f"unknown quantization method {v!r} (known: {', '.join(QUANT_METHODS)})")
    return v


@cache
def models() -> tuple[type[BaseModel], type[BaseModel]]:
    """(QuantFields, ConfigFields): the pydantic models of QUANT_FIELDS / CONFIG_FIELDS, built on first use."""
    from pydantic import BaseModel, ConfigDict, create_model, field_validator

    class _Fields(BaseModel):
        model_config = ConfigDict(extra="allow", frozen=True, allow_inf_nan=False, protected_namespaces=(),
                                  defer_build=True)

    quant = create_model(  # type: ignore[call-overload]
        "QuantFields", __base__=_Fields,
        __validators__={"_method": field_validator("quant_method")(classmethod(_method))},  # type: ignore[dict-item]
        **{n: _annotation(k, None) for n, k in QUANT_FIELDS.items()})
    config = create_model("ConfigFields", __base__=_Fields,  # type: ignore[call-overload]
                          **{n: _annotation(k, quant) for n, k in CONFIG_FIELDS.items()})
    config.__doc__ = "The fields of one level of a config.json (the top level, or `text_config`)."
    _build_without_plugins(quant, config)
    return quant, config


def _build_without_plugins(*built: type[BaseModel]) -> None:
    """Build the validators now, as typer builds its own (typer/_adapters.py::disabled_pydantic_plugins@0.29):
    without pydantic's plugin lookup (pydantic/plugin/_loader.py::get_plugins@2, an entry-point scan of every
    installed distribution), which these input models have no use for."""
    before = os.environ.get(_NO_PLUGINS)
    os.environ[_NO_PLUGINS] = "__all__"
    try:
        for model in built:
            model.model_rebuild(force=True)
    finally:
        if before is None:
            del os.environ[_NO_PLUGINS]
        else:
            os.environ[_NO_PLUGINS] = before


_NO_PLUGINS = "PYDANTIC_DISABLE_PLUGINS"


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


def validate_level_with_pydantic(level: Mapping[str, Any], name: str, prefix: str = "") -> None:
    """The pydantic model's verdict on one level: a ConfigError of one line on its first error."""
    from pydantic import ValidationError

    try:
        models()[1].model_validate(dict(level))
    except ValidationError as exc:
        raise ConfigError(_first_line(name, exc, prefix)) from None


def validate_config(config: Mapping[str, Any], name: str) -> None:
    """Check the fields the planner reads (top level and `text_config`); a ConfigError of one line on the first bad
    one."""
    for prefix, level in (("", config), ("text_config.", config.get("text_config"))):
        if not isinstance(level, Mapping):
            continue
        as_dict = dict(level)
        if not _plain_level(as_dict, CONFIG_FIELDS):
            validate_level_with_pydantic(as_dict, name, prefix)
