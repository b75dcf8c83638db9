"""FP8 weights on a GPU without FP8 tensor cores (SM 8.0 / 8.6 / 8.7: A100, A10, A40, A6000, RTX 30xx): vLLM runs
them weight-only through Marlin (FP8 weights, BF16/FP16 activations).

- Dense linears: model_executor/layers/quantization/fp8.py::Fp8LinearMethod@0.32.0 selects the
  MarlinFP8ScaledMMLinearKernel when the device lacks FP8 (capability < 8.9); the repacked weights keep one byte per
  value (utils/marlin_utils_fp8.py::prepare_fp8_layer_for_marlin: FP8 packed into int32 words, then permuted), so
  the weights' footprint is the checkpoint's. What changes is speed: every matmul dequantizes, so compute-bound
  work (prefill, large batches) runs at BF16 speed or below; a caveat, not a number.
- MoE experts: layers/fused_moe/oracle/fp8.py::select_fp8_moe_backend@0.32.0 picks Fp8MoeBackend.MARLIN there.
  Measured (vllm-project/vllm#22177, vLLM 0.10, 8 x 24 GB Ampere, Qwen3-Coder-30B-A3B-Instruct-FP8, TP 8 + EP):
  at --gpu-memory-utilization 0.7 the GPU held 24,003 of 24,564 MiB with a 12.11 GiB KV cache, i.e. 6.65 GiB above
  ceil(T x u); at 0.85 the same launch ran out of CUDA memory (the BF16 checkpoint started at 0.85). 6.65 GiB is
  1.97 x the FP8 routed-expert bytes of one rank (16 of 128 experts: 3.37 GiB), i.e. the experts at two bytes a
  value, held outside the budget vLLM sizes the KV cache from. Modelled as that: 2 bytes per routed-expert value on
  the rank, beyond ceil(T x u). One public measurement: a later release may have removed it (the plan says so).
"""

from __future__ import annotations

from dataclasses import dataclass

from specbench.contracts import GIB
from specbench.engines.vllm.args import VllmArgs
from specbench.engines.vllm.common import Version
from specbench.engines.vllm.expert_parallel import expert_parallel_delta, routed_bytes
from specbench.engines.vllm.gpu import requested_bytes
from specbench.specs.gpu import GpuSpec
from specbench.specs.model_types import ModelSpec

# SM families with FP8 tensor cores start at 8.9 (Ada); 8.0 / 8.6 / 8.7 are Ampere (platforms/cuda.py::
# has_device_capability(89) in fp8.py's kernel choice@0.32.0)
_NO_FP8 = ("sm80", "sm86", "sm87")
# measured: vllm#22177 (above): the routed experts' values held at 2 bytes outside the budget
OUTSIDE_BYTES_PER_EXPERT_VALUE = 2.0
SOURCE = "vllm-project/vllm#22177 (8 x 24 GB Ampere, Qwen3-Coder-30B-A3B-Instruct-FP8, TP 8 + EP, vLLM 0.10)"


@dataclass(frozen=True)
class Fp8Sm8x:
    outside_bytes: int            # held beyond ceil(T x u) (0 for a dense model)
    failure: str | None
    warnings: tuple[str, ...]


def _fp8_weights(m: ModelSpec) -> bool:
    d = m.quant.default
    return m.quant.method is not None and d is not None and d.name.startswith("fp8")


def fp8_on_sm8x(args: VllmArgs, m: ModelSpec, gpu: GpuSpec | None, total_bytes: int, u: float,
                v: Version) -> Fp8Sm8x | None:
    """None unless FP8 weights (the checkpoint's, or `--quantization fp8` at load: `m` is the model as loaded) meet an
    SM 8.x GPU."""
    if gpu is None or gpu.arch not in _NO_FP8 or not _fp8_weights(m):
        return None
    caveat = (f"{gpu.name} ({gpu.arch}) has no FP8 tensor cores: vLLM runs the FP8 weights weight-only through "
              "Marlin (BF16 activations; fp8.py@0.32.0): weights keep one byte a value, but prefill and large "
              "batches run at BF16 speed or slower")
    if m.moe is None:
        return Fp8Sm8x(0, None, (caveat,))
    experts = routed_bytes(m, args.tp)
    if args.enable_expert_parallel:
        experts += expert_parallel_delta(m, args.tp, args.dp)
    bpv = m.quant.scheme_for("experts", m.dtype, is_expert=True).bytes_per_param or 1.0
    outside = int(experts / bpv * OUTSIDE_BYTES_PER_EXPERT_VALUE)
    held = requested_bytes(total_bytes, u, v) + outside  # R, as the budget (gpu.py)
    said = (f"its FP8 MoE experts run through Marlin, measured holding {outside / GIB:.2f} GiB per GPU outside the "
            f"KV budget (2 bytes a routed-expert value: {SOURCE}; one public measurement)")
    if held <= total_bytes:
        return Fp8Sm8x(outside, None, (f"{caveat}; {said}: {held / GIB:.2f} of {total_bytes / GIB:.2f} GiB",))
    fit_u = max(0.0, (total_bytes - outside) / total_bytes)
    return Fp8Sm8x(outside, (
        f"torch.OutOfMemoryError: CUDA out of memory expected after the KV cache is allocated: {said}; "
        f"gpu_memory_utilization {u:g} x {total_bytes / GIB:.2f} GiB + {outside / GIB:.2f} GiB = {held / GIB:.2f} GiB "
        f"> {total_bytes / GIB:.2f} GiB (fits at --gpu-memory-utilization {int(fit_u * 100) / 100:g} or below)"),
        (caveat,))
