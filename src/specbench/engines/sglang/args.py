"""Parse a pasted SGLang launch command (`python -m sglang.launch_server ...` / `sglang serve ...`) into
`SglangArgs`: the memory-relevant server arguments, each flag spelled as the targeted version spells it
(sglang/srt/server_args.py ServerArgs.add_cli_args in <= 0.5.13; sglang/srt/arg_groups/fields/*.py later).

Flags that do not affect memory are collected in `ignored` so the plan can say so.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from specbench.engines.argv import split_command  # noqa: F401  (re-exported for callers)
from specbench.errors import FlagError

# flag -> (field, type). Aliases map to the same field.
_FLAGS: dict[str, tuple[str, Any]] = {
    "--model-path": ("model_path", str), "--model": ("model_path", str),
    "--tp": ("tp", int), "--tp-size": ("tp", int), "--tensor-parallel-size": ("tp", int),
    "--dp": ("dp", int), "--dp-size": ("dp", int), "--data-parallel-size": ("dp", int),
    "--pp": ("pp", int), "--pp-size": ("pp", int),
    "--mem-fraction-static": ("mem_fraction_static", float), "--mem-frac": ("mem_fraction_static", float),
    "--max-running-requests": ("max_running_requests", int),
    "--context-length": ("context_length", int),
    "--chunked-prefill-size": ("chunked_prefill_size", int),
    "--max-prefill-tokens": ("max_prefill_tokens", int),
    "--max-total-tokens": ("max_total_tokens", int),
    "--page-size": ("page_size", int),
    "--kv-cache-dtype": ("kv_cache_dtype", str),
    "--dtype": ("dtype", str),
    "--quantization": ("quantization", str),
    "--load-format": ("load_format", str),
    "--speculative-algorithm": ("speculative_algorithm", str), "--speculative-algo": ("speculative_algorithm", str),
    "--speculative-num-draft-tokens": ("speculative_num_draft_tokens", int),
    "--speculative-dflash-block-size": ("speculative_dflash_block_size", int),
    "--speculative-ddtree-budget": ("speculative_ddtree_budget", int),
    "--speculative-num-steps": ("speculative_num_steps", int),
    "--speculative-eagle-topk": ("speculative_eagle_topk", int),
    "--speculative-draft-model-path": ("speculative_draft_model_path", str),
    "--speculative-draft": ("speculative_draft_model_path", str),
    "--speculative-draft-kv-cache-dtype": ("speculative_draft_kv_cache_dtype", str),
    "--mamba-scheduler-strategy": ("mamba_strategy", str),
    "--mamba-radix-cache-strategy": ("mamba_strategy", str),
    "--mamba-full-memory-ratio": ("mamba_full_memory_ratio", float),
    "--max-mamba-cache-size": ("max_mamba_cache_size", int),
    "--mamba-ssm-dtype": ("mamba_ssm_dtype", str),
    "--cuda-graph-max-bs": ("cuda_graph_max_bs", int),
    "--attention-backend": ("attention_backend", str),
    "--linear-attn-backend": ("linear_attn_backend", str),
    "--cuda-graph-backend-decode": ("cuda_graph_backend_decode", str),
    "--cuda-graph-backend-prefill": ("cuda_graph_backend_prefill", str),
}
_BOOL_FLAGS: dict[str, str] = {
    "--enable-dp-attention": "enable_dp_attention",
    "--disable-radix-cache": "disable_radix_cache",
    "--disable-overlap-schedule": "disable_overlap_schedule",
    "--disable-cuda-graph": "disable_cuda_graph",
    "--enable-linear-replayssm-spec": "enable_linear_replayssm_spec",
    "--language-only": "language_only", "--language-model-only": "language_only",
    "--skip-tokenizer-init": "skip_tokenizer_init",
    "--enable-torch-compile": "enable_torch_compile",
    "--disable-piecewise-cuda-graph": "disable_piecewise_cuda_graph",
}
# flags that take a value but do not change the memory plan
_VALUE_NO_MEMORY = {
    "--host", "--port", "--log-level", "--served-model-name", "--tokenizer-path", "--tokenizer-mode",
    "--chat-template", "--api-key", "--trust-remote-code-revision", "--revision", "--random-seed", "--nnodes",
    "--node-rank", "--dist-init-addr", "--tool-call-parser", "--reasoning-parser", "--sampling-backend",
    "--grammar-backend", "--mm-feature-transport",
    "--schedule-policy", "--watchdog-timeout", "--download-dir", "--base-gpu-id", "--stream-interval",
    "--file-storage-path", "--log-requests-level", "--speculative-draft-load-format", "--device",
    "--speculative-draft-attention-backend", "--max-queued-requests", "--schedule-conservativeness",
    "--decode-log-interval", "--warmups", "--tokenizer-worker-num", "--dist-timeout",
}


@dataclass(frozen=True)
class SglangArgs:
    model_path: str | None = None
    tp: int = 1
    dp: int = 1
    pp: int = 1
    enable_dp_attention: bool = False
    mem_fraction_static: float | None = None
    max_running_requests: int | None = None
    context_length: int | None = None
    chunked_prefill_size: int | None = None
    max_prefill_tokens: int | None = None
    max_total_tokens: int | None = None
    page_size: int | None = None
    kv_cache_dtype: str = "auto"
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
    env: tuple[tuple[str, str], ...] = ()
    ignored: tuple[str, ...] = field(default=(), compare=False)
    flags_seen: tuple[str, ...] = field(default=(), compare=False)

    def with_(self, **kw: Any) -> "SglangArgs":
        return replace(self, **kw)

    @property
    def spec_algorithm(self) -> str | None:
        a = (self.speculative_algorithm or "").upper()
        return a or None

    def to_argv(self) -> list[str]:
        """A canonical launch command for these arguments (memory-relevant flags only)."""
        argv = ["python", "-m", "sglang.launch_server"]
        for flag, (name, _typ) in _FLAGS.items():
            if flag in ("--model", "--tp-size", "--tensor-parallel-size", "--dp-size", "--data-parallel-size",
                        "--pp-size", "--mem-frac", "--speculative-algo", "--speculative-draft",
                        "--mamba-radix-cache-strategy"):
                continue
            v = getattr(self, name)
            if v is None or (name in ("tp", "dp", "pp") and v == 1) or (name in ("kv_cache_dtype", "dtype") and v == "auto"):
                continue
            if flag == "--mamba-scheduler-strategy" and "--mamba-radix-cache-strategy" in self.flags_seen:
                flag = "--mamba-radix-cache-strategy"
            argv += [flag, str(v)]
        for flag, name in _BOOL_FLAGS.items():
            if getattr(self, name) and flag not in ("--language-model-only",):
                argv.append(flag)
        return argv


def parse_sglang_argv(argv: list[str]) -> SglangArgs:
    """Parse the arguments of an SGLang launch command. Leading `VAR=value` words become env."""
    args = list(argv)
    env: list[tuple[str, str]] = []
    while args and "=" in args[0] and not args[0].startswith("-") and args[0].split("=", 1)[0].isidentifier():
        k, v = args.pop(0).split("=", 1)
        env.append((k, v))
    # drop the program: python -m sglang.launch_server | sglang serve | python3 -m sglang.launch_server
    while args and not args[0].startswith("--"):
        args.pop(0)
    kw: dict[str, Any] = {}
    ignored: list[str] = []
    seen: list[str] = []
    i = 0
    while i < len(args):
        tok = args[i]
        if not tok.startswith("--"):
            ignored.append(tok)
            i += 1
            continue
        flag, eq, val = tok.partition("=")
        seen.append(flag)
        if flag in _FLAGS:
            name, typ = _FLAGS[flag]
            if not eq:
                if i + 1 >= len(args) or (args[i + 1].startswith("--")):
                    raise FlagError(f"{flag} needs a value")
                val = args[i + 1]
                i += 1
            try:
                value = typ(val)
            except ValueError:
                raise FlagError(f"{flag}: expected {typ.__name__}, got {val!r}") from None
            if typ in (int, float) and value < 0 and name not in ("chunked_prefill_size",):
                raise FlagError(f"{flag} must not be negative, got {val}")
            kw[name] = value
        elif flag in _BOOL_FLAGS:
            kw[_BOOL_FLAGS[flag]] = True
        else:
            ignored.append(flag)
            if not eq and flag in _VALUE_NO_MEMORY and i + 1 < len(args):
                i += 1
            elif not eq and i + 1 < len(args) and not args[i + 1].startswith("--") and flag not in _VALUE_NO_MEMORY:
                # unknown flag with a value: keep the value with it
                ignored[-1] = f"{flag} {args[i + 1]}"
                i += 1
        i += 1
    for name in ("tp", "dp", "pp"):
        if name in kw and kw[name] < 1:
            raise FlagError(f"--{name} must be at least 1, got {kw[name]}")
    mfs = kw.get("mem_fraction_static")
    if mfs is not None and not (0.0 < mfs < 1.0):
        raise FlagError(f"--mem-fraction-static must be between 0 and 1, got {mfs}")
    if kw.get("max_running_requests") == 0:
        raise FlagError("--max-running-requests must be at least 1")
    if kw.get("context_length") == 0:
        raise FlagError("--context-length must be positive")
    return SglangArgs(**kw, env=tuple(env), ignored=tuple(ignored), flags_seen=tuple(seen))
