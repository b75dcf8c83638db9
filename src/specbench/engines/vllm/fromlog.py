"""A vLLM log back to its launch words, for re-planning it (`specbench doctor`): the engine's own
"non-default args: {...}" dump, its CPU KV space and the machine's AVX512-BF16 as the log shows them."""

from __future__ import annotations

import ast
import json
import re

from specbench.engines.vllm import cpu as vllm_cpu
from specbench.engines.vllm.knobs import knob_for_key
from specbench.engines.vllm.loglines import nondefault_args_text

_EXPLICIT = re.compile(r"Explicitly set \(([\d.]+)/([\d.]+)\) GiB for KV cache on node")
_FLAG_OF = {"model_tag": None, "model": None, "host": None, "port": None, "served_model_name": None}


_SSM_RESET = "Reset SSM cache type to float32 for accelerated GDN mamba backend"
_SSM_KEPT = "SSM state storage for the CPU accelerated GDN backend"


def avx512_bf16_from_log(text: str) -> bool | None:
    """Whether the CPU that produced a vLLM CPU log has AVX512-BF16, from the engine's own lines: 0.30+
    vllm/platforms/cpu.py::CpuPlatform.check_and_update_config@0.32.0 logs "Reset SSM cache type to float32 ..."
    (or "Using ... SSM state storage for the CPU accelerated GDN backend.") exactly when
    torch.cpu._is_avx512_bf16_supported() and the SSM dtype was not float32 already. None when the log cannot
    tell (not a CPU boot past its config, or --mamba-ssm-cache-dtype float32)."""
    if _SSM_RESET in text or _SSM_KEPT in text:
        return True
    if "device_config=cpu" not in text or "mamba_ssm_cache_dtype': 'float32'" in text:
        return None
    return False


def argv_from_vllm_log(text: str) -> list[str] | None:
    """The launch words (env + `vllm serve MODEL flags`) a vLLM log implies, for re-planning it: the engine's own
    "non-default args: {...}" dump (api_utils.py), plus the CPU KV space from "Explicitly set (X/Y) GiB for KV
    cache" when no --kv-cache-memory-bytes was given, and VLLM_ALLOW_LONG_MAX_MODEL_LEN when the engine warned
    about it. None when the log has no argument dump."""
    args: dict[str, object] | None = None  # the dump's keys are vLLM's argument names
    cpu = False
    space: str | None = None
    allow_long = False
    for line in text.splitlines():
        if args is None and (dump := nondefault_args_text(line) or "").endswith("}"):
            try:
                val = ast.literal_eval(dump)
            except (ValueError, SyntaxError):
                continue
            if isinstance(val, dict):
                args = val
        elif (m := _EXPLICIT.search(line)):
            cpu, space = True, m.group(1)
        elif "CPU KV cache size:" in line or "device_config=cpu" in line:
            cpu = True
        elif "VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme caution" in line and "warn" in line.lower():
            allow_long = True
        elif "User-specified max_model_len" in line and "WARNING" in line:
            allow_long = True
    if args is None:
        return None
    words: list[str] = []
    if allow_long:
        words.append("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1")
    if cpu and (bf16 := avx512_bf16_from_log(text)) is not None and args.get("mamba_ssm_cache_dtype") != "float32":
        words.append(f"{vllm_cpu.AVX512_BF16_ENV}={int(bf16)}")   # the machine the log came from
    if cpu and space is not None and args.get("kv_cache_memory_bytes") is None:
        gib = float(space)
        words.append(f"VLLM_CPU_KVCACHE_SPACE={int(gib) if gib.is_integer() else gib}")
    elif cpu:
        words.append("VLLM_TARGET_DEVICE=cpu")
    words += ["vllm", "serve", str(args.get("model") or args.get("model_tag") or "MODEL")]
    for key, val in args.items():
        knob = knob_for_key(key)
        if key in _FLAG_OF or val is None or (val is False and not (knob and knob.negatable)):
            continue
        flag = knob.flag if knob else "--" + key.replace("_", "-")
        if val is False and knob is not None:
            words.append(knob.negations[0])  # a switch the user turned off (`--no-enable-prefix-caching`)
        elif isinstance(val, dict):  # JSON-valued flags: --speculative-config, --compilation-config, --hf-overrides
            words += [flag, json.dumps(val)]
        elif val is True:
            words.append(flag)
        elif isinstance(val, (int, float, str)):
            words += [flag, str(val)]
    return words
