"""The shared vocabulary of vLLM's sizing modules: the rule-set releases, GiB and `format_gib` as vLLM prints it,
the dtype names its rules accept (sized by specs/dtypes.py), ceil division."""

from __future__ import annotations

from specbench.contracts import GIB
from specbench.engines import versions
from specbench.errors import FlagError
from specbench.specs import dtypes

Version = versions.Version
# the releases where a rule changes (read from the wheels of every release 0.10.2 .. 0.33.0; each `v >= (...)`
# check sits beside the rule it switches); a newer release is planned with the newest rules
VLLM_RULE_SETS = ("0.8.0", "0.11.0", "0.12.0", "0.13.0", "0.14.0", "0.15.0", "0.17.0", "0.18.0", "0.19.0", "0.20.0",
                  "0.21.0", "0.22.0", "0.26.0", "0.27.0", "0.28.0", "0.29.0", "0.30.0", "0.32.0", "0.33.0")
NEWEST_VLLM = VLLM_RULE_SETS[-1]

# the dtype names vLLM's rules accept (config/cache.py CacheDType, model dtypes), sized by specs/dtypes.py
VLLM_DTYPES = ("float32", "float", "fp32", "bfloat16", "bf16", "float16", "half", "fp16", "fp8", "fp8_e4m3",
               "fp8_e5m2", "fp8_inc", "int8")
VLLM_DTYPE_ALIASES = {"fp8_inc": "fp8"}  # Intel Gaudi's fp8 KV cache


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def format_gib(b: float) -> str:
    """vllm/utils/mem_utils.py::format_gib: str(round(b / 2**30, 2))."""
    return str(round(b / GIB, 2))


def dtype_bytes(name: str) -> int:
    n = dtypes.canonical(name)
    if n not in VLLM_DTYPES:
        raise FlagError(f"unknown dtype {name!r} (known: {', '.join(VLLM_DTYPES)})")
    return int(dtypes.dtype_bytes(n, VLLM_DTYPE_ALIASES))
