"""SGLang's failures as the doctor names them (logs/failures.py reads this table): each rule is a line SGLang prints
when a start-up (or a request) fails, with the engine place that raises it; the wrapper lines its parent processes
print around a failure printed elsewhere; the lines saying the server is up."""

from __future__ import annotations

from specbench.logs.failures import EngineFailures, failure_rule

FAILURES = EngineFailures(
    # besides the generic words (error, exception, memory, ...): the argument dump, readiness, the wrappers and the
    # log records of the rules below that name no error
    # (a record with no error word that the engine follows with an XxxError line, e.g. "capped to 0", is kept by it;
    # every word costs one bytes.find over the middle, so a few)
    anchors=("serverargs(", "load weight end", "fired up"),
    rules=(
        failure_rule("max_running_requests_zero", r"max_running_request is zero",
                     "sglang managers/tp_worker.py::TpModelWorker (assert max_running_requests > 0)",
                     ("max_running_request",)),
        failure_rule("mamba_state_cache_too_small", r"state cache is too small to serve any requests",
                     "sglang mem_cache/kv_cache_configurator.py::resolve_max_num_reqs (>= 0.5.13)", ("state cache",),
                     ignore_case=True),
        # the cap line with 0: `max_num_reqs <= 0` raises the RuntimeError above right after it
        # (mem_cache/kv_cache_configurator.py::KVCacheConfigurator.resolve_max_num_reqs@0.5.23)
        failure_rule("mamba_state_cache_too_small", r"max_running_requests is capped to 0 by the mamba state cache",
                     "sglang mem_cache/kv_cache_configurator.py::KVCacheConfigurator.resolve_max_num_reqs@0.5.23 "
                     "(max_mamba_cache_size // slots per request = 0)", ("capped to 0",), ignore_case=True,
                     own_line=True),
        failure_rule("mamba_state_cache_no_memory",
                     r"Not enough GPU memory for hybrid \(mamba/linear-attention\) state cache",
                     "sglang KVCacheConfigurator._handle_max_mamba_cache", ("not enough",), ignore_case=True),
        failure_rule("weights_leave_no_kv_memory", r"Loaded weights leave no GPU memory",
                     "sglang KVCacheConfigurator._profile_available_bytes (R <= 0)", ("loaded weights",),
                     ignore_case=True),
        failure_rule("kv_pool_empty", r"Not enough memory\. Please try to increase --mem-fraction-static",
                     "sglang MemoryPoolConfig.__post_init__ (max_total_num_tokens <= 0)", ("not enough",),
                     ignore_case=True),
        failure_rule("memory_pool_too_small", r"Memory pool size is too small",
                     "sglang tp_worker.py (max_req_len <= 0)", ("memory pool size",)),
        failure_rule("mamba_ping_pong", r"Not enough space for mamba ping pong idx",
                     "sglang mamba radix cache (extra_buffer ping-pong slots exhausted)", ("ping pong",),
                     ignore_case=True),
        failure_rule("context_length_exceeds_model",
                     r"(?:User-specified|specified) context_length \(?\d+\)? is greater than the derived",
                     "sglang configs/model_config.py (context_length above the model's max_position_embeddings)",
                     ("context_length",), ignore_case=True),
        failure_rule("cuda_graph_capture_failed", r"Capture cuda graph failed",
                     "sglang cuda_graph_runner.py::CudaGraphRunner.__init__ (the error above it is the cause)",
                     ("capture cuda graph failed",), ignore_case=True, own_line=True),
        failure_rule("negative_kv_size", r"is larger than the profiled value -\d+",
                     "sglang model_runner.py::profile_max_num_token (weights exceed mem_fraction_static x free)",
                     ("profiled value -",), own_line=True),
        failure_rule("empty_capture_bs", r"capture_bs=\[\]", "sglang cuda_graph_runner (no batch size left to capture)",
                     ("capture_bs",)),
        failure_rule("process_crashed", r"Rank \d+ scheduler died|Received sigquit from a child process",
                     "sglang engine.py (a scheduler process died: segfault, killed, or an exception printed "
                     "elsewhere)", ("scheduler died", "sigquit")),
    ),
    wrappers=(
        failure_rule("wrapper", r"Received sigquit from a child process|Scheduler hit an exception|"
                     r"Rank \d+ scheduler is dead|Rank \d+ scheduler died|Exception in run_tp_server",
                     "sglang managers/scheduler.py / engine.py", ("sigquit", "hit an exception", "scheduler is dead",
                                                                   "scheduler died", "run_tp_server")),
    ),
    ready=(
        failure_rule("ready", r"The server is fired up and ready to roll|Uvicorn running on|"
                     r"Application startup complete|^max_total_num_tokens=\d",
                     "sglang entrypoints/http_server.py / managers/scheduler.py",
                     ("ready", "max_total_num_tokens=", "uvicorn", "startup complete")),
    ),
)
