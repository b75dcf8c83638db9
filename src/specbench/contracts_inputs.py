"""What the layers above hand the engines: plain frozen values, so that an engine package never imports the
planner's entry point (plan/api.py) or the matrix (matrix/schema.py) above it. The plan's options (`PlanOptions`) with
the bounds of its memory fields (one owner for `specbench plan`'s flags and a matrix's [plan] table), and where a
server adapter launches (`LaunchTarget`). Pure, no I/O."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class PlanOptions:
    """What `plan_command` (plan/api.py) needs besides the launch command; every field optional."""

    model_config: str | None = None  # a config.json path, a model folder, a repo id or a bundled name
    draft_config: str | None = None
    gpu: str | None = None  # a name of the GPU catalog (specs/gpu.py); None: specs/gpu.py::DEFAULT_GPU
    gpu_mem_gib: float | None = None  # a custom GPU of this many GiB, over `gpu`
    engine: str | None = None  # "sglang" | "vllm"; None: the engine that recognises the command
    engine_version: str | None = None  # the rule set; None: the engine's newest
    avail_before_load_gib: float | None = None  # measured: free memory before the weights load (GiB)
    weights_gib: float | None = None  # measured: the target's weights per GPU (GiB)
    draft_weights_gib: float | None = None  # measured: the draft's weights per GPU (GiB)
    non_kv_gib: float | None = None  # vLLM: measured non-KV memory (GiB)
    fixes: bool = True  # search the nearest working configurations per TP size
    tp_sizes: tuple[int, ...] = (1, 2, 4, 8)
    revision: str | None = None  # the target's Hub revision, over the command's --revision


# The memory options of PlanOptions and their bounds, one owner for `specbench plan`'s flags and a matrix's [plan]
# table (issue 38: `gpu_mem_gib = 0` passed a matrix and was refused by plan): field -> must it be above 0. A GPU or
# the free memory before loading of 0 GiB is no GPU; measured weights and non-KV memory may be 0.
PLAN_GIB_FIELDS: dict[str, bool] = {"gpu_mem_gib": True, "avail_before_load_gib": True, "weights_gib": False,
                                    "draft_weights_gib": False, "non_kv_gib": False}
# the largest accelerator memory is well below this (a typo or an overflow is not)
MAX_PLAN_GIB = 16384.0


def plan_gib_problem(field: str, value: object) -> str | None:
    """Why `value` cannot be the PlanOptions memory field `field` (a finite number of GiB in its bounds), or None."""
    if value is None:
        return None
    if isinstance(value, bool):
        return f"{value!r}: expected a number of GiB"
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return f"{str(value)[:40]!r}: expected a number of GiB"
    positive = PLAN_GIB_FIELDS[field]
    if not math.isfinite(x) or x < 0 or (positive and x == 0) or x > MAX_PLAN_GIB:
        return f"{x}: expected a finite number of GiB {'> 0' if positive else '>= 0'} and <= {MAX_PLAN_GIB:.0f}"
    return None


@dataclass(frozen=True)
class LaunchTarget:
    """What a server adapter (engines/base.py::ServerAdapter) launches and where: the matrix's base command, the
    address, and the model and served name of an engine that launches a local model itself (the embedded CPU
    engine). Built by the matrix (matrix/schema.py::MatrixSpec.target)."""

    command: tuple[str, ...] = ()
    host: str = "127.0.0.1"
    port: int = 30000
    model: str | None = None
    served_model_name: str | None = None

