"""One rule table per SGLang release line specbench read (issue 38): what changed between 0.5.12.post1, 0.5.15.post1
and 0.5.23, as named fields with the engine code each was read from. The planner's stages, the pools and the doctor
ask the table (`rules_for`, `rules_for_dump`); no module compares era strings, and a release is planned by the row
whose line it belongs to (0.5.13-0.5.17: 0.5.15's; 0.5.18 and newer: 0.5.23's).

Boundaries that are one version, not a line (the draft weights load before the pools from 0.5.14, `auto` is
`no_buffer` up to 0.5.13), stay version comparisons where they are used, each with its source.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

Version = tuple[int, int, int]


@dataclass(frozen=True)
class SglangRules:
    era: str                        # the plan contract's `era` (PlanResult.era): the row's name
    read: str                       # the release whose code the row was read from
    upto: Version                   # the newest release the row plans
    # budget (plan_stages.py::plan_budget)
    fixed_other_resident_gib: float | None  # taken between `Load weight end` and pool sizing: fixed (0.5.12), else
    #                                         None: 0.01 GiB + 0.9 KiB per context token (fitted, plan_stages.py)
    vlm_cache_reserve_gib: float    # kv_cache_configurator.py::mm_runtime_reservation_gb@0.5.23: SGLANG_VLM_CACHE_SIZE_MB
    #                                 (100 MB) kept back for multimodal models; none before 0.5.18
    no_memory_checked_first: bool   # 0.5.14+: R <= 0 is a ValueError naming the weights before the pools; 0.5.12
    #                                 fails inside the pools
    dflash_kv_weight_copy: bool     # the DFLASH worker copies its drafter's K/V projection weights before the target
    #                                 pool is sized (speculative/dflash_worker_v2.py::DFlashWorkerV2._init_fused_kv_helper
    #                                 @0.5.15.post1; plan_stages.py::dflash_kv_weight_copy_bytes); the 0.5.12 line loads
    #                                 the drafter after the target pool is sized (nothing to count); 0.5.23 not re-read:
    #                                 taken as 0.5.15's
    # speculative decoding with hybrid models (plan_slots.py::choose_mamba / _overlap_schedule)
    spec_refuses_no_buffer_radix: bool  # server_args.py@0.5.12.post1: speculative + no_buffer + radix cache refused
    dflash_without_overlap: bool    # server_args.py@0.5.12.post1: DFLASH always runs without the overlap scheduler
    eagle_overlap_needs_spec_v2: bool   # 0.5.12.post1: EAGLE's overlap only with SGLANG_ENABLE_SPEC_V2
    # the KV cell (plan_slots.py::kv_cell)
    dflash_draft_cell: Literal["layer_scaled", "own_dtype"]  # dflash_utils.py::scale_kv_cell_size_per_token_for_dflash
    #                                 (<= 0.5.17) | the drafter's own cell at --speculative-draft-kv-cache-dtype (0.5.18+)
    eagle_draft_cell: Literal["none", "ratio", "floor_share"]  # the EAGLE drafter's layers folded into c: not at all
    #                                 (0.5.12), int(c·(1 + Ld/L)) (pool_configurator.py@0.5.15), floor(c·Ld/L) (0.5.23)
    sizes_kv_less_models: bool      # pure recurrent models (no attention layer) sized (0.5.18+: _zero_kv_max_tokens)
    # the pools (pools.py)
    mamba_scratch_before_split: bool  # 0.5.12: handle_max_mamba_cache takes the speculative scratch p·mrr·D before the
    #                                 Mamba/KV split and resolves max_running_requests its own way; 0.5.15+: joint solve
    mamba_main_extra_slot: int      # 0.5.23: the main state holds K+1 slots' worth ((K+1)·p); 0 before
    mrr_per_dp_at_least_one: bool   # 0.5.23 resolve_max_num_reqs: max(1, mrr // dp)
    # allocations (plan_alloc.py)
    conv_window_dedup: bool         # 0.5.14+ (CUDA, topk <= 1): the intermediate conv window deduplicated


V0512 = SglangRules(
    era="v0512", read="0.5.12.post1", upto=(0, 5, 12), fixed_other_resident_gib=0.05, vlm_cache_reserve_gib=0.0,
    no_memory_checked_first=False, dflash_kv_weight_copy=False, spec_refuses_no_buffer_radix=True,
    dflash_without_overlap=True, eagle_overlap_needs_spec_v2=True, dflash_draft_cell="layer_scaled",
    eagle_draft_cell="none", sizes_kv_less_models=False, mamba_scratch_before_split=True, mamba_main_extra_slot=0,
    mrr_per_dp_at_least_one=False, conv_window_dedup=False)
V0515 = SglangRules(
    era="v0515", read="0.5.15.post1", upto=(0, 5, 17), fixed_other_resident_gib=None, vlm_cache_reserve_gib=0.0,
    no_memory_checked_first=True, dflash_kv_weight_copy=True, spec_refuses_no_buffer_radix=False,
    dflash_without_overlap=False, eagle_overlap_needs_spec_v2=False, dflash_draft_cell="layer_scaled",
    eagle_draft_cell="ratio", sizes_kv_less_models=False, mamba_scratch_before_split=False, mamba_main_extra_slot=0,
    mrr_per_dp_at_least_one=False, conv_window_dedup=True)
V0523 = SglangRules(
    era="v0523", read="0.5.23", upto=(99, 0, 0), fixed_other_resident_gib=None, vlm_cache_reserve_gib=100 / 1024,
    no_memory_checked_first=True, dflash_kv_weight_copy=True, spec_refuses_no_buffer_radix=False,
    dflash_without_overlap=False, eagle_overlap_needs_spec_v2=False, dflash_draft_cell="own_dtype",
    eagle_draft_cell="floor_share", sizes_kv_less_models=True, mamba_scratch_before_split=False,
    mamba_main_extra_slot=1, mrr_per_dp_at_least_one=True, conv_window_dedup=True)
RULES = (V0512, V0515, V0523)


def rules_for(version: Version) -> SglangRules:
    """The row that plans `version`: the first whose line reaches it."""
    return next(r for r in RULES if tuple(version) <= r.upto)


def rules_for_dump(args: Mapping[str, object]) -> SglangRules | None:
    """The row of a boot from its argument dump's names alone (no printed version): `mamba_scheduler_strategy` is
    the field's name up to 0.5.13 (renamed `mamba_radix_cache_strategy` in 0.5.14: the dumps of
    tests/data/sglang-0.5.12.post1/ and tests/data/sglang-0.5.15.post1/), so the dump is 0.5.12's row; the new name is
    0.5.15's or later; None when neither appears. 0.5.13 cannot be told apart by names and is taken as the older row,
    as the planner's `infer_version` does."""
    if "mamba_scheduler_strategy" in args:
        return V0512
    if "mamba_radix_cache_strategy" in args:
        return V0515
    return None
