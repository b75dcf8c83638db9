"""Engine release numbers, the one parser for every rule set and every launch rule.

"0.5.12.post1", "v0.32.0+cpu", "v0.5.17-cu130", "0.11.0rc2", "0.5" -> Release(0, 5, 12) ... Release(0, 5, 0).
Built on `packaging.version`; engine builds that are no PEP 440 string ("-cu130") are read by their leading
release number. A `Release` is a tuple, so rule code compares it with `(0, 5, 14)` directly.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from typing import NamedTuple

from packaging.version import InvalidVersion
from packaging.version import Version as _Pep440

from specbench.errors import FlagError


class Release(NamedTuple):
    major: int
    minor: int
    micro: int = 0

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.micro}"


Version = Release  # the name the rule sets use

# the leading release number of a build string that is no PEP 440 version ("0.5.17-cu130", "0.5.12abc")
_LEADING = re.compile(r"^\d+(?:\.\d+)+")


def parse_release(text: str | None) -> Release | None:
    """The release (major, minor, micro) of an engine version string; None when absent or unreadable.

    At least major.minor is needed ("0.5" -> (0, 5, 0)); pre/post/dev/local parts are dropped."""
    if not text:
        return None
    if isinstance(text, str):
        return _parse_release(text)  # a plan's fix search reads the same release ~10,000 times
    return _parse_release(str(text))


@functools.lru_cache(maxsize=256)
def _parse_release(text: str) -> Release | None:
    s = text.strip()
    if s[:1] in ("v", "V"):
        s = s[1:]
    try:
        parts = _Pep440(s).release
    except InvalidVersion:
        m = _LEADING.match(s)
        if not m:
            return None
        parts = tuple(int(x) for x in m.group(0).split("."))
    if len(parts) < 2:
        return None
    return Release(*(tuple(parts[:3]) + (0,) * (3 - len(parts[:3]))))


def require_release(text: str | None, engine: str, example: str, flag: str = "--engine-version") -> Release:
    """parse_release for user input: an unreadable text is a FlagError in one line."""
    r = parse_release(text)
    if r is None:
        raise FlagError(f"{flag}: cannot read a {engine} version from {text!r} (like {example})")
    return r


def rule_set_for(release: Release | str | None, known_releases: Iterable[str | Release],
                 engine: str, oldest: str | None = None) -> tuple[Release, str | None]:
    """The release whose rules plan `release`, and a warning text (or None).

    `known_releases` are the releases the engine's rule sets were read from. A release newer than the newest one is
    planned with the newest set plus a warning; a release at or below it is its own (the engine's rule code picks
    the set by its boundaries), with a warning when it is older than `oldest` (the oldest release whose code was
    read; default the oldest rule set); an unreadable one is a FlagError that lists the known releases."""
    known = sorted({k if isinstance(k, Release) else require_release(k, engine, "") for k in known_releases})
    if not known:
        raise ValueError(f"no known {engine} releases")
    r = release if isinstance(release, Release) else parse_release(release)
    listed = ", ".join(str(k) for k in known)
    if r is None:
        raise FlagError(f"--engine-version: cannot read a {engine} version from {release!r} "
                        f"(known {engine} rule sets: {listed})")
    newest = known[-1]
    if r.major not in {k.major for k in known}:  # 9.9: no release line specbench has read; nearest rules would lie
        raise FlagError(f"--engine-version {r}: no {engine} {r.major}.x release is known (known {engine} rule sets: "
                        f"{listed}; releases up to {newest.major}.{newest.minor}.x are planned)")
    if r > newest:
        return newest, (f"{engine} {r} is newer than the newest rule set ({newest}); planned with the "
                        f"{newest} rules, which may not match this release")
    first = require_release(oldest, engine, "") if oldest else known[0]
    if r < first:
        return r, (f"{engine} {r} is older than the oldest release specbench has read ({first}); planned with the "
                   f"{first} rules, which may not match this release")
    return r, None
