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
