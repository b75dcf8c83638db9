"""Engine-neutral launch-command words: split a pasted command, its leading `VAR=value` words, how many words a flag
takes (argparse's rule), set or remove one flag in an argv list. The one argv reader both engines and `command.py` use;
`LaunchArgs`, what every engine's parsed command holds besides its own flags.

Which spellings name the same flag is engine knowledge: callers pass them (`spellings`), this module knows none.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from specbench.errors import FlagError

_Args = TypeVar("_Args", bound="LaunchArgs")


@dataclass(frozen=True)
class LaunchArgs:
    """What every engine's reading of a launch command holds besides its own flags (engines/<engine>/args.py extends
    it): the parallel sizes, the leading `VAR=value` words, and what the reading passed over: known flags that do not
    shape memory (`ignored`), flags the release does not have (`unknown`), every flag as written (`flags_seen`)."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    env: tuple[tuple[str, str], ...] = ()
    ignored: tuple[str, ...] = field(default=(), compare=False)
    unknown: tuple[str, ...] = field(default=(), compare=False)
    flags_seen: tuple[str, ...] = field(default=(), compare=False)

    def with_(self: _Args, **kw: Any) -> _Args:
        return replace(self, **kw)


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
    """The `VAR=value` words at the start of a command as (name, value) pairs, and the words after them; a `sudo`
    or `env` among them (with sudo's -E/-H/--preserve-env) is dropped: `sudo -E env A=1 vllm serve ...`."""
    rest = list(words)
    env: list[tuple[str, str]] = []
    while rest:
        if rest[0] in _PREFIX_PROGRAMS:
            rest.pop(0)
            while rest and rest[0] in _SUDO_OPTIONS:
                rest.pop(0)
        elif is_env_word(rest[0]):
            k, v = rest.pop(0).split("=", 1)
            env.append((k, v))
        else:
            break
    return env, rest


_PREFIX_PROGRAMS = ("sudo", "env")  # run the command after them with the environment before them
_SUDO_OPTIONS = ("-E", "-H", "--preserve-env")
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")  # argparse reads these as values, not options


def is_option(word: str) -> bool:
    """A word argparse reads as an option (not a value): `-x`, `--x`, but not `-1` or `-.5`."""
    return word.startswith("-") and not _NEGATIVE_NUMBER.match(word)


def values_after(words: Sequence[str], i: int, kind: str | None) -> int:
    """How many words after the flag at `i` are its values, argparse's nargs for its kind (the engine's flag list:
    "switch", "value", "optional", "list"): a switch none, a list every word up to the next option, any other
    kind (or an unknown one) the next word when it is not an option, so a positional argument after `--port 8000`
    (`vllm serve --port 8000 MODEL`) stays."""
    if kind == "switch":
        return 0
    n = 0
    while i + 1 + n < len(words) and not is_option(words[i + 1 + n]):
        n += 1
        if kind != "list":
            break
    return n


def set_flag(argv: Sequence[str], flag: str, value: Any, spellings: Sequence[str] = (),
             kind: Callable[[str], str | None] | None = None) -> list[str]:
    """argv with `flag` set to `value`: removes every spelling (`--x v` or `--x=v`) and appends `flag value`.

    `True` gives a bare switch, `False`/None removes the flag, a list gives several words. A removed flag takes its
    own values with it and nothing else: `kind(name)` (the engine's flag list) says how many (`values_after`).
    """
    names = set(spellings) | {flag}
    out: list[str] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        head = word.split("=", 1)[0]
        if head in names:
            i += 1 + (0 if "=" in word else values_after(argv, i, kind(head) if kind else None))
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


def flag_word(value: Any) -> str:
    """A value as one argv word (floats keep their full precision)."""
    if isinstance(value, float) and not value.is_integer():
        return repr(value)
    return str(value)
