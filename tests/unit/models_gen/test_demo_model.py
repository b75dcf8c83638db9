"""The demo's real model (models_gen/smollm2.py): a GGUF -> Hugging Face folder conversion, then one live boot.

Fast tests write a small Llama GGUF with gguf's own GGUFWriter (q/k permuted the way convert_hf_to_gguf.py does,
Q8_0 and F32 tensors, a byte-level BPE vocabulary and a chat template), convert it and read the folder back.
The engine test (marked `engine`) boots the real SmolLM2-135M-Instruct that `make models` installs
(tools/engine/install_smollm2.sh) with n-gram speculative decoding, once.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import httpx
import numpy as np
import pytest
from tokenizers import Tokenizer, pre_tokenizers

from specbench.errors import UserError
from specbench.models_gen import smollm2

gguf = pytest.importorskip("gguf")

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TEMPLATE = "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
H, FF, HEADS, KV, LAYERS = 64, 128, 4, 2, 3


def _permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """convert_hf_to_gguf.py::LlamaModel.permute (what the GGUF stores for q_proj / k_proj)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _vocab() -> tuple[list[str], list[tuple[str, str]]]:
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    merges = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("l", "l"), ("he", "ll")]
    return SPECIALS + alphabet + ["".join(m) for m in merges], merges


