"""The vLLM GPU rule set: from `gpu_memory_utilization` (or `--kv-cache-memory-bytes`) to `K`, by version.

v1/worker/gpu_worker.py::Worker.determine_available_memory and utils/mem_utils.py::memory_profiling:
    R = ceil(T·u)  (0.14+; a plain float T·u before)       v1/worker/utils.py::request_memory (F0 < R fails)
    K = R - non_kv - G_applied                                0.27+: non_kv = (F0 - F1) + transient headroom
                                                               0.11-0.26: non_kv = weights + torch peak + non-torch
    G_applied = the CUDA-graph estimate, subtracted by default since 0.20.0 (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS
                default "1"), not with --enforce-eager, 0 under Model Runner V2 in 0.22-0.28
    --kv-cache-memory-bytes: K exactly (u ignored, nothing checked).
V0 engine (<= 0.7, the default before V1): K = T·u - (weights + peak + non-torch), blocks of bs·Σ 2·h·d·s bytes
(worker/worker.py::determine_num_available_blocks, raise_if_cache_size_invalid).

What vLLM measures at start is modelled and can be overridden by measured values: `weights_gib` ("Model loading
took X GiB", target + draft) and `non_kv_gib` (everything else inside the budget: activation peak + non-torch +
the applied CUDA-graph estimate; from a log: R - weights - "Available KV cache memory").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from specbench.contracts import GIB
from specbench.engines.vllm.args import VllmArgs
from specbench.engines.vllm.common import Version, format_gib
from specbench.engines.vllm.gpu_fit import (
    capture_sizes,
    cudagraph_estimate_bytes,
    forward_bytes,
    graph_count,
    sampler_bytes,
)
from specbench.engines.vllm.layout import (
    Setup,
    attention_page_per_token,
    default_max_model_len,
    kv_dtype_bytes_for,
    mamba_setup,
    resolve_model_dtype,
)
from specbench.engines.vllm.pool import PoolFailure
from specbench.specs.gpu import GpuSpec, context_overhead

# Estimates used only when no measured value is given (each overridable: --avail-before-load-gib, --non-kv-gib).
# The CUDA context + cuBLAS handles before the init snapshot (lowers F0), and from 0.11 the NCCL / custom all-reduce
# buffers at TP>1: specs/gpu.py::context_overhead, the per-GPU table with the source of each row.
# non-torch memory that appears after the snapshot: 0.1 GiB in the one real vLLM breakdown we hold
# (real-logs-dev.json, vllm-llama3-8b-a100-40gb-v0: "non_torch_gib": 0.1).
NON_TORCH_GIB = 0.1
# G_est: a price per captured graph x the graphs the release captures, fitted to the public logs that print
# "Estimated CUDA graph memory" (gpu_fit.py, tests/data/vllm-gpu-corpus/); pass --non-kv-gib from a real boot's
# summary line for exact numbers.


# v1/worker/gpu_model_runner.py::GPUModelRunner.load_model logs this, then re-raises torch's OutOfMemoryError
LOAD_OOM_TEXT = ("Failed to load model - not enough GPU memory. Try lowering --gpu-memory-utilization to free memory "
                 "for weights, increasing --tensor-parallel-size, or using --quantization. See "
                 "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more tips.")


def default_u(v: Version) -> float:
    """config/cache.py::CacheConfig.gpu_memory_utilization: 0.92 since 0.20.0, 0.9 before."""
    return 0.92 if v >= (0, 20, 0) else 0.9


def batch_defaults(total_bytes: int, gpu: GpuSpec, v: Version) -> tuple[int, int]:
    """engine/arg_utils.py::EngineArgs.get_batch_defaults (OpenAI server): (max_num_batched_tokens, max_num_seqs)."""
    if v >= (0, 28, 0) and total_bytes >= 160 * GIB:
        return 16384, 1024
    if total_bytes >= 70 * GIB and "a100" not in gpu.name.lower():
        return 8192, 1024
    return 2048, 256


def is_v0(v: Version) -> bool:
    """V1 became the default engine in 0.8.0; V0 was removed in 0.11.0."""
    return v < (0, 8, 0)


def gpu_setup(args: VllmArgs, m, draft, v: Version, gpu: GpuSpec, total_bytes: int) -> Setup:
    notes: list[str] = []
    arch = gpu.arch  # the catalog's SM family (specs/gpu.py), every GPU it lists
    model_dtype, note = resolve_model_dtype(m, args.dtype)
    if note:
        notes.append(note)
    derived = default_max_model_len(m, v, args.hf_overrides_dict)
    L = args.max_model_len if args.max_model_len not in (None, -1) else derived
    mnbt_d, mns_d = batch_defaults(total_bytes, gpu, v)
    mnbt = args.max_num_batched_tokens or mnbt_d
    mns = args.max_num_seqs or mns_d
    if args.performance_mode == "throughput":
        mnbt = args.max_num_batched_tokens or mnbt * 2
        mns = args.max_num_seqs or mns * 2
    if args.max_num_batched_tokens is None:
        if args.enable_chunked_prefill is False or is_v0(v):
            mnbt = max(L, mnbt)
        mnbt = min(mns * L, mnbt)
    if args.max_num_seqs is None:
        mns = min(mns, mnbt)
    # block size: CacheConfig.DEFAULT_BLOCK_SIZE 16; MLA backends pick theirs (FlashMLA 64 on Hopper,
    # CUTLASS_MLA 128 on Blackwell) in update_block_size_for_backend phase 1
    if m.mla is not None:
        kernel = 128 if arch.startswith("sm10") else 64
        bs = args.block_size or kernel
    else:
        kernel = 16
        bs = args.block_size or 16
    k = args.num_speculative_tokens
    method = args.speculative.kind if args.speculative else None
    prefix, mode, mode_note, conv, ssm = mamba_setup(m, args, v, k, model_dtype)
    if mode_note:
        notes.append(mode_note)
    gdn_fi = bool(m.gdn is not None and v >= (0, 33, 0) and (
        arch == "sm90" or (arch.startswith(("sm10", "sm12")) and m.gdn.key_head_dim == 128)))
    return Setup(version=v, device="cuda", tp=args.tp, max_model_len=L, auto_fit=args.max_model_len == -1,
                   max_num_seqs=mns, max_num_batched_tokens=mnbt, model_dtype=model_dtype,
                   kv_dtype_bytes=kv_dtype_bytes_for(args.kv_cache_dtype, model_dtype), conv_dtype=conv,
                   ssm_dtype=ssm, block_size=bs, kernel_min_block=kernel, backend_lcm=kernel, prefix_caching=prefix,
                   mamba_mode=mode, spec_method=method, k=k, gdn_flashinfer=gdn_fi,
                   async_scheduling=v >= (0, 14, 0), notes=tuple(notes))


@dataclass(frozen=True)
class GpuBudget:
    total_bytes: int
    u: float
    requested_bytes: int           # R
    free_at_start_bytes: int       # F0 (estimated)
    weights_bytes: int
    non_kv_bytes: int              # activation peak + non-torch + applied CUDA-graph estimate
    cuda_graph_bytes: int          # the part of non_kv that is the CUDA-graph estimate (0 when not applied)
    kv_bytes: int                  # K
    source: str
    non_kv_measured: bool
    failure: PoolFailure | None = None
    lines: tuple[str, ...] = ()
    activation_bytes: int = 0      # the estimated activation peak inside non_kv (0 when non_kv is measured)


def cuda_graph_applied(args: VllmArgs, m, v: Version) -> bool:
    """G_applied != 0: 0.20+ (env default "1"), not with --enforce-eager, not under MRV2 in 0.22-0.28 (dense,
    unquantized models). The default: vllm/envs.py::VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS@0.32.0 ("1"); MRV2's
    vllm/v1/worker/gpu/model_runner.py::GPUModelRunner.profile_cudagraph_memory returned 0 in 0.22-0.28."""
    if args.no_cudagraphs or v < (0, 20, 0):
        return False
    if (0, 22, 0) <= v < (0, 29, 0) and not m.linear_layers and m.moe is None and m.quant.method in (None, "", "none"):
        return False
    return True


def graph_count_for(args: VllmArgs, setup: Setup, gpu: GpuSpec) -> int:
    """The graphs vLLM captures for this launch (gpu_fit.py::capture_sizes / graph_count): the decode query length
    is 1 + k with speculation; `-cc.cudagraph_capture_sizes` / `--max-cudagraph-capture-size` move the list."""
    q = 1 + setup.k
    sizes = capture_sizes(setup.max_num_seqs, setup.max_num_batched_tokens, q, gpu.arch.startswith("sm10"),
                          max_capture=args.capture_ceiling, explicit=args.cudagraph_capture_sizes)
    return graph_count(sizes, setup.max_num_seqs, q, args.full_cudagraphs)


def activation_estimate(m, setup: Setup, tp: int) -> int:
    """The transient peak of the profile run (gpu_model_runner.py::GPUModelRunner.profile_run@0.32.0: one forward of
    max_num_batched_tokens tokens, then the dummy sampler on min(max_num_seqs, tokens) rows), fitted to the public
    logs that print it (gpu_fit.py: `forward_bytes`, `sampler_bytes`). The two do not overlap: the forward's
    intermediates are freed before the sampler runs, so the peak is the larger."""
    T = setup.max_num_batched_tokens
    rows = min(setup.max_num_seqs, T)
    return max(forward_bytes(m, T, tp), sampler_bytes(m.vocab_size, rows, setup.version))


def requested_bytes(total_bytes: int, u: float, v: Version) -> int:
    """R = ceil(T·u) (0.14+; a plain T·u before): v1/worker/utils.py::request_memory."""
    return math.ceil(total_bytes * u) if v >= (0, 14, 0) else int(total_bytes * u)


def gpu_budget(args: VllmArgs, m, setup: Setup, gpu: GpuSpec, total_bytes: int, weights_bytes: int,
               non_kv_gib: float | None, free_at_start_gib: float | None = None) -> GpuBudget:
    v = setup.version
    u = args.gpu_memory_utilization if args.gpu_memory_utilization is not None else default_u(v)
    R = requested_bytes(total_bytes, u, v)
    pre = context_overhead(gpu, args.tp * args.pp if v >= (0, 11, 0) else 1).gib
    # F0: measured ("Free memory on device (F0/T GiB) on startup", --avail-before-load-gib) or T minus the estimate
    # (the overhead table is measured against nvidia-smi's total, specs/gpu.py, not against vLLM's smaller T)
    F0 = int(free_at_start_gib * GIB) if free_at_start_gib is not None else \
        min(total_bytes, int((gpu.total_mib << 20) - pre * GIB))
    lines: list[str] = []
    g_bytes = 0
    act_bytes = 0
    if non_kv_gib is not None:
        non_kv = int(non_kv_gib * GIB)
        measured = True
        src = f"measured non-KV {non_kv_gib} GiB"
    else:
        measured = False
        act = activation_estimate(m, setup, args.tp)
        if cuda_graph_applied(args, m, v):
            g_bytes = cudagraph_estimate_bytes(graph_count_for(args, setup, gpu))
        non_kv = act + int(NON_TORCH_GIB * GIB) + g_bytes
        act_bytes = act
        src = (f"estimated non-KV: activation {format_gib(act)} GiB + non-torch {NON_TORCH_GIB} GiB"
               + (f" + CUDA graphs {format_gib(g_bytes)} GiB" if g_bytes else ""))
    failure = None
    if args.kv_cache_memory_bytes is not None and not is_v0(v):
        K = args.kv_cache_memory_bytes
        src = f"--kv-cache-memory-bytes {K} (u ignored, profiling skipped)"
        lines.append(f"Initial free memory {format_gib(F0)} GiB, reserved {format_gib(K)} GiB memory for KV Cache "
                     f"as specified by kv_cache_memory_bytes config and skipped memory profiling. This does not "
                     f"respect the gpu_memory_utilization config. Only use kv_cache_memory_bytes config when you want "
                     f"manual control of KV cache memory size. If OOM'ed, check the difference of initial free "
                     f"memory between the current run and the previous run where kv_cache_memory_bytes is suggested "
                     f"and update it correspondingly.")
    else:
        K = R - weights_bytes - non_kv
        if weights_bytes > F0:
            failure = PoolFailure("load_oom", LOAD_OOM_TEXT)
        elif not is_v0(v) and F0 < R:
            failure = PoolFailure("request_memory",
                                f"Free memory on device cuda:0 ({format_gib(F0)}/{format_gib(total_bytes)} GiB) "
                                f"on startup is less than desired GPU memory utilization ({u}, {format_gib(R)} "
                                f"GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.")
        lines.append(f"Model loading took {format_gib(weights_bytes)} GiB memory")
        lines.append(f"Available KV cache memory: {format_gib(K)} GiB")
    return GpuBudget(total_bytes, u, R, F0, weights_bytes, non_kv, g_bytes, K, src, measured, failure, tuple(lines),
                     act_bytes)


@dataclass(frozen=True)
class V0Pool:
    num_blocks: int
    kv_tokens: int
    max_concurrency: float
    failure: PoolFailure | None
    lines: tuple[str, ...]
    block_bytes: int = 0


def v0_pool(m, setup: Setup, K: int) -> V0Pool:
    """V0 engine: worker/worker.py::determine_num_available_blocks (cache_block_size = bs·Σ_layers 2·h·d·s),
    raise_if_cache_size_invalid, gpu_executor.py's "# GPU blocks" and "Maximum concurrency" lines."""
    bs = setup.block_size
    per_tok = sum(attention_page_per_token(m, setup, setup.tp) for _ in m.attention_layers)
    block = bs * per_tok
    n = max(0, int(K // block)) if block else 0
    L = setup.max_model_len
    conc = n * bs / L
    lines = (f"# GPU blocks: {n}", f"Maximum concurrency for {L} tokens per request: {conc:.2f}x")
    if n <= 0:
        return V0Pool(n, 0, 0.0, PoolFailure("no_memory", "No available memory for the cache blocks. Try increasing "
                                                         "`gpu_memory_utilization` when initializing the engine."),
                      lines, block)
    if L > bs * n:
        return V0Pool(n, bs * n, conc, PoolFailure(
            "max_model_len",
            f"The model's max seq len ({L}) is larger than the maximum number of tokens that can be stored in KV "
            f"cache ({bs * n}). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
            f"initializing the engine."), lines, block)
    return V0Pool(n, bs * n, conc, None, lines, block)
