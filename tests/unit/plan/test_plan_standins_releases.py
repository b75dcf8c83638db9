"""Issue 26 on SGLang: quantized / renamed checkpoints planned offline on a bundled stand-in that says so, every
`--quantization` value honoured or refused in the engine's words, architectures and speculative algorithms read per
release, concurrency said one way, and wrapped launch lines unwrapped. Planned offline (conftest pins HF_HUB_OFFLINE,
the HF cache is empty here)."""

from __future__ import annotations

import pytest

from paths import ROOT
from specbench.contracts_inputs import PlanOptions
from specbench.engines.command import read_command
from specbench.plan.api import plan_command

L = "python -m sglang.launch_server --model-path "


def _plan(cmd: str, **kw) -> dict:
    return plan_command(cmd, PlanOptions(fixes=False, **kw))


@pytest.fixture(autouse=True)
def _empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)


@pytest.mark.parametrize("model,label,sibling", [
    ("Qwen/Qwen3-8B-FP8", "fp8 (fp8-block128)", "Qwen/Qwen3-8B"),
    ("/models/Qwen3-8B-FP8", "fp8 (fp8-block128)", "Qwen/Qwen3-8B"),   # a local folder named after the repo
    ("nvidia/Qwen3-8B-NVFP4", "modelopt (nvfp4)", "Qwen/Qwen3-8B"),
    ("Qwen/Qwen3.5-27B-NVFP4-V2", "modelopt (fp8+nvfp4)", "Qwen/Qwen3.5-27B"),
    ("Qwen/Qwen3-8B-AWQ", "awq (int4-g128)", "Qwen/Qwen3-8B"),
    ("cyankiwi/Qwen3-8B-AWQ-4bit", "awq (int4-g128)", "Qwen/Qwen3-8B"),
    ("Qwen/Qwen3-8B-GPTQ-Int4", "gptq (int4-g128)", "Qwen/Qwen3-8B"),
    ("Intel/Qwen3-8B-autoround-int4", "auto-round (int4-g128)", "Qwen/Qwen3-8B"),
    ("Qwen/Qwen3-30B-A3B-Instruct-2507-FP8", "fp8 (fp8-block128)", "Qwen/Qwen3-30B-A3B"),
])
def test_quantized_and_renamed_checkpoints_plan_on_a_stand_in_that_says_so(model, label, sibling):
    p = _plan(L + model)
    assert p["status"] == "ok" and p["weights_quant_label"] == label
    s = p["model_stand_in"]
    assert s and f"bundled config of {sibling}" in s and "makes it exact" in s and "assumed from" in s
    assert p["model_source"] == "bundled (offline fallback)"
    base = _plan(L + sibling)
    assert p["weights_gib"] < 0.62 * base["weights_gib"]  # never the bf16 weights of the sibling


def test_a_renamed_checkpoint_takes_the_fields_the_rename_changes():
    p = _plan(L + "Qwen/Qwen3-30B-A3B-Instruct-2507 --context-length 262144")
    assert p["status"] == "ok" and p["context_len"] == 262144 and p["weights_quant_label"] == "unquantized"
    assert "2507" in p["model_stand_in"]


def test_a_drafter_never_stands_in_for_a_model_and_a_published_drafter_finds_its_template():
    with pytest.raises(Exception, match="cannot find a config"):
        _plan(L + "unsloth/Qwen3.8-27B-NVFP4")  # only a Qwen3.8 drafter is bundled
    p = _plan(L + "Qwen/Qwen3-8B --speculative-algorithm EAGLE3 --speculative-draft-model-path "
                  "AngelSlim/Qwen3-8B_eagle3")
    assert p["status"] == "ok" and p["draft_model_source"] == "bundled (offline fallback)"
    assert any("SpecForge eagle3 template" in n for n in p["model_notes"]) or p["draft_weights_gib"] > 0


