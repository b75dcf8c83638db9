"""A stand-in `nvidia-smi` for runs without GPUs: a script on PATH that prints what the real one prints on an
8-GPU H200 node for the queries specbench makes (`--query-gpu=...` CSV without header and units, `topo -m`).

Variations for the ways a real one misleads (issue 37): `indices` prints these index values in this order
(duplicates included), `used_mib` sets a GPU's used memory (another process's), `message` is printed instead of
the rows with exit status `rc` (`No devices were found`: the driver's answer on a node without GPUs); a `used_mib`
that is a string (`[N/A]`) is printed as it is."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

# `nvidia-smi topo -m` on an 8x H200 HGX node (every pair over 18 NVLinks), as it prints it
H200_TOPO = "\t".join(["\x1b[4mGPU0", "GPU1", "GPU2", "GPU3", "GPU4", "GPU5", "GPU6", "GPU7", "NIC0",
                       "CPU Affinity", "NUMA Affinity", "GPU NUMA ID\x1b[0m"]) + "\n" + "".join(
    f"GPU{i}\t" + "\t".join(" X " if j == i else "NV18" for j in range(8))
    + f"\tPXB\t{'0-55,112-167' if i < 4 else '56-111,168-223'}\t{0 if i < 4 else 1}\t\tN/A\n" for i in range(8)
) + "NIC0\t" + "\t".join(["PXB"] * 8) + "\t X \n\nLegend:\n\n  X    = Self\n  SYS  = Connection traversing PCIe as " \
    "well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)\n  NV#  = Connection traversing a bonded set " \
    "of # NVLinks\n"

H200_TOTAL_MIB = 143771

SCRIPT = '''#!{python}
import json, sys
args = sys.argv[1:]
cfg = json.load(open({cfg!r}))
if args[:2] == ["topo", "-m"]:
    sys.stdout.write(open({topo!r}).read())
elif args and args[0].startswith("--query-gpu="):
    if cfg["message"] is not None:
        print(cfg["message"])
        sys.exit(cfg["rc"])
    fields = args[0].split("=", 1)[1].split(",")
    for i in cfg["indices"]:
        vals = {{"index": str(i), "uuid": "GPU-%08d-1111-2222-3333-444455556666" % int(i) if str(i).isdigit()
                 else "GPU-" + str(i), "memory.total": str(cfg["total_mib"]),
                 "memory.used": str(cfg["used_mib"].get(str(i), 1)), "name": "NVIDIA H200",
                 "utilization.gpu": "87", "power.draw": "412.50"}}
        print(", ".join(vals[f] for f in fields))
else:
    print("NVIDIA-SMI 570.124.06   Driver Version: 570.124.06   CUDA Version: 12.8")
'''


def uuid(i: int) -> str:
    """The UUID the stand-in gives GPU `i`."""
    return f"GPU-{i:08d}-1111-2222-3333-444455556666"


def install(bin_dir: Path, n: int = 8, topo: str = H200_TOPO, *, indices: Sequence[str | int] | None = None,
            used_mib: Mapping[str | int, float | str] | None = None, total_mib: float = H200_TOTAL_MIB,
            message: str | None = None, rc: int = 0) -> dict[str, str]:
    """Write `nvidia-smi` into bin_dir; the environment (PATH first, no CUDA_VISIBLE_DEVICES) that finds it."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / "topo.txt").write_text(topo)
    cfg = {"indices": [str(i) for i in (range(n) if indices is None else indices)],
           "used_mib": {str(k): v for k, v in (used_mib or {}).items()}, "total_mib": total_mib,
           "message": message, "rc": rc}
    (bin_dir / "smi.json").write_text(json.dumps(cfg))
    exe = bin_dir / "nvidia-smi"
    exe.write_text(SCRIPT.format(python=sys.executable, cfg=str(bin_dir / "smi.json"),
                                 topo=str(bin_dir / "topo.txt")))
    exe.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return env
