"""GPU catalog: name -> total memory in MiB as `nvidia-smi --query-gpu=memory.total` reports it.

SGLang reads exactly this number (sglang/srt/utils/common.py::get_device_memory_capacity, min over GPUs) to pick
its defaults (chunked prefill, cuda-graph max bs, mem_fraction_static). Sources: nvidia-smi output in public logs
and vendor datasheets; the RTX PRO 6000 value is the 96 GB card's total (97,887 MiB = 95.59 GiB) that the
incident logs of tests/data/incident/ fit (see `OVERHEADS`), the H200 value is what the device machine's nvidia-smi
prints. Each row says whether its MiB is measured, from a public log or from the datasheet (`mib_source`);
`OVERHEADS` is the per-GPU (and TP) context overhead with its source.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from specbench.errors import FlagError


@dataclass(frozen=True)
class GpuSpec:
    name: str
    total_mib: int
    sms: int
    aliases: tuple[str, ...] = ()
    arch: str = ""                # "sm80", "sm89", "sm90", "sm100", "sm103", "sm120", "sm121", "gfx942", "gfx950"
    mib_source: str = "spec"      # "measured" (nvidia-smi on a machine we booted), "public log", "spec"

    @property
    def total_gib(self) -> float:
        return self.total_mib / 1024

    @property
    def vendor(self) -> str:
        return "amd" if self.arch.startswith("gfx") else "nvidia"


# MiB as `nvidia-smi --query-gpu=memory.total` / `rocm-smi --showmeminfo vram` print it. "spec" rows are the
# datasheet's capacity in GiB x 1024 x 0.99575, the ratio the measured H200 shows (141 GiB -> 143,771 MiB; the B200's
# 180 GiB gives 183,537 by the rule against 183,359 printed, 0.1 % off); they are estimates until someone boots one.
CATALOG: tuple[GpuSpec, ...] = (
    GpuSpec("RTX PRO 6000 Blackwell", 97887, 188, ("rtx-pro-6000", "rtxpro6000", "pro6000", "rtx-pro-6000-blackwell",
                                                   "rtx pro 6000"), "sm120", "public log"),
    GpuSpec("H100 80GB", 81559, 132, ("h100", "h100-sxm", "h100-80gb"), "sm90", "public log"),
    # its own board, not the SXM one: 114 SMs, 2.0 TB/s HBM2e (NVIDIA H100 PCIe datasheet); memory as the SXM's 80 GB
    GpuSpec("H100 PCIe", 81559, 114, ("h100-pcie", "h100-pcie-80gb"), "sm90", "spec"),
    GpuSpec("H200", 143771, 132, ("h200", "h200-sxm", "h200-141gb"), "sm90", "measured"),
    GpuSpec("H20", 97871, 78, ("h20",), "sm90", "public log"),
    GpuSpec("H800", 81559, 132, ("h800", "h800-sxm", "h800-80gb"), "sm90", "spec"),  # the H100's 80 GB HBM3 board
    GpuSpec("B200", 183359, 148, ("b200",), "sm100", "public log"),
    GpuSpec("B300", 293659, 148, ("b300", "b300-sxm", "hgx-b300"), "sm103", "spec"),        # 288 GB HBM3e
    GpuSpec("GB200", 189654, 148, ("gb200", "gb200-nvl72"), "sm100", "spec"),               # 186 GB HBM3e per GPU
    GpuSpec("GB300", 293659, 148, ("gb300", "gb300-nvl72"), "sm103", "spec"),               # 288 GB HBM3e per GPU
    GpuSpec("A100 80GB", 81920, 108, ("a100-80gb", "a100", "a100-80g", "a100-sxm4-80gb"), "sm80", "public log"),
    GpuSpec("A100 40GB", 40960, 108, ("a100-40gb", "a100-40g", "a100-sxm4-40gb"), "sm80", "public log"),
    GpuSpec("A800", 81920, 108, ("a800", "a800-80gb", "a800-sxm4-80gb"), "sm80", "spec"),  # the A100 80GB board
    GpuSpec("L40S", 46068, 142, ("l40s",), "sm89", "public log"),
    GpuSpec("L20", 46068, 92, ("l20",), "sm89", "spec"),     # 48 GB GDDR6, the L40S's memory
    GpuSpec("L4", 23034, 58, ("l4",), "sm89", "spec"),       # 24 GB GDDR6 with ECC on (not the rule)
    GpuSpec("RTX 6000 Ada", 49140, 142, ("rtx-6000-ada", "rtx6000ada"), "sm89", "public log"),
    GpuSpec("RTX 4090", 24564, 128, ("4090", "rtx-4090", "rtx4090"), "sm89", "public log"),
    GpuSpec("RTX 5090", 32607, 170, ("5090", "rtx-5090", "rtx5090"), "sm120", "public log"),
    GpuSpec("RTX 5080", 16303, 84, ("5080", "rtx-5080", "rtx5080"), "sm120", "public log"),
    GpuSpec("RTX 3090", 24576, 82, ("3090", "rtx-3090", "rtx3090"), "sm86", "public log"),
    GpuSpec("DGX Spark GB10", 122572, 48, ("gb10", "dgx-spark", "spark"), "sm121", "public log"),
    GpuSpec("MI300X", 195772, 304, ("mi300x", "mi300"), "gfx942", "spec"),   # 192 GB HBM3
    GpuSpec("MI325X", 261030, 304, ("mi325x", "mi325"), "gfx942", "spec"),   # 256 GB HBM3e
    GpuSpec("MI355X", 293659, 256, ("mi355x", "mi355"), "gfx950", "spec"),   # 288 GB HBM3e
)


@dataclass(frozen=True)
class ContextOverhead:
    """Free memory a process loses before weights load: CUDA/HIP context, the allocator, NCCL communicators and
    custom all-reduce buffers (SGLang `Load weight begin. avail mem=B`: overhead = GPU total − B)."""
    gpu: str            # catalog name, or "*" for the default row
    tp: int             # 1, or the TP size it was measured at (rows at larger TP include the NCCL share)
    gib: float
    source: str


# Each row: a boot whose `Load weight begin. avail mem` we have, or an estimate said to be one.
OVERHEADS: tuple[ContextOverhead, ...] = (
    ContextOverhead("RTX PRO 6000 Blackwell", 1, 1.35, "measured: tests/data/incident/*.log (95.59 GiB total, "
                    "Load weight begin. avail mem=94.24 GB)"),
    ContextOverhead("H200", 1, 1.27, "measured: tests/data/sglang-0.5.15.post1/*.log (140.40 GiB, avail mem=139.13 GB)"),
    ContextOverhead("H200", 2, 2.12, "measured: tests/data/sglang-0.5.15.post1/q36_27b_tp2_*.log (avail mem=138.28 GB)"),
    ContextOverhead("H200", 8, 3.06, "public log: https://github.com/sgl-project/sglang/pull/11716 (TP0 avail "
                    "mem=137.34 GB, TP8, 0.5.4-era)"),
    ContextOverhead("RTX 4090", 1, 1.53, "public log: https://github.com/sgl-project/sglang/issues/4895 (Load weight "
                    "end avail 3.64 + usage 18.82 = 22.46 of 23.99 GiB; docker, a display may hold some)"),
    ContextOverhead("*", 1, 1.1, "estimate: 24-48 GB cards without a measured boot (issue #12's ~1.1 GiB)"),
    ContextOverhead("*big", 1, 1.27, "estimate: the H200's measured 1.27 GiB for data-centre cards without a boot"),
)
NCCL_EXTRA_GIB = 0.85  # TP>1 without a row: the H200's TP2 - TP1 (2.12 - 1.27), measured


def context_overhead(gpu: GpuSpec, tp: int) -> ContextOverhead:
    """The overhead row for (GPU, TP): an exact row, else the GPU's TP1 row (+ NCCL_EXTRA_GIB at TP>1), else the
    default by card size (+ NCCL at TP>1). The row's `source` says which."""
    t = max(1, tp)
    rows = [r for r in OVERHEADS if r.gpu == gpu.name]
    exact = [r for r in rows if r.tp == t]
    if exact:
        return exact[0]
    base = next((r for r in rows if r.tp == 1), None)
    if base is None:
        key = "*big" if gpu.total_mib > 60 * 1024 else "*"
        base = next(r for r in OVERHEADS if r.gpu == key)
    if t == 1:
        return base
    return ContextOverhead(gpu.name, t, base.gib + NCCL_EXTRA_GIB,
                           f"{base.source} + NCCL {NCCL_EXTRA_GIB} GiB (H200 TP2 - TP1, measured)")


