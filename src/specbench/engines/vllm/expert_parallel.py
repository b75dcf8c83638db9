"""`--enable-expert-parallel` in vLLM 0.32.0: routed experts are placed whole on ranks instead of being split by TP.

- model_executor/layers/fused_moe/config.py::FusedMoEParallelConfig.make@0.32.0: with EP on and tp x dp (x pcp) > 1,
  ep_size = the flattened tp x dp size and the experts' own tp_size becomes 1 (each device owns a set of experts
  fully); without EP each data-parallel replica holds every expert split by its TP.
- model_executor/layers/fused_moe/expert_map_manager.py::determine_expert_map@0.32.0: rank r holds
  global // ep + (1 if r < global % ep else 0) experts; rank 0 (the one the planner sizes) holds the ceiling.
Everything else (attention, shared experts, embeddings) keeps its TP split; dense layers are replicated across DP.
"""

from __future__ import annotations

from specbench.specs.memo import per_spec
from specbench.specs.model_types import ModelSpec
from specbench.specs.weights import tensors_per_rank


def ep_size(tp: int, dp: int) -> int:
    return max(1, tp) * max(1, dp)


def routed_bytes(m: ModelSpec, tp: int) -> float:
    """Bytes of the routed experts on one rank at `tp`; per (spec object, tp): the fix search plans the same model
    hundreds of times, and an FP8 checkpoint's exclude list made each pass ~0.35 s (480B: 72-89 s per plan)."""
    return per_spec("routed", m, tp, compute=lambda: sum(
        t.params * m.quant.scheme_for(t.name, m.dtype, is_expert=True).bytes_per_param
        for t in tensors_per_rank(m, tp) if t.expert))


def expert_parallel_delta(m: ModelSpec, tp: int, dp: int) -> int:
    """Bytes rank 0 holds with EP minus what the TP split gives it (negative under DP: experts spread over the
    replicas too; positive when the experts do not divide, since rank 0 takes the extra one)."""
    if m.moe is None or ep_size(tp, dp) <= 1:
        return 0
    ep = ep_size(tp, dp)
    n = m.moe.num_experts
    whole = routed_bytes(m, 1)  # every routed expert, unsplit
    local = -(-n // ep)
    return int(whole * local / n - routed_bytes(m, tp))
