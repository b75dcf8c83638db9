"""The GPUs a packed run may use, and which `tp` of them a server tuple gets.

Where they come from: `--gpus 0-7` / `--gpus 0,1,4` / `--gpus all` (then `CUDA_VISIBLE_DEVICES` when set, else
`nvidia-smi --query-gpu=index,uuid,memory.total,memory.used --format=csv,noheader,nounits`). What nvidia-smi prints
is read strictly: a row is an integer index, its UUID and two numbers; anything else ("No devices were found", a
driver's complaint) is no GPU, and an index listed twice counts once. `CUDA_VISIBLE_DEVICES` is read as CUDA reads
it: empty or -1 hides every GPU, the list stops at the first entry that is not a GPU (not an index below the GPU
count, or not a UUID (prefix) naming one GPU), a GPU named twice hides them all. Named ids must exist and be visible.
A GPU with more than BUSY_MIB used when the run starts holds another process's memory: the run skips it and says so.
Adjacency from `nvidia-smi topo -m` when it is readable (NV# < PIX < PXB < PHB < NODE < SYS, the order nvidia-smi's
legend gives, closest first); without it, GPUs next to each other by index count as adjacent.
"""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from specbench.errors import UserError

# nvidia-smi topo -m legend, closest first: NV# (NVLink; more links closer), PIX, PXB, PHB, NODE, SYS
_LINK_COST = {"PIX": 10.0, "PXB": 20.0, "PHB": 30.0, "NODE": 40.0, "SYS": 50.0}
# used memory above which a GPU is another process's before any server of the run starts (an idle GPU shows a few
# MiB; the same tolerance as lifecycle.wait_gpu_baseline)
BUSY_MIB = 1024
_QUERY = ["--query-gpu=index,uuid,memory.total,memory.used", "--format=csv,noheader,nounits"]


@dataclass(frozen=True)
class SmiGpu:
    """One row of nvidia-smi's answer; a memory figure it did not give ([N/A]) is None."""
    index: str
    uuid: str | None
    total_mib: float | None
    used_mib: float | None


@dataclass(frozen=True)
class Listing:
    """The GPUs nvidia-smi lists (None: unknown, there is no nvidia-smi or it did not answer) and, when it lists
    none or is unknown, why in words."""
    gpus: tuple[SmiGpu, ...] | None
    why: str = ""


@dataclass(frozen=True)
class Choice:
    """`--gpus` resolved: the GPU ids, the line that says so, and the warnings to print before the run."""
    ids: tuple[str, ...]
    using: str
    warnings: tuple[str, ...]
    listing: Listing


@dataclass(frozen=True)
class Usable:
    """The chosen GPUs a run may use now: `ids` without the ones another process fills (`skipped`, in words);
    `unknown`: GPUs whose memory use nvidia-smi does not give (used as free)."""
    ids: tuple[str, ...]
    skipped: tuple[str, ...]
    unknown: tuple[str, ...]


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
        if hi - lo > 4096:
            raise UserError(f"--gpus {text!r}: range {part} names more GPUs than a machine has")
        for i in range(lo, hi + 1):
            if str(i) in out:
                raise UserError(f"--gpus {text!r}: GPU {i} named twice")
            out.append(str(i))
    return tuple(out)


def _mib(text: str) -> float | None:
    try:
        v = float(text)
    except ValueError:
        return None  # [N/A], [Not Supported]
    return v if v >= 0 else None


def parse_smi_gpus(text: str) -> tuple[SmiGpu, ...]:
    """`index, uuid, memory.total, memory.used` rows -> the GPUs, each index once (the first row); a line that is
    not such a row (a message, a header) is no GPU."""
    out: dict[str, SmiGpu] = {}
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 4 or not re.fullmatch(r"\d+", fields[0]):
            continue
        index = str(int(fields[0]))
        uuid = fields[1] if re.fullmatch(r"GPU-[0-9A-Za-z-]+", fields[1]) else None
        out.setdefault(index, SmiGpu(index, uuid, _mib(fields[2]), _mib(fields[3])))
    return tuple(out.values())


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")[:200]


