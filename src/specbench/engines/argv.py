"""Engine-neutral launch-command words: split a pasted command, set or remove one flag in an argv list.

Which spellings name the same flag is engine knowledge: callers pass them (`spellings`), this module knows none.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from typing import Any

from specbench.errors import FlagError


def split_command(cmd: str | Sequence[str]) -> list[str]:
    """A pasted command (a shell string or a list of words) -> words; an unbalanced quote is a one-line error."""
    if isinstance(cmd, str):
        try:
            return shlex.split(cmd)
        except ValueError as exc:
            raise FlagError(f"cannot parse the launch command: {exc}") from None
    return list(cmd)


def is_env_word(word: str) -> bool:
    """`VAR=value`, a shell assignment before the program (not `--flag=value`)."""
    return "=" in word and not word.startswith("-") and word.split("=", 1)[0].isidentifier()


def leading_env(words: Sequence[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """The `VAR=value` words at the start of a command as (name, value) pairs, and the words after them."""
    rest = list(words)
    env: list[tuple[str, str]] = []
    while rest and is_env_word(rest[0]):
        k, v = rest.pop(0).split("=", 1)
        env.append((k, v))
    return env, rest


def set_flag(argv: Sequence[str], flag: str, value: Any, spellings: Sequence[str] = (),
             kind: Callable[[str], str | None] | None = None) -> list[str]:
    """argv with `flag` set to `value`: removes every spelling (`--x v` or `--x=v`) and appends `flag value`.

    `True` gives a bare switch, `False`/None removes the flag, a list gives several words. A removed flag takes its
    own values with it and nothing else: `kind(name)` (the engine's flag list: "switch", "value", "optional", "list")
    says how many; a switch none, a value one, a list every word up to the next `-` word; unknown: one word when the
    next one is not a flag, so a positional argument after `--port 8000` (`vllm serve --port 8000 MODEL`) stays.
    """
    names = set(spellings) | {flag}
    out: list[str] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        head = word.split("=", 1)[0]
        if head in names:
            i += 1
            if "=" not in word:
                i = _skip_values(argv, i, kind(head) if kind else None)
            continue
        out.append(word)
        i += 1
    if value is None or value is False:
        return out
    if value is True:
        return out + [flag]
    if isinstance(value, (list, tuple)):
        return out + [flag, *[str(v) for v in value]]
    return out + [flag, flag_word(value)]


def _skip_values(argv: Sequence[str], i: int, kind: str | None) -> int:
    """The index after the values of a flag whose name ended at `i`."""
    if kind == "switch":
        return i
    if kind == "list":
        while i < len(argv) and not argv[i].startswith("-"):
            i += 1
        return i
    has_value = i < len(argv) and not argv[i].startswith("--") and (kind == "value" or not argv[i].startswith("-"))
    return i + 1 if has_value else i


def flag_word(value: Any) -> str:
    """A value as one argv word (floats keep their full precision)."""
    if isinstance(value, float) and not value.is_integer():
        return repr(value)
    return str(value)
