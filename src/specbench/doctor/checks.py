"""Engine-neutral checks of what a log measured against what the launch claims: the target's weights against the
claimed quantization of this model (specs/weights.py, the planner's weight rules)."""

from __future__ import annotations

from dataclasses import dataclass

from specbench.contracts import GIB
from specbench.errors import UserError
from specbench.logs.facts import LogFacts
from specbench.logs.launch_model import model_spec_of
from specbench.specs import quant as q
from specbench.specs.weights import weight_bytes


@dataclass(frozen=True, slots=True)
class WeightCheck:
    claimed: str
    expected_gib: float
    measured_gib: float
    consistent: bool
    dense_gib: float | None


_CLAIMS = ("nvfp4", "mxfp4", "fp8", "int8", "int4", "awq", "gptq", "bf16", "fp16")


def claimed_quant(facts: LogFacts, explicit: str | None) -> str | None:
    """The quantization the user says they run: --claimed-quant, else the dumped `quantization`, else a token in
    the model path (e.g. `...-NVFP4`)."""
    if explicit:
        return explicit.lower()
    q = facts.server_args.get("quantization")
    if isinstance(q, str) and q and q != "None":
        return q.lower()
    path = str(facts.server_args.get("model_path") or "").lower()
    for token in _CLAIMS:
        if token in path.replace("_", "-").split("/")[-1]:
            return token
    return None


def weight_check(facts: LogFacts, claim: str | None) -> WeightCheck | None:
    """Compare the measured target weights with what the claimed scheme would weigh for this model (specs.weights)."""
    if claim is None or facts.weights_gib is None:
        return None
    spec = model_spec_of(facts)
    if spec is None:
        return None
    try:
        schemes = {"nvfp4": q.NVFP4, "mxfp4": q.MXFP4, "fp8": q.FP8, "int8": q.INT8, "int4": q.int4_group(128),
                   "awq": q.int4_group(128), "gptq": q.int4_group(128)}
        tp = int(facts.server_args.get("tp_size") or facts.server_args.get("tensor_parallel_size") or 1)
        key = next((k for k in schemes if k in claim), None)
        dense = weight_bytes(spec, tp, scheme_override=q.Scheme.dense("bfloat16")) / GIB
        if key is None and claim in ("bf16", "fp16", "bfloat16", "float16"):
            expected = dense
        elif key is None:
            return None
        else:
            expected = weight_bytes(spec, tp, scheme_override=schemes[key]) / GIB
    except (UserError, ValueError, TypeError, AttributeError, KeyError):
        return None
    ratio = facts.weights_gib / expected if expected else 0.0
    return WeightCheck(claim, round(expected, 2), facts.weights_gib, 0.85 <= ratio <= 1.2, round(dense, 2))


