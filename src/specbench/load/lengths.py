"""Input and output length distributions of a workload: the matrix keys `prompt_len` and `output_len`.

    "fixed"              every request `prompt_tokens` (or `output_tokens`) long (the default)
    "uniform:LO,HI"      whole numbers drawn uniformly from LO..HI inclusive
    "normal:MEAN,STD"    drawn from a normal distribution, rounded, at least 1
    "data"               the dataset's own lengths: the prompt as written; the record's `output_tokens` /
                         `max_tokens`, else the token count of its recorded answer

Draws come from a `random.Random` seeded by the workload, so a cell's lengths are the same on every run and for
every server of the matrix. Every length is then clamped to the context window (load/prompts.py clamp_lengths).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Literal

Kind = Literal["fixed", "uniform", "normal", "data"]
FORMS = '"fixed", "uniform:LO,HI", "normal:MEAN,STD" or "data"'


@dataclass(frozen=True, slots=True)
class LengthDist:
    kind: Kind = "fixed"
    a: float = 0.0  # uniform: LO; normal: MEAN
    b: float = 0.0  # uniform: HI; normal: STD

    def draw(self, rng: random.Random, fixed: int) -> int | None:
        """One length; None for "data" (the caller reads it from the record)."""
        if self.kind == "fixed":
            return fixed
        if self.kind == "uniform":
            return rng.randint(int(self.a), int(self.b))
        if self.kind == "normal":
            return max(1, round(rng.gauss(self.a, self.b)))
        return None


def _numbers(kind: str, rest: str, text: str) -> tuple[float, float]:
    parts = [p.strip() for p in rest.split(",")]
    if len(parts) != 2:
        raise ValueError(f"{text!r}: {kind} takes two numbers, {kind}:{'LO,HI' if kind == 'uniform' else 'MEAN,STD'}")
    try:
        a, b = float(parts[0]), float(parts[1])
    except ValueError:
        raise ValueError(f"{text!r}: {parts[0]!r} and {parts[1]!r} must be numbers") from None
    if not (math.isfinite(a) and math.isfinite(b)):
        raise ValueError(f"{text!r}: the numbers must be finite")
    return a, b


def parse_length(text: str) -> LengthDist:
    """A length key's value -> its distribution; ValueError with the reason for anything else."""
    if not isinstance(text, str):
        raise ValueError(f"must be a string: {FORMS}; got {text!r}")
    s = text.strip().lower()
    if s in ("fixed", "data"):
        return LengthDist(s)  # type: ignore[arg-type]
    kind, sep, rest = s.partition(":")
    if not sep or kind not in ("uniform", "normal"):
        raise ValueError(f"{text!r} is not a length distribution; use {FORMS}")
    a, b = _numbers(kind, rest, text)
    if kind == "uniform":
        if a != int(a) or b != int(b):
            raise ValueError(f"{text!r}: uniform bounds must be whole numbers of tokens")
        if not 1 <= a <= b:
            raise ValueError(f"{text!r}: uniform needs 1 <= LO <= HI")
        return LengthDist("uniform", a, b)
    if a < 1 or b < 0:
        raise ValueError(f"{text!r}: normal needs MEAN >= 1 and STD >= 0")
    return LengthDist("normal", a, b)