def test_the_quantization_flag_says_what_an_unnamed_checkpoint_carries_and_is_checked_against_a_known_one():
    p = _plan(L + "/models/Qwen3-8B-Instruct --quantization awq")
    assert p["status"] == "ok" and p["weights_quant_label"].startswith("awq")
    assert "--quantization awq" in p["model_stand_in"]
    wrong = _plan(L + "Qwen/Qwen3-32B-FP8 --quantization awq")
    assert wrong["status"] == "fails" and wrong["error"].startswith(
        "ValueError: Quantization method specified in the model config (fp8) does not match")
    assert _plan(L + "Qwen/Qwen3-8B --quantization awq")["error"] == "ValueError: Cannot find the config file for awq"
    bogus = _plan(L + "Qwen/Qwen3-8B --quantization awq-int4")
    assert bogus["error"].startswith("error: argument --quantization: invalid choice: 'awq-int4'")
    online = _plan(L + "Qwen/Qwen3-8B --quantization mxfp8")
    assert online["weights_quant_label"] == "mxfp8 (mxfp8)"
    assert _plan(L + "nvidia/Qwen3-32B-NVFP4 --quantization modelopt_fp4")["status"] == "ok"  # compatible override
    ampere, hopper = _plan(L + "Qwen/Qwen3-32B-FP8", gpu="A100 80GB"), _plan(L + "Qwen/Qwen3-32B-FP8")
    assert "weight-only FP8 Marlin" in " ".join(ampere["notes"])
    assert ampere["weights_quant_label"] == "fp8 (fp8-marlin-g128)" and hopper["weights_quant_label"].endswith("block128)")
    # 16-bit group scales (2 B per 128 weights) and the repack residue: a few percent more than on Hopper
    assert 1.015 < ampere["weights_gib"] / hopper["weights_gib"] < 1.04


def test_architectures_a_release_has_no_class_for_fail_in_the_engines_words():
    p = _plan(L + "ai21labs/AI21-Jamba-1.5-Mini")
    assert p["status"] == "fails" and p["error"] == ("ValueError: JambaForCausalLM has no SGlang implementation and "
                                                     "the Transformers implementation is not compatible with SGLang.")
    assert p["error"] not in p["reason"]
    old = _plan(L + "nvidia/Qwen3-32B-NVFP4 --speculative-algorithm EAGLE3 --speculative-draft-model-path "
                    "z-lab/Qwen3.8-27B-DFlash2", engine_version="0.5.12")
    assert old["status"] in ("ok", "fails")  # the drafter's class is not checked: SGLang rewrites drafter archs


def test_a_newer_algorithm_is_not_modelled_on_its_release_and_the_engines_error_before_it():
    new = _plan(L + "Qwen/Qwen3-8B --speculative-algorithm DSPARK --speculative-draft-model-path "
                    "specforge/qwen3-8b-dflash", engine_version="0.5.23")
    assert new["status"] == "ok" and new["draft_model"] is None
    assert any("DSPARK" in w and "not modelled" in w for w in new["warnings"])
    old = _plan(L + "Qwen/Qwen3-8B --speculative-algorithm DSPARK --speculative-draft-model-path "
                    "specforge/qwen3-8b-dflash", engine_version="0.5.15.post1")
    assert old["status"] == "fails" and old["error"].startswith("ValueError: Unknown speculative algorithm name: DSPARK")
    assert "DSPARK" not in old["reason"]  # said once


