"""Integer weight-only quantization as the engines keep it (AWQ, GPTQ on Marlin, compressed-tensors wNa16), SGLang's
--swa-full-tokens-ratio / --disable-hybrid-swa-memory, and the expert-parallel start checks.

Configs: tests/data/quant-configs/ (the bundled Qwen3-8B / Qwen3-30B-A3B configs with the quantization_config blocks
AutoAWQ, GPTQModel and llm-compressor write; README.md there). Engine code cited in src/specbench/specs/quant.py and
src/specbench/engines/sglang/start_checks.py."""

from __future__ import annotations

import json

import pytest

from paths import DATA
from specbench.contracts_inputs import PlanOptions
from specbench.plan.api import plan_command
from specbench.specs.header_weights import tensor_bytes
from specbench.specs.model import model_spec_from_dict
from specbench.specs.quant import parse_quant

QC = DATA / "quant-configs"
L = "python -m sglang.launch_server --model-path "


def _qc(name: str) -> dict:
    return json.loads((QC / name / "config.json").read_text())


def _plan(cmd: str, **kw) -> dict:
    return plan_command(cmd, PlanOptions(gpu="H200", fixes=False, engine_version="0.5.15.post1", **kw))


@pytest.mark.parametrize("name,label,bpp", [
    # AWQ creates qzeros: 0.5 + (2 B scale + 0.5 B zero) / 128
    ("qwen3_8b_awq", "int4-g128", 0.5 + 2.5 / 128),
    # GPTQ creates qzeros too; Marlin frees them but the bytes stay reserved (the boot logs 5.74 GB, as AWQ)
    ("qwen3_8b_gptq", "int4-g128", 0.5 + 2.5 / 128),
    # compressed-tensors creates a zero point only when asymmetric (5.72 vs 5.74 GB logged)
    ("qwen3_8b_w4a16", "int4-g128-sym", 0.5 + 2 / 128),
    ("qwen3_8b_w4a16_asym", "int4-g128", 0.5 + 2.5 / 128),
])
def test_int4_schemes_count_what_the_engine_allocates(name, label, bpp):
    q = parse_quant(_qc(name))
    assert q.default is not None and q.default.name == label
    assert q.default.bytes_per_param == pytest.approx(bpp)
    assert q.default.int_group_bits == 4


def test_int_group_variants():
    base = {"quant_method": "gptq", "bits": 4, "group_size": 128}
    g8 = parse_quant({"quantization_config": {**base, "bits": 8, "sym": True}})
    assert g8.default.name == "int8-g128" and g8.default.bytes_per_param == pytest.approx(1 + 3 / 128)
    ch = parse_quant({"quantization_config": {**base, "group_size": -1}})
    assert ch.default.name == "int4-ch" and ch.default.bytes_per_param == 0.5
    awq_nozp = parse_quant({"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 64,
                                                    "zero_point": False}})
    assert awq_nozp.default.name == "int4-g64-sym"


