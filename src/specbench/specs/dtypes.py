"""Bytes per element of every dtype name a config, a checkpoint or an engine flag uses: the one table.

Names are compared lower-case without a `torch.` prefix. Engine-specific spellings (vLLM's `fp8_inc`, SGLang's
`fp4_e2m1`) are small alias maps next to their engine that resolve to a name here. fp4 dtypes count one byte per
*packed pair* (torch.float4_e2m1fn_x2), as SGLang allocates them.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from specbench.errors import FlagError

DTYPE_BYTES: dict[str, float] = {
    "float32": 4.0, "fp32": 4.0, "float": 4.0,
    "bfloat16": 2.0, "bf16": 2.0, "float16": 2.0, "fp16": 2.0, "half": 2.0,
    "float8_e4m3fn": 1.0, "float8_e5m2": 1.0, "fp8": 1.0, "fp8_e4m3": 1.0, "fp8_e5m2": 1.0, "mxfp8": 1.0,
    "int8": 1.0,
    "fp4": 1.0, "nvfp4": 1.0, "float4_e2m1fn_x2": 1.0,
}
# what a checkpoint's tensors may also be stored as (safetensors headers: specs/header_weights.py); not dtypes an
# engine flag takes, so they stay out of DTYPE_BYTES (whose names the flags are checked against)
TENSOR_BYTES: dict[str, float] = {
    **DTYPE_BYTES, "float64": 8.0, "float8_e8m0fnu": 1.0, "int64": 8.0, "int32": 4.0, "int16": 2.0, "uint64": 8.0,
    "uint32": 4.0, "uint16": 2.0, "uint8": 1.0, "bool": 1.0,
}


def canonical(name: str) -> str:
    """`torch.BFloat16` -> `bfloat16`."""
    if isinstance(name, str):
        return _canonical(name)  # a plan's fix search asks tens of thousands of times for a handful of names
    return str(name).strip().lower().removeprefix("torch.")


@functools.lru_cache(maxsize=256)
def _canonical(name: str) -> str:
    return name.strip().lower().removeprefix("torch.")


def known(aliases: Mapping[str, str] | None = None) -> list[str]:
    return sorted(set(DTYPE_BYTES) | set(aliases or {}))


def dtype_bytes(name: str, aliases: Mapping[str, str] | None = None, what: str = "dtype") -> float:
    """Bytes per element; `aliases` maps an engine's own spellings onto the table. An unknown name is a FlagError
    listing the known ones (never a silent 2 bytes)."""
    n = canonical(name)
    n = (aliases or {}).get(n, n)
    try:
        return DTYPE_BYTES[n]
    except KeyError:
        raise FlagError(f"unknown {what} {name!r} (known: {', '.join(known(aliases))})") from None
