"""A launch argument that differs between two boots, and the change of the pools it predicts: what each engine's
log rules give the doctor's diff (`Engine.diff_candidates`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Candidate:
    arg: str
    predicted_gib: float | None  # predicted change of the pool budget (right − left), None when not modelled
    sentence: str


@dataclass(frozen=True, slots=True)
class PoolChange:
    """The observed change of the memory the engine's pools got between two boots, and how it was measured."""

    observed_gib: float | None
    how: str  # e.g. "Mamba slots x 146.8 MiB + KV tokens x 98,304 B, target + draft"