def test_concurrency_is_said_one_way_with_a_warning_when_the_asked_requests_cannot_hold_the_context():
    p = _plan(L + "Qwen/Qwen3-8B --max-running-requests 128 --context-length 32768 --mem-fraction-static 0.3")
    assert p["engine_cap"] == p["max_running_requests"] == 128
    assert p["concurrency_at_context"] == min(128, p["kv_tokens"] // 32768)
    assert p["typical_context"] == 2048 and "serving benchmark" in p["typical_context_basis"]
    assert p["concurrency_at_typical_context"] == min(128, p["kv_tokens"] // 2048)
    assert str(p["concurrency_at_context"]) in p["concurrency_summary"]
    assert any(w.startswith("SGLang starts 128 requests at once") and "KV tokens" in w for w in p["warnings"])
    roomy = _plan(L + "Qwen/Qwen3-8B --max-running-requests 4 --context-length 8192")
    assert not any("requests at once" in w for w in roomy["warnings"])
    short = _plan(L + "Qwen/Qwen3-8B --context-length 1024")
    assert short["typical_context"] == 1024 and short["concurrency_at_context"] == short["concurrency_at_typical_context"]


@pytest.mark.parametrize("line", [
    'START_CMD="python -m sglang.launch_server --model-path Qwen/Qwen3-8B --tp 2 --port 30000"',
    'START_CMD="python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --tp 2"; eval $START_CMD',
    "export CUDA_VISIBLE_DEVICES=0,1; export SGLANG_ENABLE_JIT_DEEPGEMM=0 && "
    "python -m sglang.launch_server --model-path Qwen/Qwen3-8B --tp 2 > server.log 2>&1 &",
])
def test_wrapped_launch_lines_are_unwrapped(line):
    cmd = read_command(line)
    assert cmd.engine.name == "sglang" and "--model-path" in cmd.argv and cmd.notes
    assert _plan(line)["tp"] == 2


def test_dry_run_flags_cells_asking_more_at_once_than_the_planned_server_runs():

    from specbench.matrix.preflight import dry_run
    from specbench.matrix.toml_load import load_matrix

    spec, _text = load_matrix(ROOT / "examples" / "qwen36-27b-dflash-ddtree.toml")
    rows = dry_run(spec)
    warned = [r for r in rows if r["concurrency_warning"]]
    assert warned and len(warned) < len(rows)
    for r in rows:
        c = r["client"]["concurrency"]
        cap = r["max_running_requests_planned"]
        over_cap = r["plan_status"] == "ok" and isinstance(cap, int) and c > cap
        assert not over_cap or "above the planned cap" in r["concurrency_warning"]


def test_the_release_lists_are_the_releases_own():
    """Written by tools/engine/engine_registry.py from each release's source; spot checks against that source."""
    from specbench.engines.sglang import registry

    assert {"DSPARK", "UNO"} <= registry.spec_algorithms("0.5.23").names
    assert registry.spec_algorithms("0.5.15.post1").refuses("DSPARK")
    assert not registry.spec_algorithms("0.5.20").refuses("DSPARK")  # between two lists: added in between?
    archs = registry.architectures("0.5.15.post1")
    assert {"Qwen3_5ForConditionalGeneration", "NemotronHForCausalLM", "LlamaForCausalLMEagle3"} <= archs.names
    assert archs.refuses("JambaForCausalLM") and not registry.architectures("0.5.23").refuses("MambaForCausalLM")
    q = registry.quant_methods("0.5.12")
    assert {"auto-round", "modelopt", "modelopt_fp4", "awq_marlin", "gptq_marlin"} <= q.names and q.refuses("nvfp4_online")
    assert not registry.quant_methods("0.5.15.post1").refuses("nvfp4_online")


def test_pure_mamba_models_plan_where_the_release_serves_them():
    """0.5.23 has MambaForCausalLM / FalconMambaForCausalLM and sizes no KV for them (its token pool is the context
    length, pool_configurator.py::_zero_kv_max_tokens); 0.5.15 has no class for them."""
    new = _plan(L + "tiiuae/falcon-mamba-7b --max-total-tokens 65536", engine_version="0.5.23")
    assert new["status"] == "ok" and new["kv_tokens"] == 65536 and new["k_size_gib"] == 0.0
    assert new["max_mamba_cache_size"] > 0
    old = _plan(L + "tiiuae/falcon-mamba-7b", engine_version="0.5.15.post1")
    assert old["status"] == "fails" and "FalconMambaForCausalLM has no SGlang implementation" in old["error"]


def test_dry_run_text_says_the_concurrency_that_would_run():
    """The text dry run (a real CLI): a cell above its server's planned cap says what runs, `concurrency=8 (runs 4:
    planner cap)`; one at or below it the concurrency alone; the JSON row's `effective_concurrency_planned` agrees."""
    import json
    import re
    import subprocess
    import sys

    root = ROOT
    args = [sys.executable, "-m", "specbench", "run", "--dry-run", str(root / "examples" / "qwen36-27b-dflash-ddtree.toml")]
    text = subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=root).stdout
    rows = json.loads(subprocess.run([*args, "--json"], capture_output=True, text=True, timeout=120, cwd=root).stdout)
    capped = 0
    for r in rows:
        c, eff = r["client"]["concurrency"], r["effective_concurrency_planned"]
        line = re.search(rf"cell {r['cell']}: concurrency=(\S+(?: \(runs \d+: planner cap\))?) prompt", text)
        assert line, r["cell"]
        assert line.group(1) == (f"{c} (runs {eff}: planner cap)" if eff < c else str(c)), line.group(0)
        capped += eff < c
    assert 0 < capped < len(rows)
