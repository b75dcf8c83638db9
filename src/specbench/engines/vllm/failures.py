"""vLLM's failures as the doctor names them (logs/failures.py reads this table): each rule is a line vLLM prints
when a start-up fails, with the engine place that raises it; the wrapper lines of its engine core and workers around
a failure printed elsewhere; the lines saying the server is up."""

from __future__ import annotations

from specbench.logs.failures import EngineFailures, failure_rule

FAILURES = EngineFailures(
    # besides the generic words: the argument dumps, weights loaded, readiness, and the records with no error word
    # (the negative KV records hold "memory", "# GPU blocks: 0" is followed by its ValueError, the unsupported-model
    # lines are ValueErrors: the generic words keep them; "took" is the weights lines and the ready "init engine")
    anchors=("non-default args", "llm engine", "took"),
    rules=(
        failure_rule("vllm_mamba_blocks", r"max_num_seqs \(\d+\) exceeds available Mamba cache blocks",
                     "vllm config/compilation.py::resolve_cudagraph_mode_and_sizes (>= 0.20)", ("mamba cache blocks",)),
        failure_rule("vllm_no_kv_memory", r"No available memory for the cache blocks",
                     "vllm kv_cache_utils.py::get_kv_cache_configs", ("no available memory",)),
        # the profile left nothing (or less than nothing) for the KV cache: V0 clamps the blocks to 0 and raises
        # "No available memory for the cache blocks" next (vllm/worker/worker.py::Worker.determine_num_available_blocks
        # and raise_if_cache_size_invalid@0.6.x); V1 raises it when available_memory <= 0
        # (vllm/v1/core/kv_cache_utils.py::_check_enough_kv_cache_memory@0.32.0)
        failure_rule("vllm_no_kv_memory", r"the rest of the memory reserved for KV Cache is -\d|"
                     r"Available KV cache memory: -\d|# (?:GPU|cuda|CUDA) blocks: 0\b|KV cache size: 0 tokens",
                     "vllm worker/worker.py::Worker.determine_num_available_blocks (V0) / "
                     "v1/worker/gpu_worker.py::Worker.determine_available_memory (V1): KV memory <= 0",
                     ("reserved for kv cache is -", "kv cache memory: -", "blocks: 0", "size: 0 tokens"),
                     own_line=True),
        failure_rule("vllm_max_model_len", r"To serve at least one request with the models?'s max seq len|"
                     r"is larger than the maximum number of tokens that can be stored in KV cache",
                     "vllm kv_cache_utils.py::check_enough_kv_cache_memory", ("max seq len", "maximum number of tokens")),
        failure_rule("cuda_oom_sampler_warmup", r"out of memory occurred when warming up sampler",
                     "vllm gpu_model_runner.py::_dummy_sampler_run (max_num_seqs dummy requests)",
                     ("warming up sampler",), ignore_case=True, own_line=True),
        failure_rule("vllm_free_memory_below_utilization",
                     r"Free memory on device \S+ \([\d./ ]+GiB\) on startup is less than desired GPU memory utilization",
                     "vllm v1/worker/utils.py::request_memory (free at start < total x gpu_memory_utilization)",
                     ("free memory on device",), own_line=True),
        failure_rule("vllm_hybrid_kv_unify_failed", r"Hybrid KV cache manager is disabled but failed to convert",
                     "vllm v1/core/kv_cache_utils.py::unify_hybrid_kv_cache_specs", ("failed to convert",),
                     own_line=True),
        failure_rule("unsupported_architecture", r"has no vLLM implementation|Transformers does not recognize this "
                     r"architecture|Model architectures? \[.*\] (?:are|is) not supported",
                     "vllm model_executor/model_loader/utils.py / transformers AutoConfig (model type unknown to this "
                     "build)", ("vllm implementation", "recognize this architecture", "not supported"), own_line=True),
        failure_rule("tp_not_divisible", r"must be divisible by tensor parallel size",
                     "vllm config/model.py::verify_with_parallel_config", ("divisible by tensor parallel",),
                     own_line=True),
    ),
    frames=(
        failure_rule("kv_cache_page_size_mismatch", r"unify_kv_cache_spec_page_size|page_size_bytes == max_page_size",
                     "vllm v1/core/kv_cache_utils.py::unify_kv_cache_spec_page_size", ()),
    ),
    wrappers=(
        failure_rule("wrapper", r"EngineDeadError|Engine core initialization failed|WorkerProc initialization failed|"
                     r"EngineCore failed to start|WorkerProc hit an exception|Worker proc \S+ died unexpectedly",
                     "vllm v1/engine/core.py / v1/executor/multiproc_executor.py",
                     ("enginedead", "initialization failed", "failed to start", "hit an exception",
                      "died unexpectedly")),
    ),
    ready=(
        failure_rule("ready", r"Starting vLLM API server|init engine \(profile, create kv cache, warmup model\) took|"
                     r"Uvicorn running on|Application startup complete",
                     "vllm entrypoints/openai/api_server.py / v1/engine/core.py",
                     ("vllm api server", "init engine", "uvicorn", "startup complete")),
    ),
)