def test_gptq_headers_count_every_created_tensor():
    """A real GPTQ layer's tensors (qweight int32 [in/8, out], qzeros int32 [in/128, out/8], scales f16 [in/128, out],
    g_idx int32 [in]) are all counted: what Marlin frees stays reserved."""
    c = _qc("qwen3_8b_gptq")
    m = model_spec_from_dict(c, name="qwen3_8b_gptq")
    i, o = 4096, 12288
    layer = [("model.layers.0.mlp.up_proj.qweight", "I32", (i // 8, o)),
             ("model.layers.0.mlp.up_proj.qzeros", "I32", (i // 128, o // 8)),
             ("model.layers.0.mlp.up_proj.scales", "F16", (i // 128, o)),
             ("model.layers.0.mlp.up_proj.g_idx", "I32", (i,))]
    assert tensor_bytes(m, layer, 1) == i // 8 * o * 4 + i // 128 * o // 8 * 4 + i // 128 * o * 2 + i * 4


def test_int4_plans_differ_by_the_zero_points_and_the_residue():
    sym = _plan(L + str(QC / "qwen3_8b_w4a16") + " --context-length 32768")
    asym = _plan(L + str(QC / "qwen3_8b_w4a16_asym") + " --context-length 32768")
    bf16 = _plan(L + "Qwen/Qwen3-8B --context-length 32768")
    assert sym["status"] == asym["status"] == "ok"
    assert sym["weights_quant_label"] == "compressed-tensors (int4-g128-sym)"
    # 6.95 G linear parameters: zero points cost 0.5/128 B each (~25.9 MiB; weights_gib has 1 MiB steps)
    assert (asym["weights_gib"] - sym["weights_gib"]) * 1024 == pytest.approx(6.946e9 * 0.5 / 128 / 2**20, abs=1.1)
    assert 5.0 < sym["weights_gib"] < bf16["weights_gib"] / 2.5
    # the Marlin residue is NVIDIA's only: on an MI300X the same checkpoint plans 1.1 % of 3.23 GiB lighter
    amd = plan_command(L + str(QC / "qwen3_8b_w4a16") + " --context-length 32768",
                       PlanOptions(gpu="MI300X", fixes=False, engine_version="0.5.15.post1"))
    assert (sym["weights_gib"] - amd["weights_gib"]) == pytest.approx(0.011 * 6.946e9 * 0.5 / 2**30, rel=0.03)


def test_swa_full_tokens_ratio_and_disable():
    base = L + "openai/gpt-oss-20b --tp 1 --context-length 32768 --mem-fraction-static 0.75"
    d8 = _plan(base)
    d5 = _plan(base + " --swa-full-tokens-ratio 0.5")
    # cell = 2048·12 + r·2048·12: the same bytes hold more full tokens at r = 0.5, and swa = int(full·r)
    assert d5["kv_cell_bytes"] == 2048 * 12 + 1024 * 12 and d8["kv_cell_bytes"] == 44237
    assert d5["swa_kv_tokens"] == int(d5["kv_tokens"] * 0.5)
    assert d5["kv_tokens"] > d8["kv_tokens"] * 1.19
    off = _plan(base + " --disable-hybrid-swa-memory")
    assert off["swa_kv_tokens"] is None and off["swa_k_size_gib"] is None
    assert off["kv_cell_bytes"] == 2048 * 24
    with pytest.raises(Exception, match=r"--swa-full-tokens-ratio should be in range \(0, 1.0\]"):
        _plan(base + " --swa-full-tokens-ratio 1.5")


@pytest.mark.parametrize("flags,needle", [
    ("Qwen/Qwen3-30B-A3B --tp 4 --ep 3", "does not divide --tp-size 4"),
    ("Qwen/Qwen3-30B-A3B --tp 2 --ep-size 4", "does not divide --tp-size 2"),
    ("openai/gpt-oss-20b --tp 2 --expert-parallel-size 2", "Triton kernel MoE is only supported when ep_size == 1"),
    # 768 / 5 is not whole: the MoE layer's own assert (attention TP 5 would stop first, so DP attention)
    ("Qwen/Qwen3-30B-A3B --tp 5 --dp 5 --enable-dp-attention", "intermediate_size % self.moe_tp_size"),
])
def test_expert_parallel_start_checks(flags, needle):
    d = _plan(L + flags)
    assert d["status"] == "fails" and needle in d["error"], d["error"]


def test_expert_parallel_that_divides_starts():
    d = _plan(L + "Qwen/Qwen3-30B-A3B --tp 8 --ep 8")
    assert d["status"] == "ok", d["error"]
    assert d["unknown_flags"] == []


BOOTS = DATA / "sglang-0.5.15.post1"
COLD = {  # case -> the model as the plan names it (the boot's own command is in the log's header), KV tolerance
    "qwen3_8b_awq_mrr48": (str(QC / "qwen3_8b_awq"), 0.005),
    "qwen3_8b_gptq_mrr48": (str(QC / "qwen3_8b_gptq"), 0.005),
    "qwen3_8b_w4a16_mrr48": (str(QC / "qwen3_8b_w4a16"), 0.005),
    "qwen3_8b_w4a16_asym_mrr48": (str(QC / "qwen3_8b_w4a16_asym"), 0.005),
    "qwen3_30b_a3b_awq_mrr48": (str(QC / "qwen3_30b_a3b_awq"), 0.005),
    "gpt_oss_20b_swa05_mrr8": ("openai/gpt-oss-20b", 0.005),
    "nano30b_fi_na_mrr8": ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", 0.005),
    # mf 0.93 leaves 16 GiB after 113 GiB of weights: the +0.35 GiB (+0.31 %) weight estimate is -2.5 % of KV
    "super120b_fp8_x_mrr8": (str(QC / "nemotron3_super_fp8"), 0.03),
}


def _logged(text: str, pattern: str) -> float:
    import re
    m = re.search(pattern, text)
    assert m, pattern
    return float(m.group(1))


@pytest.mark.parametrize("case", sorted(COLD))
def test_cold_plan_matches_the_h200_boot(case):
    """No measured input: B from the H200's catalog row and overhead, weights from the config estimate (with the
    Marlin residue for int-N), against the engine's own lines (tests/data/sglang-0.5.15.post1/<case>.log)."""
    import shlex
    text = (BOOTS / f"{case}.log").read_text()
    argv = shlex.split(text.split("# command: ", 1)[1].split("\n", 1)[0])
    model, kv_rel = COLD[case]
    argv[argv.index("--model-path") + 1] = model
    d = _plan(shlex.join(argv))
    weights = _logged(text, r"Load weight end\..*mem usage=([\d.]+) GB")
    kv = _logged(text, r"max_total_num_tokens=(\d+)")
    mrr = _logged(text, r"max_total_num_tokens=\d+, .*?max_running_requests=(\d+)")
    assert d["status"] == "ok"
    assert d["weights_gib"] == pytest.approx(weights, rel=0.005)
    assert d["kv_tokens"] == pytest.approx(kv, rel=kv_rel)
    assert d["max_running_requests"] == mrr
    if "Mamba Cache is allocated" in text:
        assert abs(d["max_mamba_cache_size"] - _logged(text, r"max_mamba_cache_size: (\d+)")) <= 1
    if "swa05" in case:  # the SWA layers' pool at --swa-full-tokens-ratio 0.5
        swa = _logged(text, r"KV Cache is allocated\..*?#tokens: (\d+)")
        assert d["swa_kv_tokens"] == pytest.approx(swa, rel=0.005)
        assert d["swa_k_size_gib"] == pytest.approx(_logged(text, r"#tokens: \d+, K size: ([\d.]+) GB"), abs=0.02)


@pytest.mark.parametrize("cmd,kw,target,draft", [
    (L + "Qwen/Qwen3-8B", {}, 0.005, None),
    (L + "Qwen/Qwen3-8B", {"weights_gib": 15.3}, None, None),  # measured: no estimate, no error
    (L + str(QC / "qwen3_30b_a3b_awq"), {}, 0.005, None),
    (L + "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8 --tp 8", {}, 0.005, None),  # latent MoE, one boot
    (L + "nvidia/Qwen3-32B-NVFP4 --tp 1", {}, 0.02, None),  # not boot-checked: the basis says so
    (L + "Qwen/Qwen3-8B --speculative-algorithm EAGLE3 --speculative-draft-model-path specforge/qwen3-8b-eagle3",
     {}, 0.005, 0.01),
    ("vllm serve " + str(QC / "qwen3_8b_gptq"), {}, 0.005, None),
    (L + "Qwen/Qwen3-8B --speculative-algorithm NGRAM", {}, 0.005, None),  # no drafter weights, no drafter error
    (L + "Qwen/Qwen3.5-27B --speculative-algorithm NEXTN", {}, 0.005, 0.005),  # the built-in MTP layers
])
def test_weights_estimate_error_keys(cmd, kw, target, draft):
    d = _plan(cmd, **kw)
    assert d["weights_estimate_error"] == target
    assert (d["weights_estimate_error_basis"] is None) == (target is None)
    assert d["draft_weights_estimate_error"] == draft
    if target is not None:  # every bound names what it rests on (boots, or "not boot-checked")
        assert "boot" in d["weights_estimate_error_basis"]
        assert ("not boot-checked" in d["weights_estimate_error_basis"]) == (target >= 0.02)


def test_vllm_expert_parallel_places_whole_experts():
    """FusedMoEParallelConfig.make / determine_expert_map@0.32.0: ep = tp x dp, rank 0 holds ceil(E / ep) whole
    experts. Qwen3-30B-A3B: 128 experts; routed experts are most of its 56.9 GiB."""
    from specbench.engines.vllm.expert_parallel import expert_parallel_delta, routed_bytes
    from specbench.specs.resolve import load_model_spec

    m = load_model_spec("Qwen/Qwen3-30B-A3B")
    whole = routed_bytes(m, 1)
    assert whole / 2**30 > 50
    assert expert_parallel_delta(m, 1, 1) == 0                      # one rank: nothing moves
    assert expert_parallel_delta(m, 4, 1) == pytest.approx(0, abs=2**20)  # 128 / 4 whole = a quarter of each
    assert expert_parallel_delta(m, 4, 3) == pytest.approx(whole * (11 / 128 - 1 / 4), rel=1e-6)  # ceil(128/12)
    base = "vllm serve Qwen/Qwen3-30B-A3B --data-parallel-size 4"
    tp_only = _plan(base)
    ep = _plan(base + " --enable-expert-parallel")
    off = _plan(base + " --enable-expert-parallel --no-enable-expert-parallel")
    assert off["weights_gib"] == tp_only["weights_gib"]
    assert tp_only["weights_gib"] - ep["weights_gib"] == pytest.approx(whole * 3 / 4 / 2**30, abs=0.002)
    assert ep["unknown_flags"] == []


def test_nemotron_h_hf_quant_config_without_exclude_modules_is_the_engines_keyerror(tmp_path):
    """The first Super FP8 boot died with `KeyError: 'exclude_modules'` (a folder holding the bundled, trimmed
    hf_quant_config.json, which has no such key; weight_utils.py::get_quant_config@0.5.15.post1 remaps it for
    NemotronH); the folder with the key booted (tests/data/sglang-0.5.15.post1/super120b_fp8_x_mrr8.log). Other classes
    do not index it. The bundled name itself is planned as the published checkpoint, which carries the list."""
    from specbench.specs.resolve import bundled_dir

    src = bundled_dir() / "nvidia__NVIDIA-Nemotron-3-Super-120B-A12B-FP8"
    folder = tmp_path / "NVIDIA-Nemotron-3-Super-120B-A12B-FP8"
    folder.mkdir()
    (folder / "config.json").write_text(src.with_suffix(".json").read_text())
    (folder / "hf_quant_config.json").write_text(src.with_name(src.name + "__hf_quant_config.json").read_text())
    bare = _plan(L + str(folder) + " --attention-backend flashinfer")
    assert bare["status"] == "fails" and bare["error"].startswith("KeyError: 'exclude_modules'")
    named = _plan(L + "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8 --attention-backend flashinfer")
    assert named["status"] == "ok" and any("trimmed copy" in n for n in named["model_notes"])
    listed = _plan(L + str(QC / "nemotron3_super_fp8") + " --attention-backend flashinfer")
    assert listed["status"] == "ok"
    assert _plan(L + "nvidia/Qwen3-32B-NVFP4")["status"] == "ok"


def test_measured_free_memory_moves_to_other_tps_by_the_overhead_table():
    """A B measured at TP1 is moved to TP8 by specs/gpu.py's H200 rows (1.27 -> 3.06 GiB: the public TP8 log), not by
    one TP2 NCCL share for every TP; and back from a TP2 measurement to TP1."""
    from specbench.engines.sglang.args import parse_sglang_argv
    from specbench.engines.sglang.fixes import Solver
    from specbench.engines.sglang.plan_stages import Measured
    from specbench.specs.gpu import find_gpu
    from specbench.specs.resolve import load_model_spec

    m, h200 = load_model_spec("Qwen/Qwen3-8B"), find_gpu("H200")
    one = Solver(parse_sglang_argv(["--model-path", "Qwen/Qwen3-8B"]), m, None, h200, "0.5.15.post1",
                 Measured(139.13, 15.28, None))
    assert one.measured_at(8).avail_before_load_gib == pytest.approx(139.13 - (3.06 - 1.27))
    assert one.measured_at(2).avail_before_load_gib == pytest.approx(138.28)
    two = Solver(parse_sglang_argv(["--model-path", "Qwen/Qwen3-8B", "--tp", "2"]), m, None, h200, "0.5.15.post1",
                 Measured(138.28, 7.7, None))
    assert two.measured_at(1).avail_before_load_gib == pytest.approx(139.13)
