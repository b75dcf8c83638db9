"""The drafter-vocabulary warning is one check (specs/model.py::draft_vocab_warning) that both engines' start checks
give, on a real config: a drafter with another vocabulary is warned about, one with the target's (or an EAGLE3
drafter that declares its own `draft_vocab_size`) is not."""

from __future__ import annotations

import json

import pytest

from paths import DATA, ROOT
from specbench.engines.sglang.args import parse_sglang_argv
from specbench.engines.sglang.start_checks import model_warnings as sglang_warnings
from specbench.engines.vllm.args import parse_vllm_argv
from specbench.engines.vllm.start_checks import model_warnings as vllm_warnings
from specbench.specs.model import model_spec_from_dict

CONFIG = json.loads((DATA / "command_corpus" / "configs" / "Qwen__Qwen3-8B.json").read_text())
TARGET = model_spec_from_dict(CONFIG, name="target")


def _draft(**changes):
    return model_spec_from_dict({**CONFIG, **changes}, name="draft")


def _warnings(engine, draft):
    if engine == "sglang":
        return sglang_warnings(parse_sglang_argv(["python", "-m", "sglang.launch_server", "--model-path", "m"]),
                               TARGET, draft)
    return vllm_warnings(parse_vllm_argv(["vllm", "serve", "m"]), TARGET, draft)


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_a_drafter_of_another_vocabulary_is_warned_about_by_both_engines(engine):
    got = [w for w in _warnings(engine, _draft(vocab_size=32000)) if "vocab_size" in w]
    assert got == [f"the drafter's vocab_size 32000 is not the target's {TARGET.vocab_size}: its token ids are not "
                   "the target's, so its drafts are rejected (acceptance near zero)"]


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_the_same_vocabulary_or_a_declared_draft_vocabulary_is_not(engine):
    for draft in (_draft(), _draft(vocab_size=32000, draft_vocab_size=32000), None):
        assert not [w for w in _warnings(engine, draft) if "vocab_size" in w]


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_an_eagle3_drafter_trained_for_another_targets_vocabulary_is_warned_about(engine):
    # a Llama-3 EAGLE3 drafter (vocab_size 128256, draft_vocab_size 32000: SpecForge's llama3-8B-eagle3) on Qwen3-8B:
    # its d2t maps into Llama's token ids, which are not Qwen's
    got = [w for w in _warnings(engine, _draft(vocab_size=128256, draft_vocab_size=32000)) if "EAGLE3" in w]
    assert len(got) == 1 and "128256" in got[0] and str(TARGET.vocab_size) in got[0]


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_a_moe_config_with_no_experts_is_warned_about(engine):
    moe = json.loads((ROOT / "src" / "specbench" / "data" / "configs" /
                      "Qwen__Qwen3-30B-A3B.json").read_text())
    m = model_spec_from_dict({**moe, "num_experts": 0}, name="moe0")
    args = (parse_sglang_argv(["python", "-m", "sglang.launch_server", "--model-path", "m"]) if engine == "sglang"
            else parse_vllm_argv(["vllm", "serve", "m"]))
    warn = sglang_warnings if engine == "sglang" else vllm_warnings
    assert any("0 experts" in w for w in warn(args, m, None))
    assert not any("0 experts" in w for w in warn(args, model_spec_from_dict(moe, name="moe"), None))
