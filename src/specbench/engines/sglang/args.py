"""Parse a pasted SGLang launch command (`python -m sglang.launch_server ...` / `sglang serve ...`) into
`SglangArgs`: the memory-relevant server arguments, each flag spelled as the targeted version spells it
(sglang/srt/server_args.py ServerArgs.add_cli_args in <= 0.5.13; sglang/srt/arg_groups/fields/*.py later).

Flags are read as the release's own argparse reads them (engines/sglang/knobs.py: exact, or a unique prefix of
one of the release's flags). Known flags that do not affect memory are collected in `ignored` so the plan can say
so; flags the release does not have are collected in `unknown` (the engine would refuse them at start).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from specbench.engines.argv import LaunchArgs, leading_env
from specbench.engines.sglang.knobs import BY_FLAG, Knob, release_flags
from specbench.errors import FlagError


@dataclass(frozen=True)
class SglangArgs(LaunchArgs):
    model_path: str | None = None
    ep: int = 1
    enable_dp_attention: bool = False
    mem_fraction_static: float | None = None
    max_running_requests: int | None = None
    context_length: int | None = None
    chunked_prefill_size: int | None = None
    max_prefill_tokens: int | None = None
    max_total_tokens: int | None = None
    page_size: int | None = None
    kv_cache_dtype: str = "auto"
    swa_full_tokens_ratio: float | None = None
    disable_hybrid_swa_memory: bool = False
    dtype: str = "auto"
    quantization: str | None = None
    load_format: str | None = None
    speculative_algorithm: str | None = None
    speculative_num_draft_tokens: int | None = None
    speculative_dflash_block_size: int | None = None
    speculative_ddtree_budget: int | None = None
    speculative_num_steps: int | None = None
    speculative_eagle_topk: int | None = None
    speculative_draft_model_path: str | None = None
    speculative_draft_kv_cache_dtype: str | None = None
    mamba_strategy: str | None = None
    mamba_full_memory_ratio: float | None = None
    max_mamba_cache_size: int | None = None
    mamba_ssm_dtype: str | None = None
    cuda_graph_max_bs: int | None = None
    attention_backend: str | None = None
    linear_attn_backend: str | None = None
    cuda_graph_backend_decode: str | None = None
    cuda_graph_backend_prefill: str | None = None
    disable_radix_cache: bool = False
    disable_overlap_schedule: bool = False
    disable_cuda_graph: bool = False
    disable_piecewise_cuda_graph: bool = False
    enable_linear_replayssm_spec: bool = False
    language_only: bool = False
    skip_tokenizer_init: bool = False
    enable_torch_compile: bool = False
    release: str | None = field(default=None, compare=False)  # the release whose flag list read the command

    @property
    def spec_algorithm(self) -> str | None:
        a = (self.speculative_algorithm or "").upper()
        return a or None


def parse_sglang_argv(argv: list[str], release: str | None = None) -> SglangArgs:
    """Parse the arguments of an SGLang launch command as `release` reads them (default: the newest flag list).
    Leading `VAR=value` words become env."""
    env, args = leading_env(argv)
    # drop the program: python -m sglang.launch_server | sglang serve | python3 -m sglang.launch_server
    while args and not args[0].startswith("--"):
        args.pop(0)
    flags = release_flags(release)
    kw: dict[str, Any] = {}
    ignored: list[str] = []
    unknown: list[str] = []
    seen: list[str] = []
    i = 0
    while i < len(args):
        tok = args[i]
        if not tok.startswith("--"):
            ignored.append(tok)
            i += 1
            continue
        flag, eq, val = tok.partition("=")
        knob, canonical = _knob_for(flag, flags)
        seen.append(flag)
        takes_value = (not knob.is_switch) if knob else (canonical is None or flags.takes_value(canonical))
        if not eq and takes_value and i + 1 < len(args) and not args[i + 1].startswith("--"):
            val, eq = args[i + 1], "="
            i += 1
        i += 1
        if knob is None:
            (ignored if canonical else unknown).append(flag + (f" {val}" if eq and takes_value else ""))
        elif knob.is_switch:
            kw[knob.field] = True
        else:
            kw[knob.field] = _value(knob, flag, val if eq else None)
    for name in ("tp", "dp", "pp", "ep"):
        if name in kw and kw[name] < 1:
            raise FlagError(f"--{name} must be at least 1, got {kw[name]}")
    mfs = kw.get("mem_fraction_static")
    if mfs is not None and not (0.0 < mfs < 1.0):
        raise FlagError(f"--mem-fraction-static must be between 0 and 1, got {mfs}")
    if kw.get("max_running_requests") == 0:
        raise FlagError("--max-running-requests must be at least 1")
    if kw.get("context_length") == 0:
        raise FlagError("--context-length must be positive")
    if kw.get("page_size") == 0:
        raise FlagError("--page-size must be at least 1")
    swa = kw.get("swa_full_tokens_ratio")
    # server_args.py::ServerArgs._handle_cache_compatibility@0.5.15.post1 (its text)
    if swa is not None and not (0.0 < swa <= 1.0):
        raise FlagError("--swa-full-tokens-ratio should be in range (0, 1.0].")
    _check_choices(kw)
    return SglangArgs(**kw, env=tuple(env), ignored=tuple(ignored), unknown=tuple(unknown),
                      release=flags.release, flags_seen=tuple(seen))


MAX_INT_FLAG = 1 << 40  # above any token, request or page count a GPU can hold
# server_args.py `choices=` of --dtype / --kv-cache-dtype (identical in 0.5.12.post1 and 0.5.15.post1)
DTYPE_CHOICES = ("auto", "half", "float16", "bfloat16", "float", "float32")
KV_CACHE_DTYPE_CHOICES = ("auto", "fp8_e5m2", "fp8_e4m3", "bf16", "bfloat16", "fp4_e2m1")


def _check_choices(kw: Mapping[str, object]) -> None:
    """argparse `choices=` of --dtype (DTYPE_CHOICES, the same in every release read): refused with the list,
    never planned as if known. An empty speculative algorithm is refused; an unknown name is planned as the start
    failure the engine prints, with its list (start_checks.check_choices), as is --kv-cache-dtype per release."""
    dtype = kw.get("dtype")
    if dtype is not None and dtype not in DTYPE_CHOICES:
        raise FlagError(f"--dtype: invalid choice {dtype!r} (choose from {', '.join(DTYPE_CHOICES)})")
    algo = kw.get("speculative_algorithm")
    if algo is not None and not str(algo).strip():
        raise FlagError("--speculative-algorithm needs an algorithm name, got an empty one")


def _knob_for(flag: str, flags: Any) -> tuple[Knob | None, str | None]:
    """(the memory knob, the release's own option) `flag` names; a fork-only knob is taken by its exact spelling."""
    canonical = flags.resolve(flag)  # FlagError for an ambiguous prefix, as the engine's argparse
    if canonical is None:
        knob = BY_FLAG.get(flag)
        return (knob, flag) if knob is not None and knob.fork_only else (None, None)
    return BY_FLAG.get(canonical), canonical


def _value(knob: Knob, flag: str, val: str | None) -> Any:
    if val is None:
        raise FlagError(f"{flag} needs a value")
    assert knob.type is not None
    try:
        value = knob.type(val)
    except ValueError:
        raise FlagError(f"{flag}: expected {knob.type.__name__}, got {val!r}") from None
    if isinstance(value, float) and value != value or value in (float("inf"), float("-inf")):
        raise FlagError(f"{flag}: expected a finite number, got {val!r}")
    if isinstance(value, int) and value > MAX_INT_FLAG:  # the engine's int64 tensors / pools could never hold it
        raise FlagError(f"{flag} is out of range: {val} (at most {MAX_INT_FLAG})")
    if isinstance(value, (int, float)) and value < 0 and knob.field != "chunked_prefill_size":
        raise FlagError(f"{flag} must not be negative, got {val}")
    return value
