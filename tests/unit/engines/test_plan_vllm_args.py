"""Parsing pasted vLLM launch commands (engines/vllm_args.py): the spellings vLLM's own parser accepts."""

import pytest

from specbench.engines.argv import split_command
from specbench.engines.vllm.args import parse_vllm_argv
from specbench.engines.vllm.values import human_readable_int, human_readable_int_or_auto
from specbench.errors import UserError


def parse(cmd: str):
    return parse_vllm_argv(split_command(cmd))


@pytest.mark.parametrize("text,value", [("1k", 1000), ("1K", 1024), ("25.6k", 25600), ("2G", 2 * 2**30),
                                        ("3g", 3 * 10**9), ("4096", 4096), ("1M", 2**20), ("1.5m", 1_500_000)])
def test_human_readable_int(text, value):
    assert human_readable_int(text) == value


def test_binary_suffix_rejects_decimals_and_auto_is_minus_one():
    with pytest.raises(UserError, match="Decimals are not allowed"):
        human_readable_int("1.5G")
    assert human_readable_int_or_auto("auto") == -1 and human_readable_int_or_auto("-1") == -1
    assert human_readable_int_or_auto("32k") == 32000


def test_vllm_serve_with_env_words_short_flags_and_prefix():
    a = parse("VLLM_CPU_KVCACHE_SPACE=4 VLLM_TARGET_DEVICE=cpu vllm serve Qwen/Qwen3-8B -tp 2 "
              "--max_model_len 32K --kv-cache-memory=8G --max-num-seqs=64 --enforce-eager --port 8000 "
              "--served-model-name x --no-enable-prefix-caching --some-new-flag 3")
    assert a.model == "Qwen/Qwen3-8B" and a.tp == 2 and a.max_model_len == 32 * 1024
    assert a.kv_cache_memory_bytes == 8 * 2**30 and a.max_num_seqs == 64 and a.enforce_eager
    assert a.enable_prefix_caching is False
    assert a.env_value("VLLM_CPU_KVCACHE_SPACE") == "4" and a.env_value("VLLM_TARGET_DEVICE") == "cpu"
    assert "--some-new-flag 3" in a.unknown and "--some-new-flag 3" not in a.ignored  # unknown, not "no effect"
    assert "--port 8000" in a.ignored
    assert not a.full_cudagraphs


def test_python_m_api_server_and_speculative_config():
    a = parse("python -m vllm.entrypoints.openai.api_server --model meta-llama/Llama-3.1-8B-Instruct "
              "--gpu-memory-utilization 0.85 --speculative-config "
              "'{\"method\": \"eagle3\", \"model\": \"specforge/llama3-8B-eagle3\", \"num_speculative_tokens\": 4}'")
    assert a.model == "meta-llama/Llama-3.1-8B-Instruct" and a.gpu_memory_utilization == 0.85
    assert a.speculative.kind == "eagle3" and a.speculative.model == "specforge/llama3-8B-eagle3"
    assert a.num_speculative_tokens == 4 and a.full_cudagraphs


def test_absolute_exe_path_and_roundtrip():
    a = parse("/opt/venv/bin/vllm serve /models/m --max-model-len 4096 -cc '{\"cudagraph_mode\": \"PIECEWISE\"}'")
    assert a.model == "/models/m" and a.max_model_len == 4096 and not a.full_cudagraphs
    b = parse_vllm_argv(a.to_argv())
    assert b.model == a.model and b.max_model_len == 4096


@pytest.mark.parametrize("cmd,msg", [
    ("vllm serve m --gpu-memory-utilization 1.5", "gpu-memory-utilization"),
    ("vllm serve m --max-num-seqs 0", "max-num-seqs"),
    ("vllm serve m -tp 0", "tensor-parallel-size"),
    ("vllm serve m --max-model-len", "needs a value"),
    ("vllm serve m --speculative-config '{bad'", "not valid JSON"),
    ("vllm serve m --speculative-config '{\"method\": \"ngram\"}'", "num_speculative_tokens"),
    ("vllm serve m --kv-cache-memory-bytes 1.5G", "Decimals"),
    ("vllm serve m --mamba-cache-mode sometimes", "mamba-cache-mode"),
])
def test_bad_values_are_one_line_user_errors(cmd, msg):
    with pytest.raises(UserError, match=msg):
        parse(cmd)


def test_one_non_default_args_reader() -> None:
    """engines/vllm/loglines.py::nondefault_args_text is what the log reader and the re-planner both use."""
    from specbench.engines.vllm import fromlog
    from specbench.engines.vllm import plan as vplan
    from specbench.engines.vllm.loglines import nondefault_args_text

    line = "(APIServer pid=1) INFO 05-12 10:00:00 [utils.py:233] non-default args: {'model': 'm', 'port': 8000}  "
    assert nondefault_args_text(line) == "{'model': 'm', 'port': 8000}"
    assert nondefault_args_text("non-default args: {'model': 'm', 'ma") == "{'model': 'm', 'ma"  # truncated dump
    assert nondefault_args_text("INFO nothing here") is None
    assert not hasattr(vplan, "_NON_DEFAULT") and not hasattr(fromlog, "_NON_DEFAULT")
    assert fromlog.argv_from_vllm_log(line) is not None


def test_a_switch_turned_off_in_the_dump_is_relaunched_off():
    """`'enable_prefix_caching': False` in the engine's non-default dump was a user's `--no-enable-prefix-caching`:
    the re-plan's argv keeps it off (it was dropped, and the re-plan had prefix caching on)."""
    from specbench.engines.vllm.args import parse_vllm_argv
    from specbench.engines.vllm.fromlog import argv_from_vllm_log

    line = ("(APIServer pid=1) INFO 12-01 08:57:35 [api_utils.py:286] non-default args: {'model_tag': 'Qwen/Qwen3-8B', "
            "'model': 'Qwen/Qwen3-8B', 'enable_prefix_caching': False, 'max_num_seqs': 16, 'enforce_eager': True}")
    argv = argv_from_vllm_log(line)
    assert argv is not None and "--no-enable-prefix-caching" in argv and "--enforce-eager" in argv
    a = parse_vllm_argv(argv[argv.index("serve") + 1:])
    assert a.enable_prefix_caching is False and a.max_num_seqs == 16 and a.enforce_eager is True
