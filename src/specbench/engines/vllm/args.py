"""Parse a pasted vLLM launch command into `VllmArgs`, as `vllm serve` of the release reads it.

Accepted shapes: `vllm serve MODEL [flags]`, `python -m vllm.entrypoints.openai.api_server --model MODEL [flags]`,
an absolute `/path/to/bin/vllm serve ...`, each optionally preceded by `VAR=value` words (the environment:
`VLLM_CPU_KVCACHE_SPACE=4 vllm serve ...`).

The words go through the rewrite vLLM's own parser applies before argparse
(vllm/utils/argparse_utils.py::FlexibleArgumentParser.parse_args@0.32.0, `flexible_words`): `--a_b` is `--a-b`
(up to the first `.`), `-O3` / `-O=3` / `-O 3` are `--optimization-level 3`, and dotted keys
(`-cc.cudagraph_mode=NONE`, `--compilation-config.pass_config.x 1`) are merged into one JSON value of their flag.
Then each flag is read as argparse reads it against the release's whole flag list (knobs.release_flags): exact,
or a unique prefix (`--kv-cache-memory=...`, the spelling in vLLM's own start-up hint, is
`--kv-cache-memory-bytes`); an ambiguous prefix is the engine's own error. The memory knobs are knobs.py's table;
value types (human_readable_int for `--kv-cache-memory-bytes` / `--max-num-batched-tokens`,
human_readable_int_or_auto for `--max-model-len`, `--speculative-config` JSON) are values.py's.

Known flags that do not change the memory plan are listed in `ignored` (as the release's option names them) so the
plan can say so; flags the release does not have are listed in `unknown`, as vLLM's "unrecognized arguments"
error prints them (after the rewrite).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from specbench.engines.argv import LaunchArgs, leading_env, values_after
from specbench.engines.cli_flags import FlagList
from specbench.engines.vllm.knobs import BY_FLAG, KNOBS, Knob, release_flags
from specbench.engines.vllm.values import (
    SpeculativeConfig,
    bool_word,
    human_readable_int,
    parse_speculative_config,
)
from specbench.errors import FlagError


@dataclass(frozen=True)
class VllmArgs(LaunchArgs):
    model: str | None = None
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
    spec_method: str | None = None    # --spec-method / --spec-model / --spec-tokens: folded into `speculative`
    spec_model: str | None = None     # by parse_vllm_argv (_fold_spec_flags), None after it
    spec_tokens: int | None = None
    mamba_cache_dtype: str = "auto"
    mamba_ssm_cache_dtype: str = "auto"
    mamba_cache_mode: str | None = None
    mamba_block_size: int | None = None
    num_gpu_blocks_override: int | None = None
    device: str | None = None
    performance_mode: str | None = None
    compilation_config: str | None = None
    max_cudagraph_capture_size: int | None = None
    optimization_level: str | None = None
    hf_overrides: str | None = None           # --hf-overrides JSON (config keys replaced before vLLM reads them)
    swap_space: float | None = None
    cpu_offload_gb: float | None = None
    enforce_eager: bool = False
    enable_prefix_caching: bool | None = None
    enable_chunked_prefill: bool | None = None
    disable_hybrid_kv_cache_manager: bool = False
    language_model_only: bool = False
    enable_expert_parallel: bool = False

    def env_value(self, name: str) -> str | None:
        for k, v in self.env:
            if k == name:
                return v
        return None

    @property
    def num_speculative_tokens(self) -> int:
        return self.speculative.num_speculative_tokens if self.speculative else 0

    @property
    def no_cudagraphs(self) -> bool:
        """No graph is captured: --enforce-eager, -O0, or cudagraph_mode NONE (config/vllm.py@0.32.0)."""
        if self.enforce_eager or (self.optimization_level or "").strip() == "0":
            return True
        return bool(re.search(r"CUDAGRAPH_MODE\W+(NONE|0)\b", (self.compilation_config or "").upper()))

    @property
    def full_cudagraphs(self) -> bool:
        """FULL graphs are captured (the default FULL_AND_PIECEWISE) unless eager, -O0 / -O1 (piecewise only) or a
        cudagraph_mode without FULL."""
        if self.no_cudagraphs or (self.optimization_level or "").strip() == "1":
            return False
        cc = (self.compilation_config or "").upper()
        m = re.search(r"CUDAGRAPH_MODE\W+(\w+)", cc)
        if m and m.group(1) in ("NONE", "PIECEWISE", "0", "1"):
            return False
        return True


    def _cc(self) -> dict[str, object]:
        try:
            cc = json.loads(self.compilation_config or "{}")
        except json.JSONDecodeError:
            return {}
        return cc if isinstance(cc, dict) else {}

    @property
    def cudagraph_capture_sizes(self) -> tuple[int, ...] | None:
        """`-cc.cudagraph_capture_sizes` (CompilationConfig), when given: the sizes captured, replacing the list."""
        sizes = self._cc().get("cudagraph_capture_sizes")
        if isinstance(sizes, list) and sizes and all(isinstance(x, int) for x in sizes):
            return tuple(sizes)
        return None

    @property
    def hf_overrides_dict(self) -> dict[str, object] | None:
        try:
            v = json.loads(self.hf_overrides) if self.hf_overrides else None
        except json.JSONDecodeError:
            return None
        return v if isinstance(v, dict) else None

    @property
    def capture_ceiling(self) -> int | None:
        """--max-cudagraph-capture-size, or the same key inside `-cc` / --compilation-config."""
        if self.max_cudagraph_capture_size is not None:
            return self.max_cudagraph_capture_size
        v = self._cc().get("max_cudagraph_capture_size")
        return v if isinstance(v, int) else None

    def to_argv(self) -> list[str]:
        """A canonical `vllm serve` command (memory-relevant flags only, env words first)."""
        argv = [f"{k}={v}" for k, v in self.env] + ["vllm", "serve", self.model or "MODEL"]
        for knob in KNOBS:
            v = getattr(self, knob.field)
            if knob.is_switch or knob.field == "model" or v is None or (knob.field in ("tp", "pp", "dp") and v == 1) \
                    or (knob.field in ("kv_cache_dtype", "dtype", "mamba_cache_dtype", "mamba_ssm_cache_dtype")
                        and v == "auto"):
                continue
            if knob.field == "speculative":
                v = json.dumps({k: json.loads(j) for k, j in v.raw})
            argv += [knob.flag, str(v)]
        for knob in KNOBS:
            v = getattr(self, knob.field) if knob.is_switch else None
            if v is True:
                argv.append(knob.flag)
            elif v is False and knob.negatable and _TRI_STATE.get(knob.field):
                argv.append(knob.negations[0])  # a tri-state switch (default None) set off
        return argv


_TRI_STATE = {f.name: f.default is None for f in VllmArgs.__dataclass_fields__.values()}


# ----------------------------------------------------------------------------- FlexibleArgumentParser's rewrite

_BEFORE_DOT = re.compile(r"(?<=--)[^\.]*")  # everything between the first -- and the first .


def _dashes(word: str) -> list[str]:
    """One word as FlexibleArgumentParser.parse_args@0.32.0 rewrites it before the dotted keys."""
    if word.startswith("--"):
        key, eq, value = word.partition("=")
        return [_BEFORE_DOT.sub(lambda m: m.group(0).replace("_", "-"), key, count=1) + eq + value]
    if word.startswith("-O") and word != "-O":  # -O3, -Odecode, -O=3
        return ["--optimization-level", word[3:] if word[2] == "=" else word[2:]]
    return [word]


def _dotted_value(text: str) -> object:
    """A dotted key's value: JSON, else a human-readable int, else the text (argparse_utils.py@0.32.0)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        try:
            return human_readable_int(text)
        except (FlagError, ValueError):
            return text


