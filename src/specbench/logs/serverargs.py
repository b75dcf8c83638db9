"""Read the engine's own dump of its arguments back into a dict; tolerant of truncation, never raises.

- SGLang prints `server_args=ServerArgs(model_path='Qwen/Qwen3.6-27B', tp_size=1, ..., speculative_algorithm='DFLASH')`
  (a dataclass repr; `sglang/srt/entrypoints/http_server.py` / `engine.py` log `f"{server_args=}"`).
- vLLM prints `non-default args: {'model': ..., 'max_model_len': ...}` (a dict repr, `entrypoints/utils.py`) and
  `Initializing a V1 LLM engine (v0.10.1) with config: model='...', speculative_config=None, ...` (key=value list).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import TypeAlias

# A value of an argument dump once made JSON-safe (`_json_safe`): what LogFacts.server_args holds.
ArgValue: TypeAlias = str | int | float | bool | None | list["ArgValue"] | dict[str, "ArgValue"]


def _split_top_level(body: str) -> list[str]:
    """Split `a=1, b='x, y', c=[1, 2]` on commas outside quotes and brackets."""
    parts: list[str] = []
    depth = 0
    quote: str | None = None
    escaped = False
    start = 0
    for i, ch in enumerate(body):
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
            continue
        if ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth < 0:  # the closing paren of ServerArgs(...) itself
                parts.append(body[start:i])
                return [p for p in (s.strip() for s in parts) if p]
        elif ch == "," and depth == 0:
            parts.append(body[start:i])
            start = i + 1
    tail = body[start:]
    if quote is None and depth == 0:
        parts.append(tail)
    # else: the line was cut inside this value; drop the incomplete piece
    return [p for p in (s.strip() for s in parts) if p]


def _json_safe(val: object) -> ArgValue:
    """literal_eval can give sets, bytes, complex numbers and Ellipsis; facts must stay JSON."""
    if isinstance(val, dict):
        return {str(k): _json_safe(v) for k, v in val.items()}
    if isinstance(val, (list, tuple)):
        return [_json_safe(v) for v in val]
    if isinstance(val, (set, frozenset)):
        return sorted((_json_safe(v) for v in val), key=repr)
    if val is None or isinstance(val, (bool, int, float, str)):
        return val
    return repr(val)


def _value(text: str) -> ArgValue:
    text = text.strip()
    try:
        return _json_safe(ast.literal_eval(text))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text  # e.g. `<SomeEnum.X: 1>` or `device(type='cuda')`: keep the text


def parse_keyvalues(body: str) -> dict[str, ArgValue]:
    """`k=v, k2=v2` (repr values) to a dict. Pieces without `=` or with a bad key are skipped."""
    out: dict[str, ArgValue] = {}
    for piece in _split_top_level(body):
        key, sep, raw = piece.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            continue
        out[key] = _value(raw)
    return out


def parse_sglang_server_args(text: str) -> dict[str, ArgValue]:
    """Body of `server_args=ServerArgs(...)`; `text` is everything after `ServerArgs(`."""
    return parse_keyvalues(text)


def parse_vllm_dict(text: str) -> dict[str, ArgValue]:
    """`{'model': 'x', 'max_model_len': 4096}` possibly cut off: parse what is complete."""
    text = text.strip()
    try:
        val = ast.literal_eval(text)
        if isinstance(val, dict):
            return {str(k): _json_safe(v) for k, v in val.items()}
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    body = text[1:] if text.startswith("{") else text
    out: dict[str, ArgValue] = {}
    for piece in _split_top_level(body):
        key, sep, raw = piece.partition(":")
        key = key.strip().strip("'\"")
        if sep and key:
            out[key] = _value(raw)
    return out


def to_flag(key: str) -> str:
    """`mem_fraction_static` -> `--mem-fraction-static` (SGLang's and vLLM's argparse spelling)."""
    return "--" + key.replace("_", "-")


def argv_from_dump(prefix: list[str], args: Mapping[str, object], keys: tuple[str, ...]) -> list[str]:
    """A launch command rebuilt from an argument dump: `prefix` + the flags of `keys` that the dump sets."""
    argv = list(prefix)
    for key in keys:
        val = args.get(key)
        if val is None or val is False or val == "None":
            continue
        if val is True:
            argv.append(to_flag(key))
        elif isinstance(val, (int, float, str)):
            argv += [to_flag(key), str(val)]
    return argv
