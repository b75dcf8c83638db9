"""How often a cell is measured (`RepeatPolicy`, from its client settings) and what one boot of its server does
for it (`Visit`): which of its repeats run there, which are stored already, and whether the cell is finished after.

A matrix's `[client] repeats` is a count (`repeats = 3`: three repeats back to back on one boot, as before) or a
range (`repeats = {min = 2, max = 8}`, or `"auto"` = {min = 2, max = 8}): `min` repeats are planned, and a cell whose
decision against its question's best is still open gets one more repeat per round until decided or at `max`
(matrix/rounds.py). `repeat_across_boots = true` runs every repeat on a fresh boot of its server, the servers
interleaved (round r: boot A, repeat r of A's cells, stop; boot B, ...). A cell's client settings carry `repeats` = min
(an int), `repeats_max` (an int, only with a range) and `repeat_across_boots` (only when true): decide/question.py::
looks_of reads the first two.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from specbench.matrix.store_rows import StoredRepeat

AUTO_RANGE = (2, 8)  # repeats = "auto"
MIN_ADAPTIVE = 2  # a decision needs the spread of two repeats at least


@dataclass(frozen=True)
class RepeatPolicy:
    """`min` repeats planned; up to `max` while the cell's decision is open (None: exactly `min`, no rounds)."""

    min: int = 1
    max: int | None = None
    across_boots: bool = False

    @property
    def adaptive(self) -> bool:
        return self.max is not None

    @property
    def slots(self) -> int:
        """The most repeats the cell can get: its workload holds this many repeats' prompts."""
        return self.max if self.max is not None else self.min

    @property
    def looks(self) -> int:
        """How often its decision is looked at: max - min + 1 (decide/verdict.py's Bonferroni level), else 1."""
        return self.max - self.min + 1 if self.max is not None else 1

    def text(self) -> str:
        """'2 to 8 repeats until decided (7 looks), each on a fresh boot' / '3 repeats'."""
        from specbench.decide.verdict import level

        if self.max is not None:
            out = (f"{self.min} to {self.max} repeats until decided ({100 * level(self.looks):.2f}% intervals: "
                   f"{self.looks} looks)")
        else:
            out = f"{self.min} repeat{'s' if self.min != 1 else ''}"
        return out + (", each on a fresh boot of its server (servers interleaved)" if self.across_boots else "")

    def as_json(self) -> dict[str, Any]:
        """The dry run's `repeat_policy` (docs/contracts.md)."""
        from specbench.decide.verdict import level

        return {"min": self.min, "max": self.max, "adaptive": self.adaptive, "across_boots": self.across_boots,
                "looks": self.looks, "level": level(self.looks)}


def parse_repeats(value: Any) -> tuple[int | None, int | None]:
    """A matrix's `repeats` value -> (min, max): an int N -> (N, None); {min, max} -> (min, max); "auto" -> (2, 8);
    None -> (None, None). ValueError with the rule otherwise."""
    if value is None:
        return None, None
    if isinstance(value, bool):
        raise ValueError(f"repeats must be a whole number, {{min = A, max = B}} or \"auto\", got {value!r}")
    if isinstance(value, int):
        if value < 1:
            raise ValueError(f"repeats must be a whole number >= 1, got {value!r}")
        return value, None
    if isinstance(value, str):
        if value.strip().lower() != "auto":
            raise ValueError(f'repeats must be a whole number, {{min = A, max = B}} or "auto", got {value!r}')
        return AUTO_RANGE
    if isinstance(value, Mapping):
        extra = sorted(set(value) - {"min", "max"})
        if extra:
            raise ValueError(f"repeats takes only `min` and `max`, got {extra[0]!r}")
        lo, hi = value.get("min", AUTO_RANGE[0]), value.get("max", AUTO_RANGE[1])
        for name, v in (("min", lo), ("max", hi)):
            if isinstance(v, bool) or not isinstance(v, int):
                raise ValueError(f"repeats.{name} must be a whole number, got {v!r}")
        if lo < MIN_ADAPTIVE:
            raise ValueError(f"repeats.min must be >= {MIN_ADAPTIVE} (a decision needs the spread of two repeats), "
                             f"got {lo}")
        if hi < lo:
            raise ValueError(f"repeats.max must be >= repeats.min ({lo}), got {hi}")
        if hi > 1000:
            raise ValueError(f"repeats.max must be at most 1,000, got {hi}")
        return lo, hi
    raise ValueError(f'repeats must be a whole number, {{min = A, max = B}} or "auto", got {value!r}')


def policy_of(client: Mapping[str, Any]) -> RepeatPolicy:
    """A cell's policy from its client settings (`repeats`, `repeats_max`, `repeat_across_boots`)."""
    lo = client.get("repeats")
    hi = client.get("repeats_max")
    return RepeatPolicy(min=int(lo) if isinstance(lo, int) and not isinstance(lo, bool) and lo >= 1 else 1,
                        max=int(hi) if isinstance(hi, int) and not isinstance(hi, bool) else None,
                        across_boots=bool(client.get("repeat_across_boots")))


@dataclass(frozen=True)
class Visit:
    """What one boot of its server does for a cell: run repeats `start` .. `stop` - 1 (`start` = the repeats stored),
    pool them with the `prior` stored ones and, when `finish`, give the cell its status and metrics; else the cell
    stays `running` with its repeats stored (`repeat_across_boots`: the next on a later boot).

    `fresh`: nothing is stored (the cell starts over: store.start_cell); `merge`: the cell is `done` and gets a
    repeat-until-decided round's repeat (it stays done until the repeat is merged). `round`: 0 for planned repeats,
    r >= 1 for the r-th round; `reason`: why the round gives it a repeat; `first_in_run`: the run counts the cell as
    run at its first visit only."""

    start: int
    stop: int
    slots: int
    prior: tuple[StoredRepeat, ...] = ()
    finish: bool = True
    fresh: bool = True
    merge: bool = False
    round: int = 0
    reason: str | None = None
    first_in_run: bool = True  # the cell's first visit in this run (the run summary counts it as run once)

    @property
    def repeats(self) -> int:
        return self.stop - self.start


def first_visit(client: Mapping[str, Any]) -> Visit:
    """A cell run from the start on one boot: its planned repeats back to back (what a cell without a visit does)."""
    p = policy_of(client)
    return Visit(start=0, stop=p.min, slots=p.slots)
