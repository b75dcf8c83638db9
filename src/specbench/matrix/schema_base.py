"""What every table of a matrix file shares: strict pydantic models (no bool for an int, finite numbers, axes that
are non-empty and hold each value once), the axis rule (a scalar is an axis of one value), the flag value type."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

Scalar = bool | int | float | str
# A flag value: a scalar, `true` (a bare switch), `false` (left out), or a list of strings passed
# as several argv words after the flag (written as a list inside a list when it is also an axis).
FlagValue = Scalar | list[str]

AR_NAMES = frozenset({"", "ar", "none", "autoregressive"})


# strict: no bool for an int (`tp = true` is an error, not 1), no string for a number; finite floats only
# (`nan`/`inf` are TOML literals: `request_rate = "inf"` is the one infinite value, written as a string)
_CONFIG = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


# list fields that are not axes: one value each (or checked by their own validator)
_NOT_AXES = frozenset({"command", "phases", "override", "spec", "stop"})


# The range of every count a matrix names, by field name, whatever table holds it: below the lower bound the engine
# or the client refuses it, above the upper one it is a typo (or an overflow) that would run for days or allocate
# without end. A value outside is a one-line error naming the key and its range.
COUNT_BOUNDS: dict[str, tuple[float, float]] = {
    "tp": (1, 1024), "concurrency": (1, 1_000_000), "num_requests": (1, 10_000_000),
    "prompt_tokens": (1, 16_777_216), "output_tokens": (1, 16_777_216), "warmup_requests": (0, 1_000_000),
    "requests_per_concurrency": (1, 1_000_000), "repeats": (1, 1000), "max_running_requests": (1, 10_000_000),
    "context_length": (1, 16_777_216), "num_draft_tokens": (1, 4096), "num_steps": (1, 4096),
    "eagle_topk": (1, 4096), "ddtree_budget": (1, 1_000_000), "port": (0, 65535),
    "gpu_mem_gib": (0, 16384), "avail_before_load_gib": (0, 16384), "weights_gib": (0, 16384),
    "draft_weights_gib": (0, 16384), "non_kv_gib": (0, 16384),
}


# the fields whose lower bound no table's own check gives (the others say it in their own words: "tp must be >= 1")
_OWN_LOW_BOUND = frozenset({"port", "gpu_mem_gib", "avail_before_load_gib", "weights_gib", "draft_weights_gib",
                            "non_kv_gib"})


def _out_of_bounds(name: str, v: Any) -> str | None:
    bounds = COUNT_BOUNDS.get(name)
    if bounds is None:
        return None
    for x in v if isinstance(v, list) else [v]:
        if isinstance(x, (int, float)) and not isinstance(x, bool) and x > bounds[1]:
            return f"{name} must be at most {bounds[1]:,.0f}, got {x}"
        if isinstance(x, (int, float)) and not isinstance(x, bool) and x < bounds[0] and name in _OWN_LOW_BOUND:
            return f"{name} must be at least {bounds[0]:g}, got {x}"
    return None


class _Strict(BaseModel):
    model_config = _CONFIG

    @field_validator("*", mode="after")
    @classmethod
    def _in_bounds(cls, v: Any, info: ValidationInfo) -> Any:
        """A count is in its range (COUNT_BOUNDS), whichever table names it."""
        problem = _out_of_bounds(info.field_name or "", v)
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("*", mode="after")
    @classmethod
    def _axes_unique(cls, v: Any, info: ValidationInfo) -> Any:
        """An axis (a list) must be non-empty and hold each value once (a repeated value runs the same cell twice)."""
        if isinstance(v, list) and info.field_name not in _NOT_AXES:
            if not v:
                raise ValueError("an axis needs at least one value (an empty list runs nothing)")
            seen: list[Any] = []
            for x in v:
                key = (type(x).__name__, x)
                if key in seen:
                    raise ValueError(f"value {x!r} is given twice")
                seen.append(key)
        return v


def as_axis(value: Any) -> tuple[Any, ...]:
    """A scalar is an axis of one value; a list is an axis of its values."""
    if isinstance(value, (list, tuple)):
        return tuple(value)
    return (value,)


def axis_at_least(value: Any, low: int, name: str = "") -> Any:
    """`value` (a value or an axis of them) when each of its values is >= `low` (None: unset, passed); else
    ValueError "[name ]must be >= low, got v", the words every count's own check says."""
    for v in as_axis(value):
        if v is not None and v < low:
            raise ValueError(f"{name + ' ' if name else ''}must be >= {low}, got {v}")
    return value
