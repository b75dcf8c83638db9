"""The last stage of `plan_sglang`: what a plan that starts warns about, and the lines the engine would print."""

from __future__ import annotations

from specbench.engines.sglang.args import SglangArgs
from specbench.engines.sglang.plan_alloc import PoolPlan, Sizes
from specbench.engines.sglang.plan_slots import Mamba
from specbench.engines.sglang.plan_stages import Budget, Measured, Setup, Weights


def verdict_warnings(args: SglangArgs, s: Setup, w: Weights, b: Budget, mamba: Mamba, pp: PoolPlan, sizes: Sizes,
                     measured: Measured) -> tuple[str, ...]:
    """Warnings of a plan that starts (capacity below the request, thin runtime slack, a suspicious checkpoint)."""
    pools, ctx, n = pp.pools, s.context_len, sizes.kv_tokens
    ok = pools.error is None
    warnings: list[str] = []
    if ok:
        if n < ctx:
            warnings.append(f"KV pool holds {n} tokens, fewer than --context-length {ctx}: one request can use at most "
                            f"{min(ctx - 1, n - 1)} tokens")
        if pools.mrr_capped_by_mamba:
            warnings.append(f"max_running_requests is capped to {pools.max_running_requests} by the mamba state cache "
                            f"(max_mamba_cache_size={pools.mamba_slots}, {mamba.ratio} state slots per request)")
        elif pp.requested_mrr is not None and pools.max_running_requests < pp.requested_mrr:
            warnings.append(f"max_running_requests was reduced from the requested {pp.requested_mrr} to "
                            f"{pools.max_running_requests} by the KV cache capacity")
    graph_gib = s.defaults.graph_reserve_mb / 1024
    # the engine's own estimate of what runs outside the static pools (memory_hook.py / server_args.py
    # _handle_gpu_memory_settings): 512 MB + 1.5 MB per chunked-prefill token + CUDA-graph terms, before its
    # 10 GiB floor; a slack below it is where graph capture and prefill activations run out of memory
    runtime_gib = (512 + 1.5 * max(s.defaults.chunked_prefill_size, 2048)) / 1024 + graph_gib
    if ok and b.slack_gib < runtime_gib:
        warnings.append(f"runtime slack B·(1−f) = {b.slack_gib:.2f} GiB is below the engine's own estimate for CUDA "
                        f"graphs and activations (~{runtime_gib:.2f} GiB): CUDA graph capture may run out of memory")
    if measured.weights_gib is None and w.model.quant.method is None and "nvfp4" in (args.model_path or "").lower():
        warnings.append("the model path says NVFP4 but the config has no quantization_config: weights are planned "
                        "as unquantized")
    return tuple(warnings)


_TORCH_DTYPES = {"bfloat16": "torch.bfloat16", "float16": "torch.float16", "fp8_e4m3": "torch.float8_e4m3fn",
                 "fp8_e5m2": "torch.float8_e5m2"}


def log_lines(s: Setup, w: Weights, b: Budget, kv_dtype: str, pp: PoolPlan, sz: Sizes) -> tuple[str, ...]:
    """The lines the engine would print (memory_pool.py / model_runner.py f-strings)."""
    B, W, Wd, pools, n, K = b.before_load_gib, w.gib, w.draft_gib, pp.pools, sz.kv_tokens, pp.pools.mamba_slots
    lines = [f"Load weight begin. avail mem={B:.2f} GB", f"Load weight end. ... avail mem={B - W:.2f} GB, mem usage={W:.2f} GB."]
    if Wd:
        lines.append(f"[draft] Load weight end. ... mem usage={Wd:.2f} GB.")
    if K is not None and sz.conv_gib is not None:
        line = (f"Mamba Cache is allocated. max_mamba_cache_size: {K}, conv_state size: {sz.conv_gib:.2f}GB, "
                f"ssm_state size: {sz.ssm_gib:.2f}GB ")
        if sz.intermediate_ssm_gib is not None:
            line += (f"intermediate_ssm_state_cache size: {sz.intermediate_ssm_gib:.2f}GB "
                     f"intermediate_conv_window_cache size: {sz.intermediate_conv_gib:.2f}GB ")
        lines.append(line)
    torch_dt = _TORCH_DTYPES.get(kv_dtype, kv_dtype)
    if n > 0 and sz.swa_kv_tokens is not None:  # SWAKVPool: the SWA layers' pool first, then the full layers'
        lines.append(f"Use sliding window memory pool. full_layer_tokens={n}, swa_layer_tokens={sz.swa_kv_tokens}")
        lines.append(f"KV Cache is allocated. dtype: {torch_dt}, #tokens: {sz.swa_kv_tokens}, "
                     f"K size: {sz.swa_k_gib:.2f} GB, V size: {sz.swa_v_gib:.2f} GB")
    if n > 0:
        lines.append(f"KV Cache is allocated. dtype: {torch_dt}, #tokens: {n}, K size: {sz.k_gib:.2f} GB, "
                     f"V size: {sz.v_gib:.2f} GB")
        if sz.draft_k_gib is not None:
            dk = sz.draft_k_gib
            lines.append(f"KV Cache is allocated. dtype: {torch_dt}, #tokens: {n}, K size: {dk:.2f} GB, V size: {dk:.2f} GB   (draft)")
        if pools.error is None:
            lines.append(f"max_total_num_tokens={n}, chunked_prefill_size={s.defaults.chunked_prefill_size}, "
                         f"max_prefill_tokens=16384, max_running_requests={pools.max_running_requests}, "
                         f"context_len={s.context_len}")
    if pools.error:
        lines.append(pools.error)
    return tuple(lines)