def _norm(s: str) -> str:
    return re.sub(r"[\s_]+", "-", s.strip().lower())


def find_gpu(name: str) -> GpuSpec:
    key = _norm(name)
    for g in CATALOG:
        if key == _norm(g.name) or key in {_norm(a) for a in g.aliases}:
            return g
    raise FlagError(f"unknown GPU {name!r}; known: {', '.join(g.name for g in CATALOG)} (or use --gpu-mem-gib X)")


DEFAULT_GPU = "H200"  # what `specbench plan` assumes without --gpu / --gpu-mem-gib (and without $SPECBENCH_GPU)


def gpu_for(name: str | None, mem_gib: float | None) -> GpuSpec:
    """The GPU a plan is for: a custom GPU of `mem_gib` GiB, else the catalog's `name`, else DEFAULT_GPU."""
    return custom_gpu(mem_gib) if mem_gib is not None else find_gpu(name or DEFAULT_GPU)


def custom_gpu(total_gib: float) -> GpuSpec:
    if not total_gib or total_gib <= 0:
        raise FlagError(f"--gpu-mem-gib must be positive, got {total_gib}")
    return GpuSpec(f"custom {total_gib:g} GiB", int(round(total_gib * 1024)), 0)


# ----------------------------------------------------------------------------- roofline ceilings (predict/)
@dataclass(frozen=True)
class GpuPerf:
    """What one GPU can move and compute: the roofline the step-cost model (specbench/predict/) starts from."""
    gpu: str                 # catalog name
    mem_bw_gbs: float        # HBM/GDDR bandwidth, GB/s (10^9 B/s)
    bf16_dense_tflops: float # dense BF16 tensor-core peak, TFLOP/s (no sparsity)
    source: str
    fp8_dense_tflops: float | None = None  # dense FP8 tensor-core peak, TFLOP/s (recorded; the model reads BF16)
    fp4_dense_tflops: float | None = None  # dense FP4 tensor-core peak, TFLOP/s (recorded; the model reads BF16)


