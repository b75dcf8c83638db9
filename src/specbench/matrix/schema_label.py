"""A `[[server.spec]] label`: a name, or a template that names the variant's parameters in braces
(`"ddtree-b{ddtree_budget}"`, `"eagle3-s{num_steps:02d}"`), filled once per value of its axes (expansion.py).

Bounded before anything is formatted: a template is at most MAX_LABEL characters with no control characters (a label
is a table cell, a file name part and one line of a run's output), each field is one of the variant's own parameters
by bare name (no attribute or index: `{num_steps.__class__}`, `{num_steps[0]}`), with no nested field, and a width or
precision of at most MAX_WIDTH: `{num_steps:999999999}` would build a gigabyte-long string.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Collection

MAX_LABEL = 128
MAX_WIDTH = 64


def check_label(label: str, names: Collection[str], template: bool) -> None:
    """Raise ValueError naming what is wrong with a label (`template`: braces name parameters, else literal)."""
    if len(label) > MAX_LABEL:
        raise ValueError(f"`label` is {len(label)} characters; a label is at most {MAX_LABEL}")
    bad = next((c for c in label if unicodedata.category(c) == "Cc"), None)
    if bad is not None:
        raise ValueError(f"`label` {label!r} holds a control character ({bad!r}); a label is one line")
    if not template:
        return
    try:
        fields = [(name, conv, spec) for _, name, spec, conv in string.Formatter().parse(label) if name is not None]
    except ValueError as exc:
        raise ValueError(f"`label` {label!r}: {exc} (write a literal brace as {{{{ or }}}})") from None
    known = sorted(names)
    for name, conv, spec in fields:
        if name not in names:
            raise ValueError(f"`label` {label!r}: {{{name}}} is none of this variant's parameters; it may name "
                             f"{', '.join(known) or 'none (give the axis first)'}, by name alone")
        if conv not in (None, "r", "s", "a"):
            raise ValueError(f"`label` {label!r}: !{conv} is no conversion (!r, !s or !a)")
        if "{" in (spec or ""):
            raise ValueError(f"`label` {label!r}: a field inside a format spec is not filled")
        wide = [int(n) for n in re.findall(r"\d+", spec or "")]
        if any(n > MAX_WIDTH for n in wide):
            raise ValueError(f"`label` {label!r}: a width or precision of {max(wide)}; at most {MAX_WIDTH}")
