"""SGLang's pool sizing, per rule set: Mamba slots K, KV tokens N, max_running_requests. Pure functions.

Three eras, read from the wheels:
- `v0512` (<= 0.5.12.post1): model_executor/model_runner_kv_cache_mixin.py::handle_max_mamba_cache — the
  speculative scratch `p·mrr·D` is taken off the rest BEFORE the Mamba/KV split; K = floor(R'·r/(1+r)/p);
  `_resolve_max_num_reqs` = min(mrr//dp, estimated, K//ρ); 0 trips
  managers/tp_worker.py `assert self.max_running_requests > 0, "max_running_request is zero"`.
- `v0515` (0.5.13 .. 0.5.17, checked in 0.5.15.post1): joint solve K = Bm // (p·(1+D/ρ)); scratch
  p·min(M', K//ρ)·D; main state K·p; mrr = min(mrr//dp, N//2, K//ρ); <= 0 raises RuntimeError
  "Hybrid (mamba/linear-attention) state cache is too small to serve any requests."
- `v0523` (0.5.18 .. 0.5.23): mem_cache/kv_cache_configurator.py::_handle_max_mamba_cache — the same joint
  solve with the pools' +1 padding slot: K = (Bm − p(1+D) − e) // (p(1+D/ρ) + e); scratch p·(capped+1)·D;
  main state (K+1)·p.
"""

from __future__ import annotations

from dataclasses import dataclass

from specbench.contracts import GIB
from specbench.engines.sglang.rules import SglangRules


@dataclass(frozen=True)
class PoolInputs:
    rules: SglangRules       # the release line's rule row (rules.py)
    rest_gib: float          # R: free after weights minus the runtime slack B·(1−f)
    per_slot: int            # p, bytes of conv+ssm state per Mamba slot (0 for non-hybrid)
    draft_tokens: int        # D (0 without speculative decoding)
    ratio: int               # ρ, Mamba slots per running request
    mamba_full_memory_ratio: float
    mrr: int | None          # requested max_running_requests per attention-DP rank (spec default applied)
    max_mamba_cache_size: int | None
    disable_radix_cache: bool
    cell: int                # c, KV bytes per token slot (target + draft)
    page: int
    max_total_tokens: int | None
    context_len: int
    dp: int
    reserves_spec_state: bool


@dataclass(frozen=True)
class Pools:
    mamba_slots: int | None          # K
    kv_tokens: int                   # N (may be <= 0 when failing)
    max_running_requests: int        # final per DP rank
    scratch_reqs: int                # requests the spec scratch was reserved for
    scratch_gib: float
    mamba_main_gib: float
    kv_gib: float
    error: str | None                # the engine's own error text, or None
    error_kind: str | None
    mrr_capped_by_mamba: bool = False


