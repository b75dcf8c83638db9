"""plan/reach.py on the planner's real plans: which limit binds and how many requests a launch runs at one workload,
against the plan's own keys (engine_cap, max_mamba_cache_size / mamba_ratio, kv_tokens), for SGLang hybrids, a vLLM
hybrid (whose Mamba state is inside its block pool: no separate Mamba limit), a plan that fails and no plan."""

from __future__ import annotations

from specbench.contracts import PlanResult
from specbench.contracts_inputs import PlanOptions
from specbench.plan.api import plan_command
from specbench.plan.concurrency import cell_warning
from specbench.plan.reach import reach_of

INCIDENT = ("python -m sglang.launch_server --model-path Qwen/Qwen3.6-27B --tp 1 --mem-fraction-static 0.75 "
            "--max-running-requests {mrr} --context-length 32768 --speculative-algorithm DFLASH "
            "--speculative-num-draft-tokens 16 --speculative-draft-model-path specforge/qwen3.6-27b-dflash "
            "--mamba-scheduler-strategy extra_buffer --mamba-full-memory-ratio 0.5")
OPTS = PlanOptions(model_config="Qwen/Qwen3.5-27B", gpu="rtx-pro-6000", avail_before_load_gib=94.24,
                   weights_gib=51.05, draft_weights_gib=3.3, engine_version="0.5.12", fixes=False)


def test_a_failing_plan_reaches_nothing_and_says_why():
    plan = plan_command(INCIDENT.format(mrr=8), OPTS)
    r = reach_of(plan, 1280, 8)
    assert plan["status"] == "fails"
    assert (r.planned, r.holds, r.reachable, r.fits, r.binds) == (False, 0, 0, False, None)
    assert r.reason == f"does not start: {plan['error']}"


def test_the_working_incident_launch_and_the_workload_length():
    plan = plan_command(INCIDENT.format(mrr=4), OPTS)
    short = reach_of(plan, 1024 + 256, 8)
    assert short.engine_cap == plan["engine_cap"] == 4 and short.reachable == 4
    assert short.mamba == plan["max_mamba_cache_size"] // plan["mamba_ratio"]
    assert short.kv == plan["kv_tokens"] // 1280 and short.binds == "engine_cap"
    # at a 30k-token request the KV pool binds, as the dry run's cell warning words it
    long = reach_of(plan, 30000 + 256, 8)
    assert long.kv == plan["kv_tokens"] // 30256 < 4 and long.binds == "kv" and long.reachable == long.kv
    warning = cell_warning(PlanResult.from_json(plan), 4, 30000, 256)
    assert warning is not None and f"about {long.kv} run at once" in warning
    # the matrix asks fewer than the launch holds: the matrix's concurrency binds
    few = reach_of(plan, 1280, 2)
    assert (few.reachable, few.binds, few.holds) == (2, "concurrency", 4)


def test_a_vllm_hybrid_has_no_separate_mamba_limit():
    plan = plan_command("vllm serve Qwen/Qwen3.5-27B --max-model-len 32768 --max-num-seqs 16 "
                        "--gpu-memory-utilization 0.9", PlanOptions(engine="vllm", gpu="H200"))
    assert plan["max_mamba_cache_size"] and plan.get("mamba_ratio") is None  # an SGLang key
    r = reach_of(plan, 640, 64)
    assert r.mamba is None and r.engine_cap == plan["engine_cap"] == 16
    assert r.kv == plan["kv_tokens"] // 640 and (r.reachable, r.binds) == (16, "engine_cap")


def test_no_plan_runs_the_matrix_concurrency_with_no_limit_named():
    r = reach_of(None, 640, 16)
    assert (r.planned, r.reachable, r.binds, r.holds) == (False, 16, None, None) and r.fits
    tolerated = reach_of({"status": None, "planner_error": "UserError: tiny model"}, 640, 4)
    assert tolerated.reachable == 4 and tolerated.reason == "UserError: tiny model"
