"""The last sizing stages of `plan_sglang`: the pools (`pools.py::size_pools`) and the allocation sizes the engine
logs for them (memory_pool.py)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from specbench.contracts import GIB
from specbench.engines.sglang.args import SglangArgs
from specbench.engines.sglang.formulas import dtype_bytes, kv_heads_per_rank
from specbench.engines.sglang.plan_slots import KvCell, Mamba
from specbench.engines.sglang.plan_stages import DFLASH_FAMILY, Budget, Setup
from specbench.engines.sglang.pools import PoolInputs, Pools, size_pools
from specbench.specs.model_types import ModelSpec


# ------------------------------------------------------------------------------------------------ 6. pools
@dataclass(frozen=True)
class PoolPlan:
    pools: Pools
    requested_mrr: int | None    # max_running_requests as asked (speculative default applied)
    full_memory_ratio: float     # mamba_full_memory_ratio
    reserves_spec_state: bool
    notes: tuple[str, ...]


def plan_pools(args: SglangArgs, m: ModelSpec, s: Setup, b: Budget, mamba: Mamba, cell: KvCell) -> PoolPlan:
    spec = s.spec
    notes: list[str] = []
    # requested max_running_requests (speculative handlers default it to 48)
    mrr_req = args.max_running_requests
    if mrr_req is None and spec.algorithm in ("EAGLE", "EAGLE3", "STANDALONE", "DFLASH", "DDTREE", "NGRAM",
                                              "FROZEN_KV_MTP"):
        mrr_req = 48
        notes.append("max_running_requests defaults to 48 for speculative decoding (speculative_hook.py)")
    reserves = bool(spec.algorithm) and spec.algorithm != "NGRAM" and not (
        args.enable_linear_replayssm_spec and m.gdn is not None)
    r = args.mamba_full_memory_ratio if args.mamba_full_memory_ratio is not None else 0.9
    st = mamba.state
    pools = size_pools(PoolInputs(
        rules=s.rules, rest_gib=b.rest_gib, per_slot=st.per_slot if st else 0, draft_tokens=spec.num_draft_tokens,
        ratio=mamba.ratio or 1, mamba_full_memory_ratio=r, mrr=mrr_req, max_mamba_cache_size=args.max_mamba_cache_size,
        disable_radix_cache=args.disable_radix_cache, cell=cell.total, page=args.page_size or 1,
        max_total_tokens=args.max_total_tokens, context_len=s.context_len,
        dp=args.dp if args.enable_dp_attention else 1, reserves_spec_state=reserves))
    return PoolPlan(pools, mrr_req, r, reserves, tuple(notes))


# ------------------------------------------------------------------------------------------------ 7. allocations
@dataclass(frozen=True)
class Sizes:
    """The allocation sizes the engine logs (GiB): KV K/V (target, draft) and the Mamba state tensors."""
    kv_tokens: int               # n = max(N, 0)
    k_gib: float
    v_gib: float
    draft_k_gib: float | None
    conv_gib: float | None = None
    ssm_gib: float | None = None
    intermediate_ssm_gib: float | None = None
    intermediate_conv_gib: float | None = None
    swa_kv_tokens: int | None = None   # hybrid SWA pool: the SWA layers' own tokens and K/V (k_gib/v_gib: full layers)
    swa_k_gib: float | None = None
    swa_v_gib: float | None = None


def allocation_sizes(args: SglangArgs, m: ModelSpec, draft: ModelSpec | None, s: Setup, cell: KvCell,
                     mamba: Mamba, pp: PoolPlan) -> Sizes:
    n = max(pp.pools.kv_tokens, 0)
    k_size, v_size, dk = _kv_sizes(args, m, draft, s, cell, n)
    conv, ssm, issm, iconv = _mamba_sizes(s, mamba, pp)
    sizes = Sizes(n, k_size, v_size, dk, conv, ssm, issm, iconv)
    return _swa_split(args, m, s, cell, sizes) if cell.swa_ratio is not None and n > 0 else sizes


def swa_tokens(full: int, ratio: float | None, page: int) -> int | None:
    """pool_configurator.py::HybridSWAPoolConfigurator._solve_pool_sizes@0.5.15.post1: swa = page-aligned
    int(full x ratio)."""
    if ratio is None or full <= 0:
        return None
    return int(full * ratio) // page * page


def _swa_split(args: SglangArgs, m: ModelSpec, s: Setup, cell: KvCell, sz: Sizes) -> Sizes:
    """mem_cache/swa_memory_pool.py::SWAKVPool.__init__@0.5.15.post1: two MHA pools, the SWA layers' of swa tokens
    and the full layers' of full tokens, each (tokens + page) slots a layer (the gpt-oss boot logs 19.85 / 24.81 GB:
    tests/data/sglang-0.5.15.post1/gpt_oss_20b_mrr8.log)."""
    page, n = args.page_size or 1, sz.kv_tokens
    ns = len(m.sliding_layers)
    nf = cell.layers - ns
    per_layer = kv_heads_per_rank(m, s.attn_tp) * dtype_bytes(cell.dtype) / GIB
    swa_n = swa_tokens(n, cell.swa_ratio, page) or 0
    k_full, v_full = nf * (n + page) * per_layer * m.head_dim, nf * (n + page) * per_layer * m.v_head_dim
    k_swa, v_swa = ns * (swa_n + page) * per_layer * m.head_dim, ns * (swa_n + page) * per_layer * m.v_head_dim
    return replace(sz, k_gib=k_full, v_gib=v_full, swa_kv_tokens=swa_n, swa_k_gib=k_swa, swa_v_gib=v_swa)


def _kv_sizes(args: SglangArgs, m: ModelSpec, draft: ModelSpec | None, s: Setup, cell: KvCell,
              n: int) -> tuple[float, float, float | None]:
    """memory_pool.py: K/V buffers of (n + page) slots per layer; the draft's own pool when it has one."""
    page, L, kvd, attn_tp = args.page_size or 1, cell.layers, cell.dtype, s.attn_tp
    nk = kv_heads_per_rank(m, attn_tp)
    isz = dtype_bytes(kvd)
    if m.mla is not None:
        k_size = L * (n + page) * (m.mla.kv_lora_rank + m.mla.qk_rope_head_dim) * isz / GIB
        v_size = 0.0
    else:
        k_size = L * (n + page) * nk * m.head_dim * isz / GIB
        v_size = L * (n + page) * nk * (m.v_head_dim if m.gdn is None else m.head_dim) * isz / GIB
    dk = None
    if cell.draft and draft is not None and s.spec.algorithm in DFLASH_FAMILY:
        dn = max(1, draft.num_kv_heads // attn_tp)
        dk = draft.num_layers * (n + page) * dn * draft.head_dim * dtype_bytes(args.speculative_draft_kv_cache_dtype
                                                                                   or kvd) / GIB
    elif cell.draft:
        dk = s.spec.draft_layers * (n + page) * nk * m.head_dim * isz / GIB
    return k_size, v_size, dk


def _mamba_sizes(s: Setup, mamba: Mamba, pp: PoolPlan) -> tuple[float | None, ...]:
    """memory_pool.py::MambaPool: conv/ssm state for K+1 slots, intermediate spec state for S+1 requests."""
    st, spec = mamba.state, s.spec
    K = pp.pools.mamba_slots
    S = max(pp.pools.max_running_requests, 0)
    if st is None or K is None or K <= 0:
        return None, None, None, None
    conv_g = st.layers * (K + 1) * st.conv_elems * st.conv_bytes / GIB
    ssm_g = st.layers * (K + 1) * st.ssm_elems * st.ssm_bytes / GIB
    ism_g = icw_g = None
    if spec.algorithm and pp.reserves_spec_state:
        D = spec.num_draft_tokens
        ism_g = st.layers * (S + 1) * D * st.ssm_elems * st.ssm_bytes / GIB
        if not s.rules.conv_window_dedup or spec.topk > 1:
            icw_g = st.layers * (S + 1) * D * st.conv_elems * st.conv_bytes / GIB
        else:  # deduplicated sliding window (0.5.14+, CUDA, topk <= 1)
            icw_g = st.layers * (S + 1) * st.conv_dim_rank * (D + st.conv_kernel - 2) * st.conv_bytes / GIB
    return conv_g, ssm_g, ism_g, icw_g
