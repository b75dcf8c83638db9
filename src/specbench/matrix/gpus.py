"""The GPUs a packed run may use, and which `tp` of them a server tuple gets.

Where they come from: `--gpus 0-7` / `--gpus 0,1,4` / `--gpus all` (then `CUDA_VISIBLE_DEVICES` when set, else
`nvidia-smi --query-gpu=index,memory.total,memory.used --format=csv,noheader,nounits`). Adjacency from
`nvidia-smi topo -m` when it is readable (NV# < PIX < PXB < PHB < NODE < SYS, the order nvidia-smi's legend
gives, closest first); without it, GPUs next to each other by index count as adjacent.
"""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence

from specbench.errors import UserError

# nvidia-smi topo -m legend, closest first: NV# (NVLink; more links closer), PIX, PXB, PHB, NODE, SYS
_LINK_COST = {"PIX": 10.0, "PXB": 20.0, "PHB": 30.0, "NODE": 40.0, "SYS": 50.0}


def parse_gpus(text: str) -> tuple[str, ...]:
    """`0-7`, `0,1,4`, `0-3,6` -> the GPU ids in order, each once; a one-line error otherwise."""
    out: list[str] = []
    for part in text.split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise UserError(f"--gpus {text!r}: expected indices like 0-7 or 0,1,4 (or `all`)")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            raise UserError(f"--gpus {text!r}: range {part} runs backwards")
        for i in range(lo, hi + 1):
            if str(i) in out:
                raise UserError(f"--gpus {text!r}: GPU {i} named twice")
            out.append(str(i))
    return tuple(out)


def _smi(args: Sequence[str]) -> str | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        return subprocess.run([exe, *args], capture_output=True, text=True, timeout=20, check=True).stdout
    except (subprocess.SubprocessError, OSError):
        return None


def discover(env: Mapping[str, str]) -> tuple[str, ...]:
    """`CUDA_VISIBLE_DEVICES` when set, else every GPU nvidia-smi lists; a one-line error when there are none."""
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None and cvd.strip():
        return tuple(x.strip() for x in cvd.split(",") if x.strip())
    out = _smi(["--query-gpu=index,memory.total,memory.used", "--format=csv,noheader,nounits"])
    ids = [line.split(",")[0].strip() for line in (out or "").splitlines() if line.strip()]
    if not ids:
        raise UserError("--gpus all: no GPU found (CUDA_VISIBLE_DEVICES is unset and nvidia-smi lists none)")
    return tuple(ids)


def resolve(text: str, env: Mapping[str, str]) -> tuple[str, ...]:
    return discover(env) if text.strip() == "all" else parse_gpus(text)


def parse_topology(text: str) -> dict[tuple[str, str], float]:
    """`nvidia-smi topo -m` -> cost per ordered pair of GPU indices (lower is closer)."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)  # nvidia-smi underlines the header, even into a pipe
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return {}
    cols = [w[3:] for w in lines[0].split() if re.fullmatch(r"GPU\d+", w)]
    cost: dict[tuple[str, str], float] = {}
    for ln in lines[1:]:
        words = ln.split()
        if not words or not re.fullmatch(r"GPU\d+", words[0]):
            continue
        a = words[0][3:]
        for b, link in zip(cols, words[1:1 + len(cols)]):
            if link == "X":
                continue
            nv = re.fullmatch(r"NV(\d+)", link)
            cost[(a, b)] = 1.0 / int(nv.group(1)) if nv else _LINK_COST.get(link, 60.0)
    return cost


def topology() -> dict[tuple[str, str], float] | None:
    out = _smi(["topo", "-m"])
    cost = parse_topology(out) if out else {}
    return cost or None


def pick(free: Sequence[str], tp: int, order: Sequence[str],
         cost: Mapping[tuple[str, str], float] | None = None) -> tuple[str, ...] | None:
    """`tp` of the free GPUs, closest together: the smallest worst link, then the smallest sum of links, then the
    lowest positions. Without a topology the distance is the difference of positions in `order`."""
    if tp > len(free):
        return None
    pos = {g: i for i, g in enumerate(order)}

    def link(a: str, b: str) -> float:
        if cost is not None and (a, b) in cost:
            return cost[(a, b)]
        return 100.0 + abs(pos[a] - pos[b])  # unknown pairs: after every known link, nearer by index first

    ranked = sorted(free, key=lambda g: pos[g])
    if len(list(itertools.islice(itertools.combinations(ranked, tp), 5001))) > 5000:  # too many: windows only
        candidates = [tuple(ranked[i:i + tp]) for i in range(len(ranked) - tp + 1)]
    else:
        candidates = list(itertools.combinations(ranked, tp))

    def score(c: tuple[str, ...]) -> tuple[float, float, list[int]]:
        links = [link(a, b) for a, b in itertools.combinations(c, 2)] or [0.0]
        return max(links), sum(links), [pos[g] for g in c]

    return min(candidates, key=score)


class GpuPool:
    """Free and busy GPUs of a packed run."""

    def __init__(self, gpus: Sequence[str], cost: Mapping[tuple[str, str], float] | None = None):
        self.order = tuple(gpus)
        self.free = list(gpus)
        self.cost = cost

    def take(self, tp: int) -> tuple[str, ...] | None:
        got = pick(self.free, tp, self.order, self.cost)
        if got is not None:
            self.free = [g for g in self.free if g not in got]
        return got

    def give(self, gpus: Sequence[str]) -> None:
        self.free.extend(g for g in gpus if g not in self.free)
