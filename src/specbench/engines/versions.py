"""Engine release numbers: "0.5.12.post1", "v0.32.0+cpu" -> (0, 5, 12). One parser for every rule set."""

from __future__ import annotations

import re

from specbench.errors import FlagError

Version = tuple[int, int, int]

_RELEASE = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?")


def parse_version(text: str, engine: str, example: str) -> Version:
    m = _RELEASE.match(text.strip().lstrip("vV"))
    if not m:
        raise FlagError(f"--engine-version: cannot read a {engine} version from {text!r} (like {example})")
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