def _mrr_v0512(i: PoolInputs, n: int, k: int | None) -> int:
    """model_runner_kv_cache_mixin.py::_resolve_max_num_reqs (0.5.12): user value is capped by `estimated` only."""
    est = max(min(int(n / i.context_len * 512), 4096), 2048)
    mrr = min(i.mrr // i.dp, est) if i.mrr is not None else min(est, n // 2)
    if k is not None:
        mrr = min(mrr, k // i.ratio)
    return mrr


def _mrr_v0515(i: PoolInputs, n: int, k: int | None) -> int:
    """_resolve_max_num_reqs (0.5.15) / KVCacheConfigurator.resolve_max_num_reqs (0.5.23)."""
    est = max(min(int(n / i.context_len * 512), 4096), 2048)
    mrr = min(max(1, i.mrr // i.dp) if i.rules.mrr_per_dp_at_least_one else i.mrr // i.dp, n // 2) \
        if i.mrr is not None \
        else min(est, n // 2)
    if k is not None:
        mrr = min(mrr, k // i.ratio)
    return mrr


@dataclass(frozen=True)
class _Mamba:
    """The Mamba side of the split: K, the speculative scratch, the main state, and R once both are taken off."""

    slots: int | None                # K (None for non-hybrid)
    scratch_reqs: int
    scratch_gib: float
    main_gib: float
    rest_gib: float                  # what is left for the KV pool


def _mamba_v0512(i: PoolInputs) -> _Mamba:
    """`v0512`: the scratch p·mrr·D comes off R first, then K = floor(R'·r/(1+r)/p) and the main state K·p."""
    p, D, r = i.per_slot, i.draft_tokens, i.mamba_full_memory_ratio
    R = i.rest_gib
    mrr_req = i.mrr
    scratch_reqs = 0
    scratch_gib = 0.0
    if i.reserves_spec_state and D:
        scratch_reqs = (mrr_req or 0) // i.dp
        scratch_gib = p * scratch_reqs * D / GIB
        R -= scratch_gib
    if i.max_mamba_cache_size is not None:
        k = i.max_mamba_cache_size // i.dp
    elif i.disable_radix_cache and mrr_req is not None:
        k = mrr_req // i.dp
    else:
        k = int((R * r / (1 + r) * GIB) // p)
    main_gib = k * p / GIB
    R -= main_gib
    return _Mamba(k, scratch_reqs, scratch_gib, main_gib, R)


def _joint_slots(i: PoolInputs, pad: int) -> tuple[int, int, float, float]:
    """`v0515` / `v0523`: K (given, one per request without the radix cache, else the joint solve
    K = Bm // (p·(1+D/ρ)), or with the +1 padding slot K = (Bm − p(1+D)) // (p(1+D/ρ))) and the scratch for
    min(M', K//ρ) requests; (K, scratch requests, scratch GiB, R after the scratch)."""
    p, D, rho, r = i.per_slot, i.draft_tokens, i.ratio, i.mamba_full_memory_ratio
    R = i.rest_gib
    mrr_req = i.mrr
    m_prime = max(1, (mrr_req or 0) // i.dp) if mrr_req is not None else None
    scratch_reqs = 0
    scratch_gib = 0.0
    if i.max_mamba_cache_size is not None:
        k = i.max_mamba_cache_size // i.dp
        if i.reserves_spec_state and D:
            scratch_reqs = min(m_prime or 1, k // rho)
            scratch_gib = p * (scratch_reqs + pad) * D / GIB
            R -= scratch_gib
    elif i.disable_radix_cache and mrr_req is not None:
        k = max(1, mrr_req // i.dp) if pad else mrr_req // i.dp
        if i.reserves_spec_state and D:
            scratch_reqs = k
            scratch_gib = p * (k + pad) * D / GIB
            R -= scratch_gib
    else:
        bm = R * r / (1 + r) * GIB
        if i.reserves_spec_state and D:
            if pad:
                k = int((bm - p * (1 + D)) // (p * (1 + D / rho)))
            else:
                k = int(bm // (p * (1 + D / rho)))
            scratch_reqs = min(m_prime or 1, k // rho)
            scratch_gib = p * (scratch_reqs + pad) * D / GIB
            R -= scratch_gib
        else:
            k = int((bm - p) // p) if pad else int(bm // p)
    return k, scratch_reqs, scratch_gib, R


def _mamba_joint(i: PoolInputs) -> _Mamba | Pools:
    """`v0515` / `v0523`: the joint solve, then the main state K·p (`v0523`: (K+1)·p); Pools with the engine's
    error when K <= 0."""
    p = i.per_slot
    pad = i.rules.mamba_main_extra_slot
    k, scratch_reqs, scratch_gib, R = _joint_slots(i, pad)
    if k <= 0:
        return Pools(k, 0, 0, scratch_reqs, scratch_gib, 0.0, 0.0,
                     f"RuntimeError: Not enough GPU memory for hybrid (mamba/linear-attention) state cache. "
                     f"Computed max_mamba_cache_size={k} (total_rest_memory={R:.2f} GB, "
                     f"mamba_cache_per_req={p / (1 << 20):.2f} MB). Try: (1) reduce --max-running-requests, "
                     f"(2) increase --mem-fraction-static, (3) reduce --speculative-num-draft-tokens, or "
                     f"(4) use GPUs with more memory.", "mamba_state_too_small")
    main_gib = (k + pad) * p / GIB
    R -= main_gib
    return _Mamba(k, scratch_reqs, scratch_gib, main_gib, R)


def _kv_tokens(i: PoolInputs, R: float) -> int:
    """N: what is left over c bytes per token, down to whole pages, capped by --max-total-tokens. A model with no
    attention layer (pure Mamba, `v0523`) holds no KV: N = --max-total-tokens, else the context length, in whole
    pages (model_executor/pool_configurator.py::DefaultPoolConfigurator.calculate_pool_sizes@0.5.23,
    `_zero_kv_max_tokens`)."""
    if i.cell <= 0:
        return (i.max_total_tokens or i.context_len) // i.page * i.page
    n = int((R * GIB) // i.cell) if R > 0 else int(R * GIB // i.cell)
    n = n // i.page * i.page
    if i.max_total_tokens is not None:
        n = min(n, i.max_total_tokens // i.page * i.page)
    return n


def _with_mrr(i: PoolInputs, mb: _Mamba, n: int, kv_gib: float) -> Pools:
    """max_running_requests from N and K, and the engine's error when it comes out <= 0."""
    k, rho = mb.slots, i.ratio

    def pools(mrr: int, error: str | None, kind: str | None, capped: bool = False) -> Pools:
        return Pools(k, n, mrr, mb.scratch_reqs, mb.scratch_gib, mb.main_gib, kv_gib, error, kind, capped)

    if i.rules.mamba_scratch_before_split:
        mrr = _mrr_v0512(i, n, k)
        if mrr <= 0:
            return pools(mrr, "AssertionError: max_running_request is zero", "max_running_request_zero",
                         capped=k is not None)
    else:
        mrr = _mrr_v0515(i, n, k)
        if k is not None and mrr <= 0:
            return pools(mrr, f"RuntimeError: Hybrid (mamba/linear-attention) state cache is too small to serve any "
                              f"requests. max_mamba_cache_size={k}, mamba_ratio={rho}, resulting max_num_reqs={mrr}. "
                              f"Try: (1) reduce --max-running-requests, (2) increase --mem-fraction-static, or "
                              f"(3) use GPUs with more memory.", "mamba_state_too_small")
        if mrr <= 0:
            return pools(mrr, "AssertionError: max_running_request is zero", "max_running_request_zero")
    capped = k is not None and mrr == k // i.ratio and (i.mrr is None or k // i.ratio < (i.mrr // i.dp))
    return pools(mrr, None, None, capped)


def size_pools(i: PoolInputs) -> Pools:
    """The steps in the engine's order: the Mamba state (hybrid models only, by era), the KV pool from what is left,
    then max_running_requests."""
    if i.per_slot > 0:
        mamba = _mamba_v0512(i) if i.rules.mamba_scratch_before_split else _mamba_joint(i)
        if isinstance(mamba, Pools):
            return mamba
    else:
        mamba = _Mamba(None, 0, 0.0, 0.0, i.rest_gib)
    n = _kv_tokens(i, mamba.rest_gib)
    kv_gib = max(n, 0) * i.cell / GIB
    if n <= 0:
        err = "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."
        return Pools(mamba.slots, n, 0, mamba.scratch_reqs, mamba.scratch_gib, mamba.main_gib, 0.0, err,
                     "not_enough_memory")
    return _with_mrr(i, mamba, n, kv_gib)