def list_gpus() -> Listing:
    """What nvidia-smi lists now."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return Listing(None, "nvidia-smi is not on PATH")
    try:
        p = subprocess.run([exe, *_QUERY], capture_output=True, text=True, timeout=20)
    except (subprocess.SubprocessError, OSError) as exc:
        return Listing(None, f"nvidia-smi did not answer ({type(exc).__name__})")
    gpus = parse_smi_gpus(p.stdout)
    if gpus:
        return Listing(gpus)
    said = _first_line(p.stdout) or _first_line(p.stderr)
    status = f", exit status {p.returncode}" if p.returncode else ""
    return Listing((), f"nvidia-smi lists no GPU ({said or 'it printed nothing'}{status})")


def _cuda_id(entry: str, kind: str, listing: Listing) -> tuple[str | None, str]:
    """One CUDA_VISIBLE_DEVICES entry of a list of `kind` (`index`, `GPU-` or `MIG-`, set by the first entry) ->
    (the GPU's nvidia-smi index, or the entry itself when nothing can check it; None where CUDA stops, with why).
    An index is read as strtoul reads it (its leading digits: `1a` is 1)."""
    if kind == "index":
        digits = re.match(r"\d+", entry)
        if digits is None:
            return None, "not a GPU index"
        if listing.gpus is not None and int(digits.group()) >= len(listing.gpus):
            return None, f"nvidia-smi lists {len(listing.gpus)} GPUs"
        return str(int(digits.group())), ""
    if not entry.upper().startswith(kind):
        return None, f"not a {kind} UUID like the first entry"
    if listing.gpus is None or kind == "MIG-":
        return entry, ""  # a MIG instance: nvidia-smi's GPU rows cannot confirm it
    hits = [g for g in listing.gpus if g.uuid and g.uuid.lower().startswith(entry.lower())]
    if len(hits) == 1:
        return hits[0].index, ""
    return None, "no GPU has this UUID" if not hits else f"the UUID prefix names {len(hits)} GPUs"


def cuda_visible(cvd: str, listing: Listing) -> tuple[tuple[str, ...], str]:
    """The GPUs CUDA sees under `CUDA_VISIBLE_DEVICES=cvd` (nvidia-smi indices where it can tell), and why it sees
    fewer than listed, in words ('' when it sees every entry). As CUDA (and torch.cuda, which follows it) reads it:
    empty: none; the first entry that is not a GPU ends the list; a GPU listed twice leaves none at all."""
    if not cvd.strip():
        return (), "CUDA_VISIBLE_DEVICES is set and empty: CUDA sees no GPU"
    entries = [e.strip() for e in cvd.split(",")]
    kind = next((p for p in ("GPU-", "MIG-") if entries[0].upper().startswith(p)), "index")
    out: list[str] = []
    for entry in entries:
        gpu, why = _cuda_id(entry, kind, listing)
        if gpu is not None and gpu in out:
            return (), f"CUDA_VISIBLE_DEVICES={cvd!r} names GPU {gpu} twice: CUDA then sees no GPU"
        if gpu is None:
            sees = f"GPU {', '.join(out)} only" if out else "no GPU"
            return tuple(out), f"CUDA_VISIBLE_DEVICES={cvd!r}: CUDA stops at {entry!r} ({why}), so it sees {sees}"
        out.append(gpu)
    return tuple(out), ""


def discover(env: Mapping[str, str]) -> tuple[str, ...]:
    """The GPUs `--gpus all` uses: what CUDA sees; a one-line error when it sees none."""
    return resolve("all", env).ids


def resolve(text: str, env: Mapping[str, str]) -> Choice:
    """`--gpus TEXT` -> the GPU ids (`all`: every GPU CUDA sees; named ids: each must exist and be visible)."""
    listing = list_gpus()
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    warnings: list[str] = []
    if cvd is not None:
        seen: tuple[str, ...] | None
        seen, stop = cuda_visible(cvd, listing)
        source = f"CUDA_VISIBLE_DEVICES={cvd!r}"
        if stop and seen:
            warnings.append(stop)
        none_why = stop
    else:
        seen = None if listing.gpus is None else tuple(g.index for g in listing.gpus)
        source, none_why = "nvidia-smi", listing.why
    if text.strip() == "all":
        if seen is None:
            raise UserError(f"--gpus all: no GPU found (CUDA_VISIBLE_DEVICES is unset and {listing.why})")
        if not seen:
            raise UserError(f"--gpus all: no GPU to run on: {none_why}")
        ids = seen
    else:
        ids = parse_gpus(text)
        _check_named(text, ids, seen, source, none_why)
        if seen is None:
            warnings.append(f"--gpus {text}: cannot check that these GPUs exist: {listing.why}")
    return Choice(ids, f"--gpus {text}: using GPU {', '.join(ids)} ({source})", tuple(warnings), listing)


def _check_named(text: str, ids: Sequence[str], seen: Sequence[str] | None, source: str, none_why: str) -> None:
    missing = [g for g in ids if seen is not None and g not in seen]
    if not missing:
        return
    what = f"GPU {', '.join(missing)}"
    if seen is not None and not seen:
        raise UserError(f"--gpus {text}: no {what}: {none_why}")
    if source == "nvidia-smi":
        raise UserError(f"--gpus {text}: no {what} on this machine (nvidia-smi lists GPU {', '.join(seen or ())})")
    raise UserError(f"--gpus {text}: {what} not visible: {source} shows CUDA GPU {', '.join(seen or ())} "
                    "(name those, use --gpus all, or unset CUDA_VISIBLE_DEVICES)")


def usable(ids: Sequence[str], listing: Listing) -> Usable:
    """`ids` without the GPUs whose memory another process holds now (more than BUSY_MIB used)."""
    by_id = {g.index: g for g in listing.gpus or ()} | {g.uuid: g for g in listing.gpus or () if g.uuid}
    keep: list[str] = []
    skipped: list[str] = []
    unknown: list[str] = []
    for gid in ids:
        g = by_id.get(gid)
        if g is not None and g.used_mib is None:
            unknown.append(f"GPU {gid}: nvidia-smi does not say how much of its memory is in use (unknown); "
                           "used as free")
        if g is not None and g.used_mib is not None and g.used_mib > BUSY_MIB:
            total = f" of {g.total_mib / 1024:.1f}" if g.total_mib else ""
            skipped.append(f"GPU {gid}: {g.used_mib / 1024:.1f}{total} GiB already in use by another process")
        else:
            keep.append(gid)
    return Usable(tuple(keep), tuple(skipped), tuple(unknown))


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


def _smi(args: Sequence[str]) -> str | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        return subprocess.run([exe, *args], capture_output=True, text=True, timeout=20, check=True).stdout
    except (subprocess.SubprocessError, OSError):
        return None


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
        self.order = tuple(dict.fromkeys(gpus))  # each GPU once: two servers never share one
        self.free = list(self.order)
        self.cost = cost

    def take(self, tp: int) -> tuple[str, ...] | None:
        got = pick(self.free, tp, self.order, self.cost)
        if got is not None:
            self.free = [g for g in self.free if g not in got]
        return got

    def give(self, gpus: Sequence[str]) -> None:
        self.free.extend(g for g in gpus if g not in self.free)
