"""vLLM flags that are read (they are real flags of the release) but whose memory effect the planner does not model,
each with what it changes in the engine and why it is left out; the plan lists the ones a command uses under
`not_modelled` (docs/contracts.md) instead of passing them silently as harmless. And the expert-parallel start
checks of config/parallel.py::ParallelConfig.__post_init__@0.32.0, in the engine's own words.
"""

from __future__ import annotations

from specbench.engines.vllm.args import VllmArgs
from specbench.engines.vllm.expert_parallel import ep_size

# flag (as the release's option names it) -> what it changes, why it is not modelled
NOT_MODELLED: dict[str, str] = {
    "--moe-backend": "picks the fused-MoE kernel (model_executor/layers/fused_moe/oracle): its workspace is part of "
                     "the activation peak vLLM profiles; the planner's activation estimate does not vary with it",
    "--all2all-backend": "the expert-parallel all-to-all buffers (DeepEP / pplx / NIXL): allocated outside the "
                         "profiled budget, not modelled",
    "--eplb-config": "EPLB's num_redundant_experts adds expert replicas on every EP rank; redundant experts are not "
                     "modelled (rank 0 is planned with the logical experts only)",
    "--enable-eplb": "EPLB's expert re-balancing buffers are not modelled",
    "--kv-offloading-size": "a CPU KV tier (OffloadingConnector): host memory, the GPU pool is sized as without it",
    "--kv-offloading-backend": "a CPU KV tier: host memory, the GPU pool is sized as without it",
    "--kv-transfer-config": "a KV connector (LMCache, NIXL...): its GPU buffers are not modelled",
}
# attention backends: the planner sizes pages with the CUDA backends' block rules; the ROCm backends' own block
# sizes and KV layouts (v1/attention/backends/rocm_*.py, mla/rocm_aiter_*.py@0.32.0) are not modelled
ROCM_PREFIX = "ROCM_"


def not_modelled(args: VllmArgs) -> list[str]:
    """One line per flag of the command whose memory effect is not modelled."""
    out: list[str] = []
    for word in args.ignored:
        flag, _, value = word.partition(" ")
        if flag in NOT_MODELLED:
            out.append(f"{word}: {NOT_MODELLED[flag]}")
        elif flag == "--attention-backend" and value.upper().startswith(ROCM_PREFIX):
            out.append(f"{word}: a ROCm attention backend; its block size and KV layout are not modelled (the "
                       "pages are sized as the CUDA backends size them)")
    env_backend = args.env_value("VLLM_ATTENTION_BACKEND") or ""
    if env_backend.upper().startswith(ROCM_PREFIX):
        out.append(f"VLLM_ATTENTION_BACKEND={env_backend}: a ROCm attention backend; not modelled")
    return out


def ep_start_failure(args: VllmArgs) -> str | None:
    """config/parallel.py::ParallelConfig.__post_init__@0.32.0: EPLB needs expert parallelism, and a TP / DP
    (x PCP) larger than one."""
    eplb = any(w == "--enable-eplb" or w.startswith("--enable-eplb ") for w in args.ignored)
    if not eplb:
        return None
    if not args.enable_expert_parallel:
        return "ValueError: enable_expert_parallel must be True to use EPLB."
    if args.tp * args.dp <= 1:
        return (f"ValueError: EPLB requires tensor, prefill-context, or data parallelism, but got TP={args.tp}, "
                f"PCP=1, DP={args.dp}.")
    return None


def ep_uneven_warning(args: VllmArgs, num_experts: int | None) -> str | None:
    """model_executor/layers/fused_moe/expert_map_manager.py::determine_expert_map@0.32.0 spreads experts that do not
    divide: the first `n % ep` ranks hold one more (rank 0, the one planned, among them)."""
    if not args.enable_expert_parallel or not num_experts:
        return None
    ep = ep_size(args.tp, args.dp)
    if ep <= 1 or num_experts % ep == 0:
        return None
    return (f"--enable-expert-parallel: {num_experts} experts over {ep} ranks do not divide; ranks 0..{num_experts % ep - 1} "
            f"hold {num_experts // ep + 1}, the rest {num_experts // ep} (rank 0 is planned)")
