"""The seed incident (../shared/scenario/): Qwen3.6-27B + DFLASH (16 draft tokens, 5-layer drafter) on a 96 GB
RTX PRO 6000, TP1, mem-fraction-static 0.75, context 32768, mamba-full-memory-ratio 0.5, extra_buffer.
Logged: mrr 4 -> 24 Mamba slots, 87,061 KV tokens, conv/ssm/intermediate 0.07/3.52/11.25 GB;
mrr 8 -> 2 slots, 11,893 tokens, `AssertionError: max_running_request is zero`."""

import json
import subprocess
import sys

import pytest

from specbench.contracts_inputs import PlanOptions
from specbench.plan.api import plan_command

CMD = ("python -m sglang.launch_server --model-path Qwen/Qwen3.6-27B --tp 1 --mem-fraction-static 0.75 "
       "--max-running-requests {mrr} --context-length 32768 --speculative-algorithm DFLASH "
       "--speculative-num-draft-tokens 16 --speculative-draft-model-path specforge/qwen3.6-27b-dflash "
       "--mamba-scheduler-strategy extra_buffer --mamba-full-memory-ratio 0.5")
OPTS = dict(model_config="Qwen/Qwen3.5-27B", gpu="rtx-pro-6000", avail_before_load_gib=94.24, weights_gib=51.05,
            draft_weights_gib=3.3)


def plan(mrr, version="0.5.12", **kw):
    return plan_command(CMD.format(mrr=mrr), PlanOptions(engine_version=version, **{**OPTS, **kw}))


def test_mrr4_starts_with_logged_pools():
    r = plan(4, fixes=False)
    assert r["status"] == "ok" and r["error"] is None
    assert r["max_mamba_cache_size"] == 24
    assert abs(r["kv_tokens"] - 87061) / 87061 < 0.02
    assert (r["conv_state_gib"], r["ssm_state_gib"], r["intermediate_ssm_state_gib"]) == (0.07, 3.52, 11.25)
    assert r["max_running_requests"] == 4


def test_mrr8_fails_with_the_assertion():
    r = plan(8)
    assert r["status"] == "fails"
    assert r["error"] == "AssertionError: max_running_request is zero"
    assert r["max_mamba_cache_size"] == 2
    assert abs(r["kv_tokens"] - 11893) / 11893 < 0.02
    # the reason names the mechanism: scratch taken before the split, linear in mrr
    assert "8 requests x 16 draft tokens x 146.8 MiB" in r["reason"]
    # nearest fix at the same TP is mrr 4 (the operator's working value)
    first = r["fixes"][0]
    assert first["change"] == {"--max-running-requests": 4}
    assert first["result"]["status"] == "ok"
    per_tp = {row["tp"]: row for row in r["per_tp"]}
    assert per_tp[1]["max_running_requests"] == 4
    assert per_tp[4]["max_running_requests"] > 8 and per_tp[8]["max_running_requests"] > per_tp[4]["max_running_requests"]


def test_contract_keys_present():
    r = plan(8, fixes=False)
    for key in ("status", "error", "engine", "engine_version", "mem_fraction_static", "weights_gib",
                "draft_weights_gib", "kv_tokens", "k_size_gib", "v_size_gib", "max_mamba_cache_size",
                "conv_state_gib", "ssm_state_gib", "intermediate_ssm_state_gib", "max_running_requests", "fixes"):
        assert key in r
    assert r["engine"] == "sglang" and r["engine_version"] == "0.5.12"


def test_newest_rules_do_not_collapse_linearly():
    """0.5.13+: K does not depend on max_running_requests (joint solve); the draft weights are counted before
    sizing, so with ratio 0.5 this box fails at both 4 and 8 with the RuntimeError, not the assertion."""
    a, b = plan(4, "0.5.23", fixes=False), plan(8, "0.5.23", fixes=False)
    assert a["max_mamba_cache_size"] == b["max_mamba_cache_size"]
    assert a["kv_tokens"] == b["kv_tokens"]
    assert "assert" not in (b["error"] or "").lower()
    c = plan(8, "0.5.23", fixes=False, avail_before_load_gib=94.24)
    assert c["engine_version"] == "0.5.23"


def test_weights_estimates_stated_for_bf16_and_nvfp4():
    r = plan(4, fixes=False)
    assert abs(r["weights_estimate_gib"] - 51.05) / 51.05 < 0.01  # BF16 Qwen3.6-27B shapes
    n = plan(4, fixes=False, model_config="nvidia/Qwen3.6-27B-NVFP4", weights_gib=51.05)
    assert n["weights_estimate_gib"] < 25
    assert any("differ" in w for w in n["warnings"])  # 51.05 GiB measured is not what NVFP4 weighs


def test_cli_json_and_one_line_errors(tmp_path):
    exe = [sys.executable, "-m", "specbench"]
    out = subprocess.run(exe + ["plan", "--json", "--no-fixes", "--engine-version", "0.5.12", "--gpu", "rtx-pro-6000",
                                "--avail-before-load-gib", "94.24", "--weights-gib", "51.05",
                                "--model-config", "Qwen/Qwen3.5-27B", "--"] + CMD.format(mrr=8).split(),
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["status"] == "fails"
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    for extra, needle in (
        (["--model-config", str(bad)], "not valid JSON"),
        (["--model-config", "Qwen/Qwen3.5-27B", "--gpu", "nosuchgpu"], "unknown GPU"),
    ):
        r = subprocess.run(exe + ["plan"] + extra + ["--", "sglang", "serve", "--model-path", "x", "--tp", "1"],
                           capture_output=True, text=True)
        assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
    r = subprocess.run(exe + ["plan", "--json", "--no-fixes", "--model-config", "Qwen/Qwen3.5-27B", "--", "sglang",
                              "serve", "--tp", "3"], capture_output=True, text=True)
    # a start check now (engines/sglang/start_checks.py): the plan fails with the engine's assert, exit 0
    tp3 = json.loads(r.stdout)
    assert r.returncode == 0 and tp3["status"] == "fails" and tp3["error_kind"] == "start_check"
    assert "total_num_kv_heads % tp_size" in tp3["error"] and "Traceback" not in r.stderr
    r = subprocess.run(exe + ["plan", "--model-config", "Qwen/Qwen3.5-27B", "--", "sglang", "serve",
                              "--mem-fraction-static", "-1"], capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    unknown = tmp_path / "u.json"
    unknown.write_text(json.dumps({"architectures": ["FooForCausalLM"], "model_type": "foo"}))
    r = subprocess.run(exe + ["plan", "--model-config", str(unknown), "--", "sglang", "serve"], capture_output=True, text=True)
    assert r.returncode == 2 and "hidden_size" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("tp,kv_per_gpu_heads", [(1, 4), (4, 1), (8, 1)])
def test_kv_heads_replicated_beyond_kv_heads(tp, kv_per_gpu_heads):
    from specbench.engines.sglang.formulas import kv_cell_bytes, kv_heads_per_rank
    from specbench.specs.resolve import load_model_spec
    m = load_model_spec("Qwen/Qwen3.5-27B")
    assert kv_heads_per_rank(m, tp) == kv_per_gpu_heads
    assert kv_cell_bytes(m, tp, "bfloat16") == kv_per_gpu_heads * 512 * 16 * 2