# Vendor datasheet peaks (the roofline's ceilings; the calibration's efficiency says how much of them a step gets).
# The H200 row is checked on the device machine: a device-to-device copy moved ~4.3 TB/s and an 8192^3 bf16 GEMM ran
# at 769-798 TFLOP/s (the workplace's device notes, KINDS.md, 2026-10-28 / 2026-11-04), i.e. 0.90 / 0.80 of these.
PERF: tuple[GpuPerf, ...] = (
    GpuPerf("H200", 4800, 989, "NVIDIA H200 datasheet (SXM: 4.8 TB/s HBM3e, BF16 dense 989 TFLOPS)"),
    GpuPerf("H100 80GB", 3350, 989, "NVIDIA H100 datasheet (SXM: 3.35 TB/s HBM3, BF16 dense 989 TFLOPS)"),
    GpuPerf("H100 PCIe", 2000, 756, "NVIDIA H100 PCIe datasheet (2.0 TB/s HBM2e, BF16 dense 756 TFLOPS)"),
    GpuPerf("H800", 3350, 989, "the H100 SXM's memory and tensor cores (NVIDIA H800 datasheet)"),
    GpuPerf("H20", 4000, 148, "NVIDIA H20 datasheet (4.0 TB/s HBM3, BF16 dense 148 TFLOPS)"),
    GpuPerf("B200", 8000, 2250, "NVIDIA HGX B200 datasheet (8 TB/s HBM3e, BF16 dense 2.25 PFLOPS per GPU)"),
    # Blackwell in Grace superchips and Blackwell Ultra, per GPU, dense: glennklockwood.com/garden/processors/B200
    # (the GB200 variant at 1,200 W: BF16 matrix 2,500 TFLOPS, 8 TB/s) and verda.com/blog/gb300-nvl72-architecture's
    # per-GPU table (B300: BF16 2.25 PFLOPS, 7.7 TB/s; GB300: BF16 2.5 PFLOPS, 8 TB/s)
    GpuPerf("GB200", 8000, 2500, "the GB200 variant of B200 at 1,200 W (8 TB/s HBM3e, BF16 dense 2.5 PFLOPS), as "
                                 "glennklockwood.com/garden/processors/B200 lists it"),
    GpuPerf("B300", 7700, 2250, "B300 per GPU (7.7 TB/s HBM3e, BF16 dense 2.25 PFLOPS), as the per-GPU table of "
                                "verda.com/blog/gb300-nvl72-architecture lists it"),
    GpuPerf("GB300", 8000, 2500, "GB300 per GPU (8 TB/s HBM3e, BF16 dense 2.5 PFLOPS), as the per-GPU table of "
                                 "verda.com/blog/gb300-nvl72-architecture lists it"),
    GpuPerf("A800", 2039, 312, "the A100 SXM 80GB's memory and tensor cores (NVIDIA A800 datasheet: NVLink cut only)"),
    GpuPerf("A100 80GB", 2039, 312, "NVIDIA A100 datasheet (SXM 80GB: 2,039 GB/s, BF16 dense 312 TFLOPS)"),
    GpuPerf("A100 40GB", 1555, 312, "NVIDIA A100 datasheet (SXM 40GB: 1,555 GB/s, BF16 dense 312 TFLOPS)"),
    GpuPerf("L40S", 864, 362, "NVIDIA L40S datasheet (864 GB/s GDDR6, BF16 733 TFLOPS with sparsity = 362 dense)"),
    # The incident's board (examples/qwen36-27b-dflash-ddtree.toml), the Workstation Edition (600 W): NVIDIA RTX PRO
    # 6000 Blackwell Workstation Edition datasheet (https://www.nvidia.com/en-us/products/workstations/professional-
    # desktop-gpus/rtx-pro-6000/): 96 GB GDDR7 on 512 bits at 28 Gbps = 1,792 GB/s, "4,000 AI TOPS" (FP4 with
    # sparsity); the dense tensor peaks of NVIDIA's RTX Blackwell GPU architecture whitepaper (GB202, 188 SMs at the
    # 2,617 MHz boost: BF16 with FP32 accumulate 503.8, FP8 1,007.6, FP4 2,015.2 TFLOPS dense; x2 with sparsity:
    # FP4 4,030 = the "4,000 AI TOPS"). Checked by arithmetic: 512 bits x 28 Gbps / 8 = 1,792 GB/s; 188 SMs x
    # 2,617 MHz x 1,024 dense BF16 FLOP per clock per SM = 503.8 TFLOPS (x2 FP8, x4 FP4); the same figures as public
    # spec listings of the board (e.g. hmc-tech.com's RTX PRO 6000 Blackwell page). The Max-Q (300 W) and Server
    # Editions clock lower: for them these are ceilings above what the board sustains. No calibration yet: its
    # predictions are the uncalibrated roofline.
    GpuPerf("RTX PRO 6000 Blackwell", 1792, 503.8,
            "NVIDIA RTX PRO 6000 Blackwell Workstation Edition datasheet (1,792 GB/s GDDR7) and the RTX Blackwell GPU "
            "architecture whitepaper (BF16 dense 503.8, FP8 1,007.6, FP4 2,015.2 TFLOPS at 2,617 MHz, 188 SMs)",
            fp8_dense_tflops=1007.6, fp4_dense_tflops=2015.2),
    GpuPerf("RTX 4090", 1008, 165, "NVIDIA Ada whitepaper (1,008 GB/s GDDR6X, FP16/BF16 tensor dense 165 TFLOPS)"),
    GpuPerf("MI300X", 5300, 1307, "AMD Instinct MI300X datasheet (5.3 TB/s HBM3, BF16 dense 1,307 TFLOPS)"),
)


def gpu_perf(gpu: GpuSpec) -> GpuPerf | None:
    """The roofline ceilings of a catalog GPU, or None when the catalog has none for it."""
    return next((p for p in PERF if p.gpu == gpu.name), None)
