"""What every table of a matrix file shares: strict pydantic models (no bool for an int, finite numbers, axes that
are non-empty and hold each value once), the axis rule (a scalar is an axis of one value), the flag value type."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

from specbench.engines.sglang import SPEC_V2_ENV  # noqa: F401  (the matrix checks it; defined once by SGLang)

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


class _Strict(BaseModel):
    model_config = _CONFIG

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
