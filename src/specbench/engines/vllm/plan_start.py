"""The first stage of one vLLM plan (plan.py::plan_once): what every outcome of the plan shares (`_Start`). The setup
the rule set resolves (cpu.py / gpu.py), u (--gpu-memory-utilization), and the weights per rank of the target and of
its drafter as vLLM loads them (dtype, online quantization, expert parallelism, CPU offload; measured ones replace
the estimate), with the log lines and warnings so far.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from specbench.contracts import GIB
from specbench.engines.vllm import cpu as vllm_cpu
from specbench.engines.vllm import gpu as vllm_gpu
from specbench.engines.vllm.args import VllmArgs
from specbench.engines.vllm.expert_parallel import ep_size, expert_parallel_delta
from specbench.engines.vllm.layout import MTP_METHODS, NO_DRAFT_METHODS, Setup
from specbench.engines.vllm.not_modelled import ep_uneven_warning
from specbench.engines.vllm.outcome import CommonFields, Context
from specbench.errors import UserError
from specbench.specs.dtypes import dtype_bytes
from specbench.specs.header_weights import WEIGHTS_SOURCE, header_weight_bytes
from specbench.specs.memo import per_spec
from specbench.specs.model_types import ModelSpec
from specbench.specs.quant import scheme_for_flag
from specbench.specs.weights import draft_model_bytes, mtp_draft_bytes, mtp_draft_tensors, weight_bytes


@dataclass(frozen=True)
class _Start:
    """What every outcome of one plan shares: the resolved setup, u, the weights per rank (and the model as it is
    loaded), the log lines and warnings so far."""

    setup: Setup
    u: float
    weights_bytes: int
    draft_weights_bytes: int
    loaded: ModelSpec  # the target in the dtype vLLM loads it in
    mamba_layers: int
    lines: tuple[str, ...]
    warnings: tuple[str, ...]
    weights_source: str = "estimated from config.json (specs/weights.py)"

    def more(self, lines: tuple[str, ...] = (), warnings: tuple[str, ...] = ()) -> _Start:
        return dataclasses.replace(self, lines=self.lines + tuple(lines), warnings=self.warnings + tuple(warnings))

    def common(self, block_size: int | None = None) -> CommonFields:
        """The VllmPlan fields every outcome fills the same way (`block_size`: the pool's, where it has its own)."""
        return CommonFields(setup=self.setup, u=self.u, weights_bytes=self.weights_bytes,
                            draft_weights_bytes=self.draft_weights_bytes,
                            block_size=self.setup.block_size if block_size is None else block_size,
                            mamba_layers=self.mamba_layers)


# One derived spec per (source spec object, change) (specs/memo.py): the fix search plans the same launch ~150 times,
# and a new object each time missed the weights memo (it keys on the object): 0.86 s for one plan of a --dtype float16
# launch (vllm-gpu-294).
def _with_dtype(m: ModelSpec, dtype: str) -> ModelSpec:
    return per_spec("as-dtype", m, dtype, compute=lambda: dataclasses.replace(m, dtype=dtype)) if m.dtype != dtype \
        else m


def _start(args: VllmArgs, m: ModelSpec, draft: ModelSpec | None, ctx: Context) -> _Start:
    """The setup the rule set resolves, u, and the weights (measured ones replace the estimate)."""
    v = ctx.version
    warnings: list[str] = [ctx.version_warning] if ctx.version_warning else []
    if args.pp > 1:
        warnings.append("pipeline parallelism is planned as one stage holding every layer")
    _check_tp(m, args.tp)
    if ctx.device == "cpu":
        setup = vllm_cpu.cpu_setup(args, m, draft, v, avx512_bf16=ctx.avx512_bf16, amx_tile=ctx.amx_tile)
        warnings += vllm_cpu.cpu_warnings(m, draft, setup.spec_method)
    else:
        assert ctx.gpu is not None and ctx.total_bytes is not None
        setup = vllm_gpu.gpu_setup(args, m, draft, v, ctx.gpu, ctx.total_bytes)
    if m.quant.kv_cache_quant_algo and str(m.quant.kv_cache_quant_algo).upper().startswith("FP8") \
            and args.kv_cache_dtype == "auto":
        setup = dataclasses.replace(setup, kv_dtype_bytes=1)
    # weights per rank (vLLM loads in the resolved dtype; a float32 checkpoint is downcast)
    mw = _with_dtype(m, setup.model_dtype)
    notes: list[str] = list(setup.notes)
    online = scheme_for_flag(args.quantization) if args.quantization and mw.quant.method is None else None
    if online is not None:
        # online quantization of an unquantized checkpoint (`--quantization fp8`: Fp8LinearMethod /
        # Fp8MoEMethod keep linears and experts in fp8 with per-tensor fp32 scales, embed/lm_head unquantized:
        # model_executor/layers/quantization/fp8.py@0.32.0)
        mw = per_spec("online-quant", mw, args.quantization, compute=lambda: dataclasses.replace(mw, quant=online))
        notes.append(f"weights planned as {mw.quant.label}: --quantization {args.quantization} quantizes at load")
    W_t = weight_bytes(mw, args.tp)
    W_d = _draft_bytes(m, draft, args, setup)
    hw = header_weight_bytes(mw, args.tp)  # exact when the checkpoint's safetensors headers were reachable
    W_t, w_src = (hw, WEIGHTS_SOURCE) if hw is not None else (W_t, "estimated from config.json (specs/weights.py)")
    hd = header_weight_bytes(_with_dtype(draft, setup.model_dtype), _draft_tp(args), as_draft=True) \
        if W_d and draft is not None and draft is not m else None
    W_d = hd if hd is not None else W_d
    if args.enable_expert_parallel and m.moe is not None:
        delta = expert_parallel_delta(mw, args.tp, args.dp)
        W_t += delta
        notes.append(f"--enable-expert-parallel: routed experts whole on {ep_size(args.tp, args.dp)} ranks "
                     f"({delta / GIB:+.2f} GiB on rank 0 against the TP split)")
    if (uneven := ep_uneven_warning(args, m.moe.num_experts if m.moe is not None else None)) is not None:
        warnings.append(uneven)
    if args.cpu_offload_gb:
        # model_executor/offloader/uva.py::UVAOffloader._maybe_offload_to_cpu@0.32.0: parameters move to host
        # memory one by one until cpu_offload_gb (per GPU) is reached (one parameter may overshoot)
        off = min(W_t, int(args.cpu_offload_gb * GIB))
        W_t -= off
        notes.append(f"--cpu-offload-gb {args.cpu_offload_gb:g}: {off / GIB:.2f} GiB of weights per GPU in host "
                     "memory (UVA)")
    if ctx.weights_gib is not None:
        W_t = int(ctx.weights_gib * GIB)
        W_d = int(ctx.draft_weights_gib * GIB) if ctx.draft_weights_gib is not None else 0
    elif ctx.draft_weights_gib is not None:
        W_d = int(ctx.draft_weights_gib * GIB)
    u = args.gpu_memory_utilization if args.gpu_memory_utilization is not None else vllm_gpu.default_u(v)
    return _Start(setup, u, W_t, W_d, mw, len(m.linear_layers), tuple(notes), tuple(warnings), w_src)


def _check_tp(m: ModelSpec, tp: int) -> None:
    """vLLM's own divisibility checks (config/parallel.py::verify_with_model_config / the linear layers)."""
    if m.num_attention_heads and m.num_attention_heads % tp:
        raise UserError(f"Total number of attention heads ({m.num_attention_heads}) must be divisible by tensor "
                        f"parallel size ({tp}).")


def _draft_tp(args: VllmArgs) -> int:
    s = args.speculative
    return s.draft_tensor_parallel_size if s and s.draft_tensor_parallel_size else args.tp


def vllm_mtp_draft_bytes(m: ModelSpec, tp: int, pp: int = 1) -> int:
    """The MTP drafter as "Model loading took" counts it: its layers only. The MTP model builds its own
    embed_tokens and lm_head (model_executor/models/qwen3_5_mtp.py::Qwen3_5MTP.__init__@0.32.0, likewise
    qwen3_next_mtp.py / deepseek_mtp.py), then v1/spec_decode/llm_base_proposer.py::_maybe_share_embeddings and
    _maybe_share_lm_head@0.32.0 delete both and point at the target's ("Detected MTP model. Sharing target model
    ... weights with the draft model.", every MTP model at PP 1; the lm_head at any PP), all inside
    gpu_model_runner.py::GPUModelRunner.load_model's DeviceMemoryProfiler, which reads allocated memory after
    empty_cache (platforms/cuda.py::get_current_memory_usage): the two copies are gone from the measured number.
    A transient at load time only."""
    shared = {"mtp.lm_head"} | ({"mtp.embed_tokens"} if pp == 1 else set())
    own = sum(t.params for t in mtp_draft_tensors(m, tp) if t.name in shared)
    return max(0, mtp_draft_bytes(m, tp) - int(own * dtype_bytes(m.dtype)))


def _draft_bytes(m: ModelSpec, draft: ModelSpec | None, args: VllmArgs, setup: Setup) -> int:
    method = setup.spec_method
    if not method or method in NO_DRAFT_METHODS:
        return 0
    if method in MTP_METHODS:
        return vllm_mtp_draft_bytes(_with_dtype(m, setup.model_dtype), args.tp, args.pp)
    if draft is None:
        return 0
    d = _with_dtype(draft, setup.model_dtype)
    if method == "draft_model" or d.draft is None:
        # draft_model shares nothing (vllm/v1/spec_decode/draft_model.py::DraftModelProposer._maybe_share_embeddings
        # and _maybe_share_lm_head@0.32.0)
        return weight_bytes(d, _draft_tp(args))
    # EAGLE drafters without their own embed_tokens share the target's (llm_base_proposer.py@0.32.0)
    return draft_model_bytes(d, _draft_tp(args), shares_target_embed=True)
