"""A matrix's [plan] draft_config names the drafter of its DFlash/EAGLE3 servers; a NEXTN server beside them drafts
with the target's own MTP layers, so it is planned on those, never on the other drafter's config (which failed the
whole server as "the drafter is no EAGLE draft model")."""

from __future__ import annotations

from paths import ROOT
from specbench.contracts_inputs import PlanOptions
from specbench.matrix.adapters import adapter_for
from specbench.matrix.expansion import expand
from specbench.matrix.preflight import preflight
from specbench.matrix.toml_load import load_matrix
from specbench.plan.api import plan_result

Q36 = "Qwen/Qwen3.6-27B-bf16-derived"
CMD = ["python3", "-m", "sglang.launch_server", "--model-path", "/tmp/models/q36_27b", "--load-format", "dummy",
       "--tp-size", "1", "--mem-fraction-static", "0.85", "--max-running-requests", "8", "--context-length", "2304",
       "--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
       "--speculative-num-draft-tokens", "4"]


def _plan(draft_config: str | None):
    return plan_result(CMD, PlanOptions(model_config=Q36, draft_config=draft_config, gpu="H100",
                                        engine_version="0.5.15.post1", fixes=False))


def test_nextn_is_planned_on_the_targets_mtp_layers_whatever_draft_config_says() -> None:
    bare, with_dflash = _plan(None), _plan("specforge/qwen3.6-27b-dflash")
    assert with_dflash.status == bare.status == "ok"
    assert with_dflash.max_running_requests == bare.max_running_requests
    assert with_dflash.memory == bare.memory
    assert with_dflash.draft_model is None and with_dflash.draft_weights_gib == bare.draft_weights_gib > 0
    notes = [str(n) for n in with_dflash.extra.get("notes", ())]
    assert any("not used" in n and "own MTP layers" in n for n in notes), notes
    assert not any("not used" in str(n) for n in bare.extra.get("notes", ()))


def test_a_separate_drafter_still_uses_draft_config() -> None:
    argv = [*CMD[:-8], "--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "/tmp/d",
            "--speculative-num-draft-tokens", "16", "--mamba-scheduler-strategy", "extra_buffer"]
    r = plan_result(argv, PlanOptions(model_config=Q36, draft_config="specforge/qwen3.6-27b-dflash", gpu="H100",
                                      engine_version="0.5.15.post1", fixes=False))
    assert r.status == "ok" and r.draft_model == "specforge/qwen3.6-27b-dflash"


def test_the_hybrid_example_plans_every_server() -> None:
    spec, _ = load_matrix(ROOT / "examples" / "h100-sglang-qwen36-27b-hybrid.toml")
    adapter = adapter_for(spec)
    flights = [preflight(spec, st, adapter) for st in expand(spec)[0]]
    assert len(flights) == 4 and [f.verdict for f in flights] == ["launch"] * 4


def test_a_target_without_mtp_layers_keeps_the_draft_config() -> None:
    """EAGLE with no draft path on a model with no MTP layers: nothing of its own to draft with, so the given draft
    config is what is planned (the engine needs that drafter's path)."""
    argv = ["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", "--speculative-algorithm", "EAGLE",
            "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]
    r = plan_result(argv, PlanOptions(model_config="Qwen/Qwen3-8B", draft_config="specforge/qwen3-8b-eagle3",
                                      gpu="H100", engine_version="0.5.15.post1", fixes=False))
    assert r.draft_model == "specforge/qwen3-8b-eagle3"
    assert not any("not used" in str(n) for n in r.extra.get("notes", ()))
