"""GPU catalog: name -> total memory in MiB as `nvidia-smi --query-gpu=memory.total` reports it.

SGLang reads exactly this number (sglang/srt/utils/common.py::get_device_memory_capacity, min over GPUs) to pick
its defaults (chunked prefill, cuda-graph max bs, mem_fraction_static). Sources: nvidia-smi output in public logs
and vendor datasheets; the RTX PRO 6000 value is the one used in sglang-memory.md §2's worked example, the H200
value is what the device machine's nvidia-smi prints.
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

    @property
    def total_gib(self) -> float:
        return self.total_mib / 1024


CATALOG: tuple[GpuSpec, ...] = (
    GpuSpec("RTX PRO 6000 Blackwell", 97887, 188, ("rtx-pro-6000", "rtxpro6000", "pro6000", "rtx-pro-6000-blackwell",
                                                   "rtx pro 6000")),
    GpuSpec("H100 80GB", 81559, 132, ("h100", "h100-sxm", "h100-80gb", "h100-pcie")),
    GpuSpec("H200", 143771, 132, ("h200", "h200-sxm", "h200-141gb")),
    GpuSpec("H20", 97871, 78, ("h20",)),
    GpuSpec("B200", 183359, 148, ("b200",)),
    GpuSpec("A100 80GB", 81920, 108, ("a100-80gb", "a100", "a100-80g", "a100-sxm4-80gb")),
    GpuSpec("A100 40GB", 40960, 108, ("a100-40gb", "a100-40g", "a100-sxm4-40gb")),
    GpuSpec("L40S", 46068, 142, ("l40s",)),
    GpuSpec("RTX 6000 Ada", 49140, 142, ("rtx-6000-ada", "rtx6000ada")),
    GpuSpec("RTX 4090", 24564, 128, ("4090", "rtx-4090", "rtx4090")),
    GpuSpec("RTX 5090", 32607, 170, ("5090", "rtx-5090", "rtx5090")),
    GpuSpec("RTX 5080", 16303, 84, ("5080", "rtx-5080", "rtx5080")),
    GpuSpec("RTX 3090", 24576, 82, ("3090", "rtx-3090", "rtx3090")),
    GpuSpec("DGX Spark GB10", 122572, 48, ("gb10", "dgx-spark", "spark")),
)


def _norm(s: str) -> str:
    return re.sub(r"[\s_]+", "-", s.strip().lower())


def find_gpu(name: str) -> GpuSpec:
    key = _norm(name)
    for g in CATALOG:
        if key == _norm(g.name) or key in {_norm(a) for a in g.aliases}:
            return g
    raise FlagError(f"unknown GPU {name!r}; known: {', '.join(g.name for g in CATALOG)} (or use --gpu-mem-gib X)")


def custom_gpu(total_gib: float) -> GpuSpec:
    if not total_gib or total_gib <= 0:
        raise FlagError(f"--gpu-mem-gib must be positive, got {total_gib}")
    return GpuSpec(f"custom {total_gib:g} GiB", int(round(total_gib * 1024)), 0)
