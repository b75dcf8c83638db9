"""Parse a pasted vLLM launch command into `VllmArgs`.

Accepted shapes: `vllm serve MODEL [flags]`, `python -m vllm.entrypoints.openai.api_server --model MODEL [flags]`,
an absolute `/path/to/bin/vllm serve ...`, each optionally preceded by `VAR=value` words (the environment:
`VLLM_CPU_KVCACHE_SPACE=4 vllm serve ...`).

Flag spelling follows vLLM's own parser (vllm/utils/argparse_utils.py::FlexibleArgumentParser): `--a_b` equals
`--a-b`, `--flag=value` equals `--flag value`, `-tp`/`-pp`/`-dp` are the short forms, and argparse's unique-prefix
rule makes `--kv-cache-memory=...` (the spelling in vLLM's own start-up hint) mean `--kv-cache-memory-bytes`.
Integers of `--kv-cache-memory-bytes` and `--max-num-batched-tokens` go through `human_readable_int`
(k/m/g/t decimal, K/M/G/T binary, no decimals with binary suffixes), `--max-model-len` through
`human_readable_int_or_auto` (-1 / auto = fit to memory) (vllm/utils/argparse_utils.py).

Flags that do not change the memory plan are listed in `ignored` so the plan can say so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from specbench.engines.cli_flags import FlagList, flag_list
from specbench.errors import FlagError


def human_readable_int(value: str) -> int:
    """vllm/utils/argparse_utils.py::human_readable_int."""
    v = value.strip()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", v)
    if m:
        number, suffix = m.groups()
        dec = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
        binary = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
        if suffix in dec:
            return int(float(number) * dec[suffix])
        if "." in number:
            raise FlagError(f"Decimals are not allowed with binary suffixes like {suffix}. "
                            f"Did you mean to use {number}{suffix.lower()} instead?")
        return int(number) * binary[suffix]
    try:
        return int(v)
    except ValueError:
        raise FlagError(f"expected an integer (like 4096, 32k or 2G), got {value!r}") from None


def human_readable_int_or_auto(value: str) -> int:
    """vllm/utils/argparse_utils.py::human_readable_int_or_auto: -1 or 'auto' mean fit to memory."""
    if value.strip().lower() in ("auto", "-1"):
        return -1
    return human_readable_int(value)


def _bool_word(v: str) -> bool:
    s = v.strip().lower()
    if s in ("1", "true", "yes", "on"):
        return True
    if s in ("0", "false", "no", "off"):
        return False
    raise FlagError(f"expected true/false, got {v!r}")


@dataclass(frozen=True)
class SpeculativeConfig:
    """`--speculative-config '{json}'` (vllm/config/speculative.py::SpeculativeConfig)."""

    method: str | None
    model: str | None
    num_speculative_tokens: int
    draft_tensor_parallel_size: int | None = None
    raw: tuple[tuple[str, str], ...] = ()

    @property
    def uses_draft_weights(self) -> bool:
        return (self.method or "") not in ("ngram", "ngram_gpu", "suffix", "custom_class")

    @property
    def kind(self) -> str:
        """The method name vLLM resolves: given, else 'draft_model' with a model, 'ngram' without."""
        if self.method:
            return self.method
        return "draft_model" if self.model else "ngram"


def parse_speculative_config(text: str) -> SpeculativeConfig:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FlagError(f"--speculative-config is not valid JSON: {exc.msg} (at {exc.pos})") from None
    if not isinstance(data, dict):
        raise FlagError("--speculative-config must be a JSON object")
    k = data.get("num_speculative_tokens")
    if k is None:
        raise FlagError("--speculative-config needs num_speculative_tokens")
    try:
        k = int(k)
    except (TypeError, ValueError):
        raise FlagError(f"--speculative-config: num_speculative_tokens must be an integer, got {k!r}") from None
    if k < 1:
        raise FlagError(f"--speculative-config: num_speculative_tokens must be at least 1, got {k}")
    dtp = data.get("draft_tensor_parallel_size")
    method = data.get("method")
    return SpeculativeConfig(method=str(method) if method else None,
                             model=str(data["model"]) if data.get("model") else None,
                             num_speculative_tokens=k,
                             draft_tensor_parallel_size=int(dtp) if dtp is not None else None,
                             raw=tuple(sorted((str(a), json.dumps(b)) for a, b in data.items())))


# flag -> (field, converter); every alias maps to the same field. Names as in vllm/engine/arg_utils.py.
_VALUE_FLAGS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "--model": ("model", str),
    "--tensor-parallel-size": ("tp", int), "-tp": ("tp", int),
    "--pipeline-parallel-size": ("pp", int), "-pp": ("pp", int),
    "--data-parallel-size": ("dp", int), "-dp": ("dp", int),
    "--gpu-memory-utilization": ("gpu_memory_utilization", float),
    "--kv-cache-memory-bytes": ("kv_cache_memory_bytes", human_readable_int),
    "--max-model-len": ("max_model_len", human_readable_int_or_auto),
    "--max-num-seqs": ("max_num_seqs", int),
    "--max-num-batched-tokens": ("max_num_batched_tokens", human_readable_int),
    "--block-size": ("block_size", int),
    "--kv-cache-dtype": ("kv_cache_dtype", str),
    "--dtype": ("dtype", str),
    "--quantization": ("quantization", str), "-q": ("quantization", str),
    "--speculative-config": ("speculative", parse_speculative_config),
    "--mamba-cache-dtype": ("mamba_cache_dtype", str),
    "--mamba-ssm-cache-dtype": ("mamba_ssm_cache_dtype", str),
    "--mamba-cache-mode": ("mamba_cache_mode", str),
    "--mamba-block-size": ("mamba_block_size", int),
    "--num-gpu-blocks-override": ("num_gpu_blocks_override", int),
    "--device": ("device", str),
    "--performance-mode": ("performance_mode", str),
    "--compilation-config": ("compilation_config", str), "-cc": ("compilation_config", str),
    "--swap-space": ("swap_space", float),
    "--cpu-offload-gb": ("cpu_offload_gb", float),
}
_BOOL_FLAGS: dict[str, tuple[str, bool]] = {
    "--enforce-eager": ("enforce_eager", True),
    "--enable-prefix-caching": ("enable_prefix_caching", True),
    "--no-enable-prefix-caching": ("enable_prefix_caching", False),
    "--enable-chunked-prefill": ("enable_chunked_prefill", True),
    "--no-enable-chunked-prefill": ("enable_chunked_prefill", False),
    "--disable-hybrid-kv-cache-manager": ("disable_hybrid_kv_cache_manager", True),
    "--language-model-only": ("language_model_only", True),
}
# flags that take a value but do not change the memory plan
_VALUE_NO_MEMORY = {
    "--host", "--port", "--served-model-name", "--tokenizer", "--tokenizer-mode", "--chat-template", "--api-key",
    "--revision", "--tokenizer-revision", "--seed", "--download-dir", "--load-format", "--uvicorn-log-level",
    "--tool-call-parser", "--reasoning-parser", "--generation-config", "--max-logprobs", "--config",
    "--allowed-local-media-path", "--root-path", "--middleware", "--distributed-executor-backend",
    "--hf-overrides", "--override-generation-config", "--chat-template-content-format", "--response-role",
    "--ssl-keyfile", "--ssl-certfile", "--lora-modules", "--max-loras", "--max-lora-rank", "--otlp-traces-endpoint",
    "--worker-cls", "--api-server-count", "--data-parallel-address", "--data-parallel-rpc-port",
    "--limit-mm-per-prompt", "--mm-processor-kwargs", "--optimization-level", "-O",
}
_ALL_LONG = sorted(set(_VALUE_FLAGS) | set(_BOOL_FLAGS) | _VALUE_NO_MEMORY)


@dataclass(frozen=True)
class VllmArgs:
    model: str | None = None
    tp: int = 1
    pp: int = 1
    dp: int = 1
    gpu_memory_utilization: float | None = None
    kv_cache_memory_bytes: int | None = None
    max_model_len: int | None = None          # -1 = auto-fit
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    block_size: int | None = None
    kv_cache_dtype: str = "auto"
    dtype: str = "auto"
    quantization: str | None = None
    speculative: SpeculativeConfig | None = None
    mamba_cache_dtype: str = "auto"
    mamba_ssm_cache_dtype: str = "auto"
    mamba_cache_mode: str | None = None
    mamba_block_size: int | None = None
    num_gpu_blocks_override: int | None = None
    device: str | None = None
    performance_mode: str | None = None
    compilation_config: str | None = None
    swap_space: float | None = None
    cpu_offload_gb: float | None = None
    enforce_eager: bool = False
    enable_prefix_caching: bool | None = None
    enable_chunked_prefill: bool | None = None
    disable_hybrid_kv_cache_manager: bool = False
    language_model_only: bool = False
    env: tuple[tuple[str, str], ...] = ()
    ignored: tuple[str, ...] = field(default=(), compare=False)
    unknown: tuple[str, ...] = field(default=(), compare=False)  # flags `vllm serve` of the release does not have
    flags_seen: tuple[str, ...] = field(default=(), compare=False)

    def with_(self, **kw: Any) -> VllmArgs:
        return replace(self, **kw)

    def env_value(self, name: str) -> str | None:
        for k, v in self.env:
            if k == name:
                return v
        return None

    @property
    def num_speculative_tokens(self) -> int:
        return self.speculative.num_speculative_tokens if self.speculative else 0

    @property
    def full_cudagraphs(self) -> bool:
        """FULL graphs are captured (the default FULL_AND_PIECEWISE) unless eager or a cudagraph_mode without FULL."""
        if self.enforce_eager:
            return False
        cc = (self.compilation_config or "").upper()
        m = re.search(r"CUDAGRAPH_MODE\W+(\w+)", cc)
        if m and m.group(1) in ("NONE", "PIECEWISE", "0", "1"):
            return False
        return True

    def to_argv(self) -> list[str]:
        """A canonical `vllm serve` command (memory-relevant flags only, env words first)."""
        argv = [f"{k}={v}" for k, v in self.env] + ["vllm", "serve", self.model or "MODEL"]
        skip = {"--model", "-tp", "-pp", "-dp", "-q", "-cc"}
        for flag, (name, _conv) in _VALUE_FLAGS.items():
            if flag in skip:
                continue
            v = getattr(self, name)
            if v is None or (name in ("tp", "pp", "dp") and v == 1) or (
                    name in ("kv_cache_dtype", "dtype", "mamba_cache_dtype", "mamba_ssm_cache_dtype") and v == "auto"):
                continue
            if name == "speculative":
                v = json.dumps({k: json.loads(j) for k, j in v.raw})
            argv += [flag, str(v)]
        for flag, (name, val) in _BOOL_FLAGS.items():
            if getattr(self, name) is val:
                argv.append(flag)
        return argv


def is_vllm_command(argv: list[str]) -> bool:
    words = [w for w in argv if not _is_env_word(w)][:4]
    head = " ".join(words).lower()
    return "vllm" in head


def _is_env_word(w: str) -> bool:
    return "=" in w and not w.startswith("-") and w.split("=", 1)[0].isidentifier()


def _canonical(flag: str) -> str | None:
    """`--a_b` -> `--a-b`; a unique prefix -> the full flag (argparse allow_abbrev); None when unknown."""
    if flag.startswith("--"):
        flag = "--" + flag[2:].replace("_", "-")
    if flag in _VALUE_FLAGS or flag in _BOOL_FLAGS or flag in _VALUE_NO_MEMORY:
        return flag
    if flag.startswith("--") and len(flag) > 3:
        cands = [f for f in _ALL_LONG if f.startswith(flag)]
        if len(cands) == 1:
            return cands[0]
    return None


def _underscores(flag: str) -> str:
    """FlexibleArgumentParser reads `--a_b` as `--a-b` (vllm/utils/argparse_utils.py@0.32.0)."""
    return "--" + flag[2:].replace("_", "-") if flag.startswith("--") else flag


def release_flags(release: str | None = None) -> FlagList:
    """Every flag `vllm serve` of that release accepts (cli_flags/<release>.txt, tools/engine/vllm_cli_flags.py)."""
    return flag_list(Path(__file__).with_name("cli_flags"), release)


def parse_vllm_argv(argv: list[str], release: str | None = None) -> VllmArgs:
    """Parse the words of a vLLM launch command. Leading `VAR=value` words become `env`."""
    args = list(argv)
    env: list[tuple[str, str]] = []
    while args and _is_env_word(args[0]):
        k, v = args.pop(0).split("=", 1)
        env.append((k, v))
    if args and args[0] == "env":  # `env VAR=1 vllm serve ...`
        args.pop(0)
        while args and _is_env_word(args[0]):
            k, v = args.pop(0).split("=", 1)
            env.append((k, v))
    kw: dict[str, Any] = {}
    # the program: vllm serve MODEL | python -m vllm.entrypoints.openai.api_server | .../bin/vllm serve MODEL
    while args and not args[0].startswith("-"):
        word = args.pop(0)
        if word == "serve" and args and not args[0].startswith("-"):
            kw["model"] = args.pop(0)
            break
    if args and args[0] == "-m":  # python -m vllm.entrypoints.openai.api_server
        args.pop(0)
        if args:
            args.pop(0)
    ignored: list[str] = []
    unknown: list[str] = []
    seen: list[str] = []
    i = 0
    while i < len(args):
        tok = args[i]
        if not tok.startswith("-"):
            ignored.append(tok)
            i += 1
            continue
        raw_flag, eq, val = tok.partition("=")
        flag = _canonical(raw_flag)
        if flag is None:
            known = release_flags(release).resolve(_underscores(raw_flag)) is not None
            bucket = ignored if known else unknown
            if not eq and i + 1 < len(args) and not args[i + 1].startswith("-"):
                bucket.append(f"{raw_flag} {args[i + 1]}")
                i += 2
            else:
                bucket.append(tok)
                i += 1
            continue
        seen.append(flag)
        if flag in _VALUE_FLAGS:
            name, conv = _VALUE_FLAGS[flag]
            if not eq:
                if i + 1 >= len(args) or (args[i + 1].startswith("--") and flag != "--max-model-len"):
                    raise FlagError(f"{flag} needs a value")
                val = args[i + 1]
                i += 1
            try:
                value = conv(val)
            except FlagError as exc:
                raise FlagError(f"{flag}: {exc}") from None
            except ValueError:
                typ = getattr(conv, "__name__", "value")
                raise FlagError(f"{flag}: expected {typ}, got {val!r}") from None
            kw[name] = value
        elif flag in _BOOL_FLAGS:
            name, switch_value = _BOOL_FLAGS[flag]
            kw[name] = _bool_word(val) if eq else switch_value
        else:
            ignored.append(flag if eq or i + 1 >= len(args) else f"{flag} {args[i + 1]}")
            if not eq and i + 1 < len(args) and not args[i + 1].startswith("--"):
                i += 1
        i += 1
    _validate(kw)
    return VllmArgs(**kw, env=tuple(env), ignored=tuple(ignored), unknown=tuple(unknown),
                    flags_seen=tuple(seen))


def _validate(kw: dict[str, Any]) -> None:
    for name, flag in (("tp", "--tensor-parallel-size"), ("pp", "--pipeline-parallel-size"),
                       ("dp", "--data-parallel-size")):
        if name in kw and kw[name] < 1:
            raise FlagError(f"{flag} must be at least 1, got {kw[name]}")
    u = kw.get("gpu_memory_utilization")
    if u is not None and not (0.0 < u <= 1.0):
        raise FlagError(f"--gpu-memory-utilization must be in (0, 1], got {u}")
    for name, flag in (("max_num_seqs", "--max-num-seqs"), ("max_num_batched_tokens", "--max-num-batched-tokens"),
                       ("block_size", "--block-size")):
        if name in kw and kw[name] < 1:
            raise FlagError(f"{flag} must be at least 1, got {kw[name]}")
    L = kw.get("max_model_len")
    if L is not None and L != -1 and L < 1:
        raise FlagError(f"--max-model-len must be positive (or -1/auto), got {L}")
    kvb = kw.get("kv_cache_memory_bytes")
    if kvb is not None and kvb < 0:
        raise FlagError(f"--kv-cache-memory-bytes must not be negative, got {kvb}")
    mode = kw.get("mamba_cache_mode")
    if mode is not None and mode not in ("none", "align", "all"):
        raise FlagError(f"--mamba-cache-mode must be none, align or all, got {mode!r}")
