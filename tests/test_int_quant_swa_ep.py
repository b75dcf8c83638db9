"""Integer weight-only quantization as the engines keep it (AWQ, GPTQ on Marlin, compressed-tensors wNa16), SGLang's
--swa-full-tokens-ratio / --disable-hybrid-swa-memory, and the expert-parallel start checks.

Configs: tests/data/quant-configs/ (the bundled Qwen3-8B / Qwen3-30B-A3B configs with the quantization_config blocks
AutoAWQ, GPTQModel and llm-compressor write; README.md there). Engine code cited in src/specbench/specs/quant.py and
src/specbench/engines/sglang/start_checks.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specbench.plan.api import PlanOptions, plan_command
from specbench.specs.header_weights import tensor_bytes
from specbench.specs.model import model_spec_from_dict
from specbench.specs.quant import parse_quant

QC = Path(__file__).resolve().parent / "data/quant-configs"
L = "python -m sglang.launch_server --model-path "


def _qc(name: str) -> dict:
    return json.loads((QC / name / "config.json").read_text())


def _plan(cmd: str, **kw) -> dict:
    return plan_command(cmd, PlanOptions(gpu="H200", fixes=False, engine_version="0.5.15.post1", **kw))


@pytest.mark.parametrize("name,label,bpp,dropped", [
    # AWQ keeps qzeros: 0.5 + (2 B scale + 0.5 B zero) / 128
    ("qwen3_8b_awq", "int4-g128", 0.5 + 2.5 / 128, ()),
    # symmetric GPTQ on Marlin frees qzeros and (no desc_act) g_idx after loading: 0.5 + 2 / 128
    ("qwen3_8b_gptq", "int4-g128-sym", 0.5 + 2 / 128, ("qzeros", "g_idx")),
    ("qwen3_8b_w4a16", "int4-g128-sym", 0.5 + 2 / 128, ()),
    ("qwen3_8b_w4a16_asym", "int4-g128", 0.5 + 2.5 / 128, ()),
])
def test_int4_schemes_count_what_the_engine_keeps(name, label, bpp, dropped):
    q = parse_quant(_qc(name))
    assert q.default is not None and q.default.name == label
    assert q.default.bytes_per_param == pytest.approx(bpp)
    assert q.dropped_at_load == dropped


def test_gptq_variants():
    base = {"quant_method": "gptq", "bits": 4, "group_size": 128}
    asym = parse_quant({"quantization_config": {**base, "sym": False}})
    assert asym.default.name == "int4-g128" and asym.dropped_at_load == ()  # exllama kernel keeps its zeros
    act = parse_quant({"quantization_config": {**base, "sym": True, "desc_act": True}})
    assert act.dropped_at_load == ("qzeros",)  # act-order keeps g_idx
    g8 = parse_quant({"quantization_config": {**base, "bits": 8, "sym": True}})
    assert g8.default.name == "int8-g128-sym" and g8.default.bytes_per_param == pytest.approx(1 + 2 / 128)
    ch = parse_quant({"quantization_config": {**base, "group_size": -1, "sym": True}})
    assert ch.default.name == "int4-ch-sym" and ch.default.bytes_per_param == 0.5


def test_gptq_headers_leave_out_the_freed_zero_points():
    """A real GPTQ layer's tensors (qweight int32 [in/8, out], qzeros int32 [in/128, out/8], scales f16 [in/128, out],
    g_idx int32 [in]): symmetric on Marlin, only qweight + scales stay."""
    c = _qc("qwen3_8b_gptq")
    m = model_spec_from_dict(c, name="qwen3_8b_gptq")
    i, o = 4096, 12288
    layer = [("model.layers.0.mlp.up_proj.qweight", "I32", (i // 8, o)),
             ("model.layers.0.mlp.up_proj.qzeros", "I32", (i // 128, o // 8)),
             ("model.layers.0.mlp.up_proj.scales", "F16", (i // 128, o)),
             ("model.layers.0.mlp.up_proj.g_idx", "I32", (i,))]
    assert tensor_bytes(m, layer, 1) == i // 8 * o * 4 + i // 128 * o * 2
    c["quantization_config"]["sym"] = False
    kept = model_spec_from_dict(c, name="asym")
    assert tensor_bytes(kept, layer, 1) == i // 8 * o * 4 + i // 128 * o // 8 * 4 + i // 128 * o * 2 + i * 4


def test_awq_plan_weighs_less_than_bf16_by_the_int4_share():
    awq = _plan(L + str(QC / "qwen3_8b_awq") + " --context-length 32768")
    gptq = _plan(L + str(QC / "qwen3_8b_gptq") + " --context-length 32768")
    bf16 = _plan(L + "Qwen/Qwen3-8B --context-length 32768")
    assert awq["status"] == gptq["status"] == "ok"
    assert awq["weights_quant_label"] == "awq (int4-g128)"
    # 6.95 G linear parameters: AWQ's zero points cost 0.5/128 B each (~25.9 MiB) more than symmetric GPTQ
    assert (awq["weights_gib"] - gptq["weights_gib"]) * 1024 == pytest.approx(6.946e9 * 0.5 / 128 / 2**20, rel=0.02)
    assert 5.0 < awq["weights_gib"] < bf16["weights_gib"] / 2.5


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
