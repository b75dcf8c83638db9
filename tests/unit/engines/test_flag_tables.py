"""Launch commands read as the engine's own parser reads them: the release's whole flag list (written from the
engine's code by tools/engine/*_cli_flags.py), argparse's unique-prefix rule, unknown flags reported as unknown."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from specbench.engines.argv import split_command
from specbench.engines.sglang.args import parse_sglang_argv
from specbench.engines.sglang.knobs import KNOBS, release_flags
from specbench.engines.vllm.args import parse_vllm_argv
from specbench.errors import FlagError

SGL = "python -m sglang.launch_server --model-path Qwen/Qwen3-8B "


def sgl(extra: str, release: str | None = None):
    return parse_sglang_argv(split_command(SGL + extra), release)


def test_abbreviations_the_engine_accepts_are_honoured() -> None:
    a = sgl("--mem-frac 0.8 --tp 2 --max-running 16 --speculative-algo EAGLE3")
    assert (a.mem_fraction_static, a.tp, a.max_running_requests, a.speculative_algorithm) == (0.8, 2, 16, "EAGLE3")
    assert not a.unknown and not a.ignored


def test_unknown_flags_are_unknown_not_harmless() -> None:
    a = sgl("--host 0.0.0.0 --no-such-flag 3 --enable-metrics")
    assert "--host 0.0.0.0" in a.ignored and "--enable-metrics" in a.ignored  # real flags without memory effect
    assert a.unknown == ("--no-such-flag 3",)


def test_an_ambiguous_prefix_is_the_engines_own_error() -> None:
    with pytest.raises(FlagError, match="ambiguous option: --pp could match"):
        sgl("--pp 2", "0.5.15")


def test_the_flag_list_follows_the_release() -> None:
    assert release_flags("0.5.12").release == "0.5.12" and release_flags("0.5.14").release == "0.5.12"
    assert release_flags("0.5.23").release == "0.5.15" and release_flags(None).release == "0.5.15"
    # a flag that 0.5.15 added is unknown to 0.5.12
    assert "--cuda-graph-backend-decode" in release_flags("0.5.15").kinds
    assert "--cuda-graph-backend-decode" not in release_flags("0.5.12").kinds


def test_every_upstream_knob_spelling_is_a_real_flag_of_some_release() -> None:
    known = set(release_flags("0.5.12").kinds) | set(release_flags("0.5.15").kinds)
    for knob in KNOBS:
        if knob.fork_only:
            continue
        resolvable = [f for f in knob.flags if f in known or any(k.startswith(f) for k in known)]
        assert knob.flag in known, knob.flag
        assert resolvable, knob.flags


def test_vllm_unknown_and_underscore_spellings() -> None:
    a = parse_vllm_argv(split_command("vllm serve Qwen/Qwen3-8B --max_num_seqs 8 --seed 1 --made-up 2"))
    assert a.max_num_seqs == 8 and "--seed 1" in a.ignored and a.unknown == ("--made-up 2",)


def test_plan_json_names_the_unknown_flags_through_the_cli() -> None:
    out = subprocess.run([sys.executable, "-m", "specbench", "plan", "--json", "--no-fixes", "--",
                          *split_command(SGL + "--tp 1 --frobnicate 7")], capture_output=True, text=True, check=True)
    r = json.loads(out.stdout)
    assert r["unknown_flags"] == ["--frobnicate 7"]
    assert any("unknown to SGLang" in w and "--frobnicate 7" in w for w in r["warnings"])


# ----------------------------------------------------------------------------- vLLM: engines/vllm/knobs.py

VLLM = "vllm serve Qwen/Qwen3-8B "


def vll(extra: str, release: str | None = None):
    return parse_vllm_argv(split_command(VLLM + extra), release)


def test_vllm_abbreviations_the_engine_accepts_are_honoured() -> None:
    a = vll("--gpu-memory 0.8 --max-model 4096 --kv-cache-memory=2G --enable-prefix --no-enable-chunked")
    assert (a.gpu_memory_utilization, a.max_model_len, a.kv_cache_memory_bytes) == (0.8, 4096, 2 * 2**30)
    assert a.enable_prefix_caching is True and a.enable_chunked_prefill is False
    assert not a.unknown and not a.ignored


def test_vllm_an_ambiguous_prefix_is_the_engines_own_error() -> None:
    # 0.32.0 has --max-num-seqs and --max-num-scheduled-tokens: argparse stops with "ambiguous option"
    with pytest.raises(FlagError, match="ambiguous option: --max-num-s could match --max-num-scheduled-tokens, "
                                        "--max-num-seqs"):
        vll("--max-num-s 8")


def test_vllm_flags_of_the_release_without_memory_effect_are_ignored_others_unknown() -> None:
    a = vll("--trust_remote_code --served-model-name a b --swap 4 --tool-call-parser hermes --frobnicate 7")
    # in the 0.32.0 list (as its option names them; --served-model-name takes a list): no effect on memory
    assert a.ignored == ("--trust-remote-code", "--served-model-name a b", "--tool-call-parser hermes")
    # not in it (--swap-space is gone from 0.32.0, so its prefix names nothing)
    assert a.unknown == ("--swap 4", "--frobnicate 7")
    assert "--served-model-name" in release_flags_vllm().kinds and "--frobnicate" not in release_flags_vllm().kinds


def test_vllm_flexible_parser_forms() -> None:
    """vllm/utils/argparse_utils.py::FlexibleArgumentParser.parse_args@0.32.0: -O3 is --optimization-level 3,
    dotted keys merge into their flag's JSON, BooleanOptionalAction's --no-X sets False."""
    a = vll("-O3 -cc.cudagraph_mode=PIECEWISE -cc.pass_config.fuse_x=true --enforce-eager --no-enforce-eager")
    # -O moves the CUDA-graph term (O0 none, O1 piecewise only: config/vllm.py::OptimizationLevel), so it is read
    assert a.ignored == () and a.optimization_level == "3" and not a.unknown
    assert json.loads(a.compilation_config or "") == {"cudagraph_mode": "PIECEWISE", "pass_config": {"fuse_x": True}}
    assert a.enforce_eager is False and not a.full_cudagraphs  # PIECEWISE: no FULL graphs
    assert vll("-O 2").optimization_level == "2" and vll("-O 2").ignored == ()
    b = vll("-sc '{\"method\": \"ngram\", \"num_speculative_tokens\": 3}' -tp 2")
    assert b.speculative is not None and b.speculative.kind == "ngram" and b.tp == 2


def test_vllm_table_spellings_are_real_flags_and_read_everywhere() -> None:
    from specbench.engines.vllm import ENGINE
    from specbench.engines.vllm.knobs import KNOBS as VKNOBS
    from specbench.engines.vllm.knobs import PLAN_KEYS, spellings
    from specbench.engines.vllm.launch import vllm_argv

    listed = release_flags_vllm().kinds
    for knob in VKNOBS:
        for flag in knob.flags + knob.negations:
            assert (flag in listed) != knob.retired, flag
    assert "tensor_parallel_size" in PLAN_KEYS and "max_num_seqs" in PLAN_KEYS and "port" not in PLAN_KEYS
    assert spellings("--tensor-parallel-size") == ("--tensor-parallel-size", "-tp")
    assert [ENGINE.fix_axis(k) for k in ("--max-num-seqs", "-tp", "gpu_memory_utilization", "num_speculative_tokens",
                                         "--port")] == ["max_running_requests", "tp", "mem_fraction_static",
                                                        "num_draft_tokens", None]
    argv = vllm_argv(split_command("vllm serve m -tp 4 --no-enforce-eager"), {"tp": 2, "flags": {"--enforce-eager": True}},
                     "127.0.0.1", 8000, False)
    assert argv == ["vllm", "serve", "m", "--tensor-parallel-size", "2", "--enforce-eager", "--host", "127.0.0.1",
                    "--port", "8000"]


def release_flags_vllm():
    from specbench.engines.vllm.knobs import release_flags as vllm_release_flags

    return vllm_release_flags("0.32.0")


def test_rewriting_a_flag_removes_its_own_values_only() -> None:
    """#18: replacing --host/--port used to drop every word up to the next `--` word (a positional model too)."""
    from specbench.engines.sglang.launch import set_flag as sglang_set
    from specbench.engines.vllm.launch import _set_vllm

    argv = ["vllm", "serve", "--port", "8000", "Qwen/Qwen3-8B", "--enforce-eager", "x"]
    assert _set_vllm(argv, "--port", 9000) == ["vllm", "serve", "Qwen/Qwen3-8B", "--enforce-eager", "x",
                                               "--port", "9000"]
    base = ["python", "-m", "sglang.launch_server", "--host", "0.0.0.0", "--cuda-graph-bs", "1", "2", "4",
            "--disable-radix-cache", "--model-path", "m"]
    assert sglang_set(base, "--host", "127.0.0.1")[3:] == ["--cuda-graph-bs", "1", "2", "4", "--disable-radix-cache",
                                                          "--model-path", "m", "--host", "127.0.0.1"]
    assert sglang_set(base, "--cuda-graph-bs", [8, 16])[-4:] == ["m", "--cuda-graph-bs", "8", "16"]  # a list flag
