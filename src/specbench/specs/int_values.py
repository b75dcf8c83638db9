"""Byte counts of the packed integer values of int-N group-quantized linears (AWQ, GPTQ, compressed-tensors wNa16):
what the engines' Marlin repack residue scales with (engines/sglang/plan_stages.py::INT_MARLIN_ALLOCATOR_RESIDUE)."""

from __future__ import annotations

from specbench.specs.model import ModelSpec
from specbench.specs.weights import tensors_per_rank


def int_group_value_bytes(m: ModelSpec, tp: int, *, include_vision: bool = True) -> int:
    """Bytes of the packed integer values (bits/8 a parameter, no scales or zeros) of the linears stored as int-N
    group quant (`specs/quant.py::int_group`: AWQ, GPTQ, compressed-tensors wNa16) on one GPU."""
    q = m.quant
    if not any(s is not None and s.int_group_bits for s in (q.default, *q.per_module.values())):
        return 0  # no int-N scheme: skip the walk over the tensors (the planner calls this for every plan)
    total = 0.0
    for ten in tensors_per_rank(m, tp, include_vision=include_vision):
        if ten.linear and ten.group != "lm_head":
            s = m.quant.scheme_for(ten.name, m.dtype, is_expert=ten.expert)
            total += ten.params * s.int_group_bits / 8
    return int(total)


def marlin_fp8_value_bytes(m: ModelSpec, tp: int, *, include_vision: bool = True) -> int:
    """Bytes of the FP8 weights (one a parameter) that the weight-only FP8 Marlin path of SM80-SM88 repacks with the
    same gptq_marlin_repack kernel (num_bits=8: layers/quantization/marlin_utils_fp8.py::prepare_fp8_layer_for_marlin
    @0.5.15.post1), on one GPU."""
    q = m.quant
    if not any(s is not None and s.name.startswith("fp8") for s in (q.default, *q.per_module.values())):
        return 0
    total = 0
    for ten in tensors_per_rank(m, tp, include_vision=include_vision):
        if ten.linear and ten.group != "lm_head":
            if m.quant.scheme_for(ten.name, m.dtype, is_expert=ten.expert).name.startswith("fp8"):
                total += ten.params
    return total
