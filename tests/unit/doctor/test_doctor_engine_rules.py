"""Issue 27: the rules each engine owns, on lines in the engines' own formats (the format strings are cited; the
numbers are those of the public reports in tests/data/doctor_corpus/issue27 where one exists)."""

from __future__ import annotations

from specbench.doctor.doctor import diagnose_text

# mem_cache/kv_cache_configurator.py::KVCacheConfigurator.resolve_max_num_reqs@0.5.23 (logger.warning format)
CAPPED_TO_ZERO = ("[2026-09-01 10:00:00 TP0] max_running_requests is capped to 0 by the mamba state cache "
                  "(max_mamba_cache_size=3, 5 state slots per request). To raise it: increase "
                  "--mamba-full-memory-ratio or --max-mamba-cache-size, or halve the state size with "
                  "--mamba-ssm-dtype bfloat16.\n")
# vllm/worker/worker.py::Worker.determine_num_available_blocks (V0 memory profiling) and executor_base.py
V0_NEGATIVE = (
    "INFO 08-12 22:12:16 [worker.py:295] the current vLLM instance can use total_gpu_memory (29.95GiB) x "
    "gpu_memory_utilization (0.40) = 11.98GiB\n"
    "INFO 08-12 22:12:16 [worker.py:295] model weights take 6.59GiB; non_torch_memory takes 8.29GiB; PyTorch "
    "activation peak memory takes 4.93GiB; the rest of the memory reserved for KV Cache is -7.83GiB.\n"
    "INFO 08-12 22:12:16 [executor_base.py:113] # cuda blocks: 0, # CPU blocks: 0\n"
    "INFO 08-12 22:12:16 [executor_base.py:118] Maximum concurrency for 4096 tokens per request: 0.00x\n")


def test_capped_to_zero_is_a_failure_with_the_slots_one_request_needs():
    d = diagnose_text(CAPPED_TO_ZERO)
    j = d.to_json()
    assert j["status"] == "failed" and j["failure"]["kind"] == "mamba_state_cache_too_small"
    assert not j["capped"] and not any(w["cap"] for w in j["warnings"])
    assert j["fixes"][0]["change"] == {"--max-mamba-cache-size": 5}
    assert "None" not in d.explanation


def test_v0_negative_kv_memory_is_a_failure_not_a_start():
    d = diagnose_text(V0_NEGATIVE)
    j = d.to_json()
    assert j["status"] == "failed" and j["failure"]["kind"] == "vllm_no_kv_memory", j["explanation"]
    assert j["facts"]["available_kv_gib"] == -7.83 and j["facts"]["gpu_blocks"] == 0
    every_fix = j["fixes"] + [fx for w in j["warnings"] for fx in w["fixes"]]
    assert "--max-model-len 0" not in d.explanation and all(
        fx["change"].get("--max-model-len") != 0 for fx in every_fix)
    fx = j["fixes"][0]
    # 0.40 + (1 + 7.83) / 29.95 = 0.695 -> 0.70: the budget that leaves 1 GiB for the KV cache over this profile
    assert fx["change"] == {"--gpu-memory-utilization": 0.7}


# vllm/v1/core/kv_cache_utils.py::check_enough_kv_cache_memory@0.8 (its "models's" spelling, no estimate yet) and
# vllm/v1/worker/gpu_worker.py::Worker.determine_available_memory (the budget line) before the check's ValueError
V1_OLD_LEN = ("ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache "
              "is needed, which is larger than the available KV cache memory (9.25 GiB). Try increasing "
              "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.\n")
V1_NEGATIVE = ("(EngineCore_DP0 pid=1) INFO 05-01 10:00:00 [gpu_worker.py:240] Available KV cache memory: -2.41 GiB\n"
               "(EngineCore_DP0 pid=1) ERROR 05-01 10:00:00 [core.py:700] ValueError: No available memory for the "
               "cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.\n")


def test_v1_max_seq_len_without_the_engines_estimate_scales_the_length_to_the_memory():
    j = diagnose_text(V1_OLD_LEN).to_json()
    assert j["failure"]["kind"] == "vllm_max_model_len"
    fit = j["fixes"][0]["change"]["--max-model-len"]
    assert fit % 16 == 0 and fit * 16.00 / 131072 <= 9.25  # one request of `fit` tokens needs at most what there is


def test_v1_negative_available_kv_memory_is_a_failure_with_a_fix():
    j = diagnose_text(V1_NEGATIVE).to_json()
    assert j["status"] == "failed" and j["failure"]["kind"] == "vllm_no_kv_memory"
    assert j["facts"]["available_kv_gib"] == -2.41
    assert "--gpu-memory-utilization" in j["fixes"][0]["change"] and "3.41 GiB" in j["fixes"][0]["why"]
