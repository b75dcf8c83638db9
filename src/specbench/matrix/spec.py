"""The benchmark matrix: a TOML file -> a validated `MatrixSpec` -> server tuples and cells.

A matrix names one engine and its base launch command, server-side axes (one boot each), client-side
axes (cells on one boot), per-axis overrides and the axes that order phases. Every list value is an
axis; the cartesian product of the server axes gives the server tuples, the product of the client
axes gives the cells of each tuple. Ids are stable hashes of the settings, so a re-run of the same
matrix finds its finished cells in the store.

    name = "incident"
    engine = "sglang"                    # sglang | vllm | local (embedded vLLM CPU) | openai (any server)
    command = ["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3.6-27B"]
    host = "127.0.0.1"                   # the default; port = 30000 by default
    tokenizer = "path"                   # default: the model folder (or its HF-cache snapshot)
    api = "auto"                         # auto | chat | completions | generate (SGLang token ids)
    auto_fix = true                      # launch the planner's nearest working config instead of skipping
    phases = ["tp"]                      # run all tp=1 servers, then tp=4, ...
    [timeouts]  ready_s, request_s, stop_s, port_free_s, gpu_free_s
    [plan]      model_config, draft_config, gpu, gpu_mem_gib, engine_version, measured *_gib values
    [server]    tp, mem_fraction_static, max_running_requests, context_length (each a value or a list),
                flags = {"--any-flag" = value | [values]}, env = {VAR = "v" | ["v1", "v2"]}
    [[server.spec]]  label ("ddtree-b{ddtree_budget}"), algorithm, draft_model, num_draft_tokens,
                num_steps, eagle_topk, ddtree_budget (lists expand), flags, env
    [client]    concurrency, prompt_tokens, output_tokens, num_requests, request_rate ("inf" or
                req/s, Poisson), warmup_requests, slo_ttft_ms, slo_tpot_ms;
                dataset ("specbench-mini" (default) | "random" | a .json ShareGPT / .jsonl / .csv / .parquet file |
                "hf:NAME[:SPLIT]"), category, prompt_len / output_len ("fixed" | "uniform:LO,HI" |
                "normal:MEAN,STD" | "data"), multi_turn; temperature, top_p, top_k, seed, ignore_eos,
                stop (a list; a list of lists is an axis)
    [[override]] when = {tp = 1}  server = {max_running_requests = 4}  client = {concurrency = [1, 2]}

See examples/demo.toml and examples/qwen36-27b-dflash-ddtree.toml. Errors name the file, the line and
the key: pydantic gives the key path, `key_lines` finds its line in the TOML text.

The models are in `schema.py`, the loading and its file:line errors in `toml_load.py`, the expansion into server
tuples and cells in `expansion.py`; this module re-exports what their callers use.
"""

from __future__ import annotations

from specbench.matrix.expansion import Cell, ServerTuple, expand
from specbench.matrix.schema import MatrixSpec
from specbench.matrix.toml_load import key_lines, load_matrix, parse_matrix

# the names the runner, the commands and the tests read from here; the schema's other names (its tables, the axis
# lists) are imported from schema.py itself
__all__ = ["Cell", "MatrixSpec", "ServerTuple", "expand", "key_lines", "load_matrix", "parse_matrix"]