def _write_gguf(path: Path) -> dict[str, np.ndarray]:
    """A 3-layer Llama GGUF; returns the Hugging Face tensors it was made from."""
    rng = np.random.default_rng(0)
    tokens, merges = _vocab()
    v = len(tokens)
    hf: dict[str, np.ndarray] = {"model.embed_tokens.weight": rng.normal(0, 0.5, (v, H)).astype(np.float32),
                                 "model.norm.weight": rng.normal(1, 0.1, H).astype(np.float32)}
    w = gguf.GGUFWriter(str(path), "llama")
    for key, val in (("block_count", LAYERS), ("context_length", 512), ("embedding_length", H),
                     ("feed_forward_length", FF), ("head_count", HEADS), ("head_count_kv", KV)):
        getattr(w, f"add_{key}")(val)
    w.add_rope_freq_base(50000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(v)
    w.add_tokenizer_model("gpt2")
    w.add_token_list(tokens)
    w.add_token_types([3] * 3 + [1] * (v - 3))
    w.add_token_merges([f"{a} {b}" for a, b in merges])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_pad_token_id(0)
    w.add_chat_template(TEMPLATE)
    q8 = gguf.GGMLQuantizationType.Q8_0
    w.add_tensor("token_embd.weight", gguf.quants.quantize(hf["model.embed_tokens.weight"], q8), raw_dtype=q8)
    w.add_tensor("output_norm.weight", hf["model.norm.weight"])
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        shapes = {"self_attn.q_proj": (H, H), "self_attn.k_proj": (KV * H // HEADS, H),
                  "self_attn.v_proj": (KV * H // HEADS, H), "self_attn.o_proj": (H, H),
                  "mlp.gate_proj": (FF, H), "mlp.up_proj": (FF, H), "mlp.down_proj": (H, FF)}
        for name, shape in shapes.items():
            hf[p + name + ".weight"] = rng.normal(0, 0.1, shape).astype(np.float32)
        hf[p + "input_layernorm.weight"] = rng.normal(1, 0.1, H).astype(np.float32)
        hf[p + "post_attention_layernorm.weight"] = rng.normal(1, 0.1, H).astype(np.float32)
        g = {v_: k for k, v_ in smollm2._BLOCK.items()}
        for name in ("input_layernorm", "post_attention_layernorm", "self_attn.v_proj", "self_attn.o_proj"):
            w.add_tensor(f"blk.{i}.{g[name]}.weight", hf[p + name + ".weight"])
        w.add_tensor(f"blk.{i}.attn_q.weight", _permute(hf[p + "self_attn.q_proj.weight"], HEADS))
        w.add_tensor(f"blk.{i}.attn_k.weight", _permute(hf[p + "self_attn.k_proj.weight"], KV))
        for name in ("mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"):  # Q8_0 blocks of 32 along the rows
            w.add_tensor(f"blk.{i}.{g[name]}.weight", gguf.quants.quantize(hf[p + name + ".weight"], q8),
                         raw_dtype=q8)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return hf


def _read_bf16(path: Path) -> dict[str, np.ndarray]:
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        assert h["dtype"] == "BF16"
        a, b = h["data_offsets"]
        bits = np.frombuffer(raw[8 + n + a:8 + n + b], dtype=np.uint16).astype(np.uint32) << 16
        out[name] = bits.view(np.float32).reshape(h["shape"])
    return out


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, np.ndarray], list]:
    root = tmp_path_factory.mktemp("gguf")
    hf = _write_gguf(root / "m.gguf")
    built = smollm2.build(root / "m.gguf", root / "out", draft_layers=(1,))
    return root / "out", hf, built


def test_config_comes_from_the_gguf_metadata(converted) -> None:
    out, hf, built = converted
    assert [(b.name, b.layers, b.built) for b in built] == [("smollm2-135m", 3, True),
                                                            ("smollm2-135m-draft-L1", 1, True)]
    cfg = json.loads((out / "smollm2-135m" / "config.json").read_text())
    assert (cfg["architectures"], cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]) == (
        ["LlamaForCausalLM"], H, FF, LAYERS)
    assert (cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]) == (HEADS, KV, H // HEADS)
    assert (cfg["rope_theta"], cfg["max_position_embeddings"], cfg["vocab_size"]) == (50000.0, 512,
                                                                                     len(_vocab()[0]))
    assert cfg["tie_word_embeddings"] is True and (cfg["bos_token_id"], cfg["eos_token_id"]) == (1, 2)
    draft = json.loads((out / "smollm2-135m-draft-L1" / "config.json").read_text())
    assert draft["num_hidden_layers"] == 1 and draft["hidden_size"] == H


def test_weights_are_unpermuted_and_dequantized(converted) -> None:
    out, hf, _ = converted
    got = _read_bf16(out / "smollm2-135m" / "model.safetensors")
    assert set(got) == set(hf)  # tied: no lm_head
    for name, ref in hf.items():
        quantized = name.endswith(("mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
                                   "embed_tokens.weight"))
        tol = 0.02 * float(np.abs(ref).max()) if quantized else 0.008 * float(np.abs(ref).max())  # Q8_0 / bf16
        assert got[name].shape == ref.shape, name
        assert float(np.abs(got[name] - ref).max()) <= tol, name
    draft = _read_bf16(out / "smollm2-135m-draft-L1" / "model.safetensors")
    assert {k for k in draft if ".layers." in k} == {k for k in hf if k.startswith("model.layers.0.")}
    np.testing.assert_array_equal(draft["model.norm.weight"], got["model.norm.weight"])


def test_bf16_rounds_to_nearest_even() -> None:
    x = np.array([1.0, -2.5, 1 + 2**-8, 1 + 3 * 2**-8, 3.0e38], dtype=np.float32)
    back = (smollm2.to_bf16_bits(x).astype(np.uint32) << 16).view(np.float32)
    assert back.tolist()[:4] == [1.0, -2.5, 1.0, 1 + 4 * 2**-8]  # ties go to the even mantissa
    assert abs(back[4] - 3.0e38) / 3.0e38 < 2**-8


def test_tokenizer_and_chat_template_are_the_gguf_s(converted) -> None:
    out, _, _ = converted
    tok = Tokenizer.from_file(str(out / "smollm2-135m" / "tokenizer.json"))
    enc = tok.encode("<|im_start|>hello the 2024")
    assert enc.ids[0] == 1 and tok.decode(enc.ids, skip_special_tokens=False) == "<|im_start|>hello the 2024"
    assert tok.token_to_id("hell") in enc.ids and tok.token_to_id("Ġthe") in enc.ids
    assert [t for t in enc.tokens if t in "0123456789"] == list("2024")  # llama.cpp 'smollm': one digit a token
    cfg = json.loads((out / "smollm2-135m" / "tokenizer_config.json").read_text())
    assert cfg["chat_template"] == TEMPLATE and (cfg["bos_token"], cfg["eos_token"]) == ("<|im_start|>", "<|im_end|>")
    assert cfg["added_tokens_decoder"]["2"]["special"] is True


def test_second_build_keeps_current_folders(converted) -> None:
    out, _, _ = converted
    assert smollm2.all_current(out, (1,)) and not smollm2.all_current(out, (2,))
    again = smollm2.build(Path("/nonexistent.whl"), out, draft_layers=(1,))  # current: the source is not read
    assert [b.built for b in again] == [False, False]


def test_bad_sources_are_one_line_errors(tmp_path: Path) -> None:
    (tmp_path / "x.whl").write_bytes(b"not a wheel")
    with pytest.raises(UserError, match="sha256"):
        smollm2.build(tmp_path / "x.whl", tmp_path / "out")
    with pytest.raises(UserError, match="not found"):
        smollm2.build(tmp_path / "missing.whl", tmp_path / "out")


# -------------------------------------------------------------------------------- one live boot (engine)


@pytest.mark.engine
def test_real_model_speaks_and_ngram_accepts(tmp_path: Path) -> None:
    from engine_boot import engine_venv_or_skip, running, wait_ready
    from proc_helpers import free_port
    from specbench.commands.models import default_models_dir
    from specbench.engines import prometheus
    from specbench.engines.vllm import local as vl

    venv = engine_venv_or_skip()
    model = default_models_dir() / smollm2.TARGET_NAME
    if not smollm2.is_current(model, None):
        msg = f"{model} not installed (make models: tools/engine/install_smollm2.sh)"
        if os.environ.get("CI"):
            pytest.fail(msg + " - under CI `make test` installs it")
        pytest.skip(msg)
    cfg = vl.LocalServerConfig(model=str(model), port=free_port(), max_model_len=1024, max_num_seqs=2,
                               speculative=vl.DraftModelSpec("", 3, {"method": "ngram", "prompt_lookup_min": 2,
                                                                        "prompt_lookup_max": 4}))
    with running(cfg, venv, tmp_path / "server.log") as proc:
        wait_ready(proc, cfg)
        with httpx.Client(base_url=cfg.base_url, timeout=120) as c:
            def chat(text: str) -> str:
                r = c.post("/v1/chat/completions", json={"model": cfg.served_name, "temperature": 0,
                                                          "max_tokens": 64,
                                                          "messages": [{"role": "user", "content": text}]})
                assert r.status_code == 200, r.text
                return r.json()["choices"][0]["message"]["content"]

            assert "paris" in chat("What is the capital of France? Answer in one sentence.").lower()
            # a plain completion of a repeating list: the model continues the loop, which prompt lookup drafts
            loop = ", ".join(["red", "green", "blue", "yellow"] * 6) + ","
            r = c.post("/v1/completions", json={"model": cfg.served_name, "prompt": loop, "temperature": 0,
                                                "max_tokens": 48, "ignore_eos": True})
            assert r.status_code == 200, r.text
            continued = r.json()["choices"][0]["text"]
            metrics = prometheus.spec_decode(c.get("/metrics").text)
    assert continued.count("green") >= 2, continued
    assert metrics.get("spec_decode_num_drafts_total", 0.0) > 0, metrics
    assert 1.0 < metrics["mean_acceptance_length"] <= 4.0, metrics  # k = 3: accept length in (1, k + 1]