def _merge(original: dict[str, object], update: dict[str, object]) -> None:
    """argparse_utils.py::recursive_dict_update: dicts merge, lists extend, anything else is replaced."""
    for k, v in update.items():
        cur = original.get(k)
        if isinstance(v, dict) and isinstance(cur, dict):
            _merge(cur, v)
        elif isinstance(v, list) and isinstance(cur, list):
            cur += v
        else:
            original[k] = v


def flexible_words(words: list[str]) -> list[str]:
    """The flag words as vLLM's parser hands them to argparse: underscores, -O and dotted keys rewritten; each
    dotted flag's merged JSON is appended at the end, as FlexibleArgumentParser.parse_args does."""
    out: list[str] = []
    for i, word in enumerate(words):
        if word == "-O" and i + 1 < len(words) and words[i + 1] in ("0", "1", "2", "3"):
            out.append("--optimization-level")  # -O <n>
        else:
            out += _dashes(word)
    dicts: dict[str, dict[str, object]] = {}
    drop: set[int] = set()
    for i, word in enumerate(out):
        if i in drop or not word.startswith("-") or "." not in word:
            continue
        name, eq, text = word.partition("=")
        if eq and "." not in name:
            continue  # the '.' was only in the value
        if not eq:
            if i + 1 >= len(out):
                continue  # no value: vLLM itself stops (IndexError); left for argparse to name
            text = out[i + 1]
            drop.add(i + 1)
        if name.endswith("+"):
            name, text = name[:-1], json.dumps(text.split(","))
        key, first, *keys = name.split(".")  # a dotted name: at least one key after the flag
        value = _dotted_value(text)
        for k in reversed(keys):
            value = {k: value}
        _merge(dicts.setdefault(key, {}), {first: value})
        drop.add(i)
    kept = [w for i, w in enumerate(out) if i not in drop]
    for key, value in dicts.items():
        kept += [key, json.dumps(value)]
    return kept


