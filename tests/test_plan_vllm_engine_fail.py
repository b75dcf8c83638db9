"""One live boot of the embedded engine that must fail: the tiny hybrid with a 2,000,000-token context in 1 GiB
(allowed past its derived length by VLLM_ALLOW_LONG_MAX_MODEL_LEN=1). The planner predicts the engine's own
ValueError text, including its binary-searched "estimated maximum model length" (hybrid blocks of 256 tokens,
two Mamba pages per request in 'align' mode, the null block held back)."""

from __future__ import annotations

import json
import re
import shlex
import tempfile
from pathlib import Path

import pytest

from engine_boot import engine_venv_or_skip, free_port, models_dir, plan_words, running, wait_for
from specbench.engines.vllm import local as vl
from specbench.models_gen.configs import model_config
from specbench.models_gen.shapes import by_name
from specbench.plan.api import PlanOptions, plan_command

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
def failed_boot(tmp_path_factory) -> tuple[list[str], str]:
    venv = engine_venv_or_skip()
    folder = models_dir(tmp_path_factory)
    cfg = vl.LocalServerConfig(model=str(folder / "tiny-hybrid"), port=free_port(), max_model_len=L, kv_cache_space_gib=1,
                               extra_env={"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"})
    log_path = tmp_path_factory.mktemp("log") / "server.log"
    with running(cfg, venv, log_path) as proc:  # the engine refuses and exits by itself
        text = wait_for(proc, lambda t: False)
    return plan_words(vl.launch_command(cfg, venv)), text


@pytest.mark.engine
def test_live_failure_matches_the_plan(failed_boot):
    words, log = failed_boot
    m = ERROR.search(log)
    assert m, log[-3000:]
    r = _plan(words)   # words lead with this machine's CPU pins, as the engine's torch reports them
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
