"""Weights per GPU from safetensors headers (specs/header_weights.py): real files written with `safetensors`, read
back by the resolver from a local folder, and the per-role TP rules checked against sums done by hand."""

from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors.numpy import save

from specbench.contracts_inputs import PlanOptions
from specbench.plan.api import plan_command
from specbench.specs.header_weights import tensor_bytes
from specbench.specs.model import model_spec_from_dict
from specbench.specs.resolve import load_model_spec
from test_plan_hub import CFG, expected_bytes, qwen3_tensors

GIB = 2**30


def _folder(tmp_path, cfg, tensors, name="m"):
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    (d / "model.safetensors").write_bytes(save(tensors))
    return d


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_dense_model_per_role_with_kv_heads_replicated_past_their_count(tmp_path, tp):
    m = load_model_spec(str(_folder(tmp_path, CFG, qwen3_tensors(CFG))))
    assert m.origin.source == "local folder" and m.origin.tensors
    assert tensor_bytes(m, m.origin.tensors, tp) == expected_bytes(CFG, tp)


def test_float32_checkpoint_is_counted_in_the_load_dtype_and_tied_lm_head_once():
    cfg = CFG | {"tie_word_embeddings": True}
    m = model_spec_from_dict(cfg)
    f32 = [(n, "F32", a.shape) for n, a in qwen3_tensors(cfg).items()]
    bf16 = [(n, "BF16", a.shape) for n, a in qwen3_tensors(cfg).items()]
    pad_v = 1024  # 1000 padded to 64
    lm_head = pad_v * 64 * 2
    assert tensor_bytes(m, f32, 1) == tensor_bytes(m, bf16, 1) == expected_bytes(cfg, 1) - lm_head


def test_fp8_block_scales_shard_with_their_weight_and_a_per_tensor_scale_stays_whole():
    m = model_spec_from_dict(CFG)
    tensors = [("model.layers.0.mlp.down_proj.weight", "F8_E4M3", (64, 128)),
               ("model.layers.0.mlp.down_proj.weight_scale_inv", "F32", (1, 2)),
               ("model.layers.0.mlp.gate_proj.weight_scale", "F32", ()),
               ("model.layers.0.mlp.down_proj.bias", "BF16", (64,))]
    # down_proj row-parallel: weight and its block scale 1/2 at TP2, the bias whole; the scalar scale whole
    assert tensor_bytes(m, tensors, 2) == 64 * 128 // 2 + 1 * 4 + 4 + 64 * 2


def test_moe_router_is_replicated_and_experts_split():
    m = model_spec_from_dict(CFG)
    tensors = [("model.layers.0.mlp.gate.weight", "BF16", (8, 64)),
               ("model.layers.0.mlp.experts.3.up_proj.weight", "BF16", (32, 64)),
               ("model.layers.0.mlp.experts.3.down_proj.weight", "BF16", (64, 32)),
               ("model.layers.0.mlp.experts.gate_up_proj_blocks", "U8", (8, 64, 2, 16))]  # gpt-oss fused, MXFP4
    assert tensor_bytes(m, tensors, 4) == 8 * 64 * 2 + (32 * 64 * 2) // 4 * 2 + 8 * 64 * 2 * 16 // 4


def test_eagle3_drafter_allocates_its_embedding_even_when_the_checkpoint_has_none():
    cfg = CFG | {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "num_hidden_layers": 1,
                 "draft_vocab_size": 256}
    m = model_spec_from_dict(cfg)
    assert m.draft is not None and m.draft.kind == "eagle3"
    tensors = [("midlayer.self_attn.q_proj.weight", "BF16", (64, 128)), ("fc.weight", "BF16", (64, 192)),
               ("lm_head.weight", "BF16", (256, 64)), ("t2d", "BOOL", (1000,)), ("d2t", "I64", (256,))]
    own = 64 * 128 // 2 * 2 + 64 * 192 * 2 + (256 // 2) * 64 * 2 + 256 * 8
    assert tensor_bytes(m, tensors, 2, draft_kind="eagle3") == own + (1024 // 2) * 64 * 2
    with_embed = tensors + [("model.embed_tokens.weight", "BF16", (1000, 64))]
    assert tensor_bytes(m, with_embed, 2, draft_kind="eagle3") == own + (1024 // 2) * 64 * 2


def test_plan_takes_header_weights_and_falls_back_to_the_estimate_for_online_quantization(tmp_path):
    d = _folder(tmp_path, CFG, {k: v.astype(np.float16) for k, v in qwen3_tensors(CFG).items()})
    base = ["python", "-m", "sglang.launch_server", "--model-path", str(d), "--tp", "2"]
    p = plan_command(base, PlanOptions(fixes=False))
    assert p["model_source"] == "local folder" and p["weights_source"] == "safetensors headers"
    assert p["weights_gib"] == round(expected_bytes(CFG, 2) / GIB, 3)
    assert not any(n.startswith("weights estimated") for n in p["model_notes"])
    q = plan_command(base + ["--quantization", "fp8"], PlanOptions(fixes=False))
    assert q["weights_source"].startswith("estimated from config")
    assert any(n.startswith("weights estimated") for n in q["model_notes"])


@pytest.mark.parametrize("junk", [b"garbage", b"\x10\x00\x00\x00\x00\x00\x00\x00" + b'{"a": 1}       ',
                                  save({"w": np.zeros((4, 4), dtype=np.float16)})[:-8]])
def test_damaged_safetensors_file_is_one_line_naming_it(tmp_path, junk):
    """A half-downloaded or foreign file beside config.json: the user's one-line error, not a traceback."""
    from run_helpers import cli

    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(CFG))
    (d / "model.safetensors").write_bytes(junk)
    r = cli("plan", "--", "python", "-m", "sglang.launch_server", "--model-path", str(d))
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith(f"specbench: error: {d / 'model.safetensors'}: not a readable safetensors file")
    assert len(r.stderr.strip().splitlines()) == 1


def test_a_header_dtype_the_table_does_not_know_is_refused_not_counted_as_two_bytes():
    from specbench.errors import ConfigError

    m = model_spec_from_dict(CFG)
    assert tensor_bytes(m, [("model.layers.0.mlp.up_proj.qweight", "I32", (4, 8))], 1) == 4 * 8 * 4
    assert tensor_bytes(m, [("model.layers.0.mlp.up_proj.weight_packed", "F4", (4, 8))], 1) == 16
    with pytest.raises(ConfigError, match="has dtype 'F6_E3M2', which this planner cannot size"):
        tensor_bytes(m, [("model.layers.0.mlp.up_proj.weight", "F6_E3M2", (4, 8))], 1)
