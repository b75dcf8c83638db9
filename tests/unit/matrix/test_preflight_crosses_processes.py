"""A packed run (`specbench run --gpus ...`, matrix/packing.py) hands each server's Preflight to a worker started
with multiprocessing's `spawn`: the Preflight, its planner's PlanResult (read-only mappings in `extra`, each fix's
`change`) and the asked plan of a fixed launch must pickle and come back equal, for an SGLang and a vLLM matrix.
(An `openai` matrix has no planner, which is why the packed-run tests never met this.)"""

from __future__ import annotations

import multiprocessing
import pickle

import pytest

from paths import ROOT
from predict_stores import local_matrix
from specbench.contracts import PlanResult, plan_json
from specbench.matrix.adapters import adapter_for
from specbench.matrix.expansion import expand
from specbench.matrix.preflight import Preflight, preflight
from specbench.matrix.toml_load import load_matrix


def _preflights(tmp_path, example: str) -> list[Preflight]:
    spec, _ = load_matrix(local_matrix(tmp_path, ROOT / "examples" / example))
    adapter = adapter_for(spec)
    return [preflight(spec, st, adapter) for st in expand(spec)[0]]


def _echo(pf: Preflight, out) -> None:  # in the spawned process: what arrived, as JSON
    out.put((pf.server.server_id, plan_json(pf.plan), plan_json(pf.asked_plan)))


@pytest.mark.parametrize("example", ["h100-sglang-qwen3-8b-decide.toml", "qwen36-27b-dflash-ddtree.toml"])
def test_every_preflight_pickles_with_its_plan(tmp_path, example):
    pfs = _preflights(tmp_path, example)
    assert any(isinstance(pf.plan, PlanResult) and pf.plan.fixes for pf in pfs)  # fixes carry read-only `change`
    for pf in pfs:
        back = pickle.loads(pickle.dumps(pf))
        assert back == pf and plan_json(back.plan) == plan_json(pf.plan)
        if isinstance(back.plan, PlanResult):
            assert list(back.plan.to_json()) == list(pf.plan.to_json())  # key order kept


def test_a_spawned_worker_receives_the_preflight(tmp_path):
    pf = next(p for p in _preflights(tmp_path, "h100-sglang-qwen3-8b-decide.toml") if p.plan is not None)
    ctx = multiprocessing.get_context("spawn")  # as matrix/packing.py starts its workers
    out = ctx.Queue()
    proc = ctx.Process(target=_echo, args=(pf, out))
    proc.start()
    try:
        sid, plan, asked = out.get(timeout=120)
    finally:
        proc.join(timeout=60)
    assert proc.exitcode == 0
    assert (sid, plan, asked) == (pf.server.server_id, plan_json(pf.plan), plan_json(pf.asked_plan))