# ----------------------------------------------------------------------------- the launch command


def _program(args: list[str]) -> tuple[str | None, list[str], bool]:
    """(the positional model, the flag words, whether it is `vllm serve`) after the program: vllm serve MODEL |
    python -m vllm.entrypoints.openai.api_server | .../bin/vllm serve MODEL."""
    args = list(args)
    model = None
    serve = False
    while args and not args[0].startswith("-"):
        word = args.pop(0)
        if word == "serve":
            serve = True
            if args and not args[0].startswith("-"):
                model = args.pop(0)
            break
    if args and args[0] == "-m":  # python -m vllm.entrypoints.openai.api_server
        args.pop(0)
        if args:
            args.pop(0)
    return model, args, serve


@dataclass
class _Read:
    """What the flag loop collects (mutable while reading; frozen into VllmArgs at the end)."""

    kw: dict[str, Any] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    seen: list[str] = field(default_factory=list)


def _lookup(name: str, flags: FlagList) -> tuple[tuple[Knob, bool | None] | None, str | None]:
    """(the knob with a switch spelling's value, the release's option) that `name` means; (None, None): unknown.
    A knob is taken by its exact spelling first (a retired one only so); else argparse's rule over the release's
    list, where an ambiguous prefix raises FlagError (the engine's own start-up error)."""
    if name in BY_FLAG:
        return BY_FLAG[name], name
    canonical = flags.resolve(name)
    if canonical is None:
        return None, None
    return BY_FLAG.get(canonical), canonical


def _knob_value(knob: Knob, flag: str, words: list[str], i: int, eq: str, val: str) -> tuple[Any, int]:
    """(the value, the words it took) of the value knob at `i`."""
    used = 1
    if not eq:
        if i + 1 >= len(words) or (words[i + 1].startswith("--") and knob.field != "max_model_len"):
            raise FlagError(f"{flag} needs a value")
        val, used = words[i + 1], 2
    assert knob.type is not None
    try:
        return knob.type(val), used
    except FlagError as exc:
        said = str(exc)
        raise FlagError(said if said.startswith(flag) else f"{flag}: {said}") from None
    except ValueError:
        typ = getattr(knob.type, "__name__", "value")
        raise FlagError(f"{flag}: expected {typ}, got {val!r}") from None


def _read_flag(words: list[str], i: int, flags: FlagList, r: _Read) -> int:
    """Read the flag at `i` into `r`; returns the index of the next word."""
    tok = words[i]
    name, eq, val = tok.partition("=")
    hit, canonical = _lookup(name, flags)
    if canonical is None:  # unknown: the word after it goes with it unless it looks like a flag
        if not eq and i + 1 < len(words) and not words[i + 1].startswith("-"):
            r.unknown.append(f"{name} {words[i + 1]}")
            return i + 2
        r.unknown.append(tok)
        return i + 1
    r.seen.append(canonical)
    if hit is None:  # a flag of the release without memory effect
        n = 0 if eq else values_after(words, i, flags.kinds.get(canonical, "value"))
        r.ignored.append(" ".join([canonical, *([val] if eq else words[i + 1:i + 1 + n])]))
        return i + 1 + n
    knob, switch_value = hit
    if knob.is_switch:
        r.kw[knob.field] = bool_word(val) if eq else switch_value
        return i + 1
    r.kw[knob.field], used = _knob_value(knob, canonical, words, i, eq, val)
    return i + used


def parse_vllm_argv(argv: list[str], release: str | None = None) -> VllmArgs:
    """Parse the words of a vLLM launch command as `vllm serve` of `release` reads them (default: the newest flag
    list). Leading `VAR=value` words become `env`."""
    env, args = leading_env(argv)
    model, args, serve = _program(args)
    words = flexible_words(args)
    flags = release_flags(release)
    r = _Read()
    i = 0
    while i < len(words):
        if words[i].startswith("-"):
            i = _read_flag(words, i, flags, r)
        elif serve and model is None:
            # `vllm serve`'s positional model_tag, wherever it stands among the flags (argparse reads positionals
            # interspersed: entrypoints/cli/serve.py@0.32.0 `serve_parser.add_argument("model_tag", nargs="?")`)
            model = words[i]
            i += 1
        else:
            r.ignored.append(words[i])
            i += 1
    if model is not None and serve and "model" in r.kw:
        # `vllm serve ... --model X ...`: vLLM moves X to the front as the positional model_tag
        # (utils/argparse_utils.py::FlexibleArgumentParser.parse_args@0.32.0), so X is served and a stray
        # positional word is an extra argument, never the model (issue 36: `/--served-model-name` won over --model)
        r.unknown.append(model)
    elif model is not None:
        r.kw["model"] = model  # model_tag wins over --model (entrypoints/cli/serve.py::ServeSubcommand.cmd)
    _validate(r.kw)
    _fold_spec_flags(r.kw)
    return VllmArgs(**r.kw, env=tuple(env), ignored=tuple(r.ignored), unknown=tuple(r.unknown),
                    flags_seen=tuple(r.seen))


_SPEC_FLAGS = (("spec_method", "--spec-method", "method"), ("spec_model", "--spec-model", "model"),
               ("spec_tokens", "--spec-tokens", "num_speculative_tokens"))


def _fold_spec_flags(kw: MutableMapping[str, object]) -> None:
    """`--spec-method` / `--spec-model` / `--spec-tokens` as keys of the speculative config, as
    engine/arg_utils.py::EngineArgs.create_speculative_config@0.32.0 merges them: each given one sets its key, and
    one that `--speculative-config` also sets is the engine's own "mutually exclusive" error."""
    given = [(flag, key, kw.pop(field)) for field, flag, key in _SPEC_FLAGS if kw.get(field) is not None]
    if not given:
        return
    spec = kw.get("speculative")
    merged: dict[str, object] = {k: json.loads(v) for k, v in spec.raw} if isinstance(spec, SpeculativeConfig) else {}
    for flag, key, value in given:
        if key in merged:
            raise FlagError(f"{flag} and --speculative-config['{key}'] are mutually exclusive")
        merged[key] = value
    kw["speculative"] = parse_speculative_config(json.dumps(merged))


def _validate(kw: Mapping[str, object]) -> None:
    """The ranges vLLM's own config checks refuse (the values are numbers: each knob's type made them)."""
    for name, flag in (("tp", "--tensor-parallel-size"), ("pp", "--pipeline-parallel-size"),
                       ("dp", "--data-parallel-size")):
        n = kw.get(name)
        if isinstance(n, (int, float)) and n < 1:
            raise FlagError(f"{flag} must be at least 1, got {n}")
    u = kw.get("gpu_memory_utilization")
    if isinstance(u, (int, float)) and not (0.0 < u <= 1.0):
        raise FlagError(f"--gpu-memory-utilization must be in (0, 1], got {u}")
    for name, flag in (("max_num_seqs", "--max-num-seqs"), ("max_num_batched_tokens", "--max-num-batched-tokens"),
                       ("block_size", "--block-size")):
        n = kw.get(name)
        if isinstance(n, (int, float)) and n < 1:
            raise FlagError(f"{flag} must be at least 1, got {n}")
    L = kw.get("max_model_len")
    if isinstance(L, (int, float)) and L != -1 and L < 1:
        raise FlagError(f"--max-model-len must be positive (or -1/auto), got {L}")
    kvb = kw.get("kv_cache_memory_bytes")
    if isinstance(kvb, (int, float)) and kvb < 0:
        raise FlagError(f"--kv-cache-memory-bytes must not be negative, got {kvb}")
    mode = kw.get("mamba_cache_mode")
    if mode is not None and mode not in ("none", "align", "all"):
        raise FlagError(f"--mamba-cache-mode must be none, align or all, got {mode!r}")
