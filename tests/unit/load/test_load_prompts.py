"""Exact-length prompts against a real byte-level BPE tokenizer trained here, and context clamping."""

from __future__ import annotations

import glob
import json
import os
import sysconfig
from pathlib import Path

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

from specbench.errors import UserError
from specbench.load.prompts import CONTEXT_MARGIN, ChatTokenizer, build_prompts, clamp_lengths

CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>'"
    " + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# A Llama-3-like template that uses bos_token and trim_blocks/lstrip_blocks.
BOS_TEMPLATE = """{{ bos_token }}{% for m in messages %}
  {% if m['role'] == 'user' %}
<|user|>{{ m['content'] | trim }}{{ eos_token }}
  {% endif %}
{% endfor %}
{% if add_generation_prompt %}<|assistant|>{% endif %}"""


def _train(out: Path, vocab: int, template: str, bos_post: bool = False) -> Path:
    files = sorted(glob.glob(os.path.join(sysconfig.get_paths()["stdlib"], "*.py")))[:60]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|begin|>"]
    tok.train_from_iterator(
        (open(f, encoding="utf-8", errors="ignore").read() for f in files),
        trainers.BpeTrainer(vocab_size=vocab, special_tokens=specials, show_progress=False,
                            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()),
    )
    if bos_post:  # the tokenizer adds BOS itself, as Llama's does
        bos = tok.token_to_id("<|begin|>")
        tok.post_processor = processors.TemplateProcessing(single="<|begin|> $A", special_tokens=[("<|begin|>", bos)])
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    out.mkdir(parents=True)
    tok.save(str(out / "tokenizer.json"))
    cfg = {"bos_token": {"content": "<|begin|>"} if bos_post else "<|endoftext|>", "eos_token": "<|im_end|>",
           "chat_template": template}
    (out / "tokenizer_config.json").write_text(json.dumps(cfg))
    return out


@pytest.fixture(scope="module")
def tok(tmp_path_factory: pytest.TempPathFactory) -> ChatTokenizer:
    return ChatTokenizer.from_dir(_train(tmp_path_factory.mktemp("t") / "tok", 2048, CHATML))


@pytest.fixture(scope="module")
def tiny_tok(tmp_path_factory: pytest.TempPathFactory) -> ChatTokenizer:
    """A 384-entry vocabulary like the project's tiny models: few whole-word tokens."""
    return ChatTokenizer.from_dir(_train(tmp_path_factory.mktemp("t") / "tiny", 384, CHATML))


@pytest.fixture(scope="module")
def bos_tok(tmp_path_factory: pytest.TempPathFactory) -> ChatTokenizer:
    return ChatTokenizer.from_dir(_train(tmp_path_factory.mktemp("t") / "bos", 1024, BOS_TEMPLATE, bos_post=True))


@pytest.mark.parametrize("target", [13, 14, 64, 128, 511, 2048])
def test_chat_prompts_have_exact_token_count(tok: ChatTokenizer, target: int) -> None:
    prompts = build_prompts(tok, n=8, prompt_tokens=target, mode="chat", seed=3)
    for p in prompts:
        assert p.mode == "chat" and p.n_tokens == target
        rendered = tok.render(p.messages)
        assert rendered.startswith("<|im_start|>user\n") and rendered.endswith("<|im_start|>assistant\n")
        assert len(tok.tokenizer.encode(rendered, add_special_tokens=False).ids) == target


@pytest.mark.parametrize("target", [1, 2, 100, 1000])
def test_text_prompts_count_with_special_tokens(tok: ChatTokenizer, bos_tok: ChatTokenizer, target: int) -> None:
    for t in (tok, bos_tok):
        if t is bos_tok and target == 1:
            continue  # BOS alone is the whole 1-token budget
        for p in build_prompts(t, n=4, prompt_tokens=target, mode="text", seed=1):
            assert len(t.tokenizer.encode(p.text, add_special_tokens=True).ids) == target


def test_tiny_vocabulary_still_exact(tiny_tok: ChatTokenizer) -> None:
    for target in (20, 97, 300):
        for p in build_prompts(tiny_tok, n=5, prompt_tokens=target, mode="chat", seed=9):
            assert tiny_tok.chat_count(p.messages) == target


def test_template_with_bos_token_and_trim_blocks(bos_tok: ChatTokenizer) -> None:
    msgs = [{"role": "user", "content": "  hi  "}]
    # trim_blocks + lstrip_blocks (as HF renders) remove the block tags' lines entirely
    assert bos_tok.render(msgs) == "<|begin|><|user|>hi<|im_end|>\n<|assistant|>"
    assert bos_tok.render(msgs, add_generation_prompt=False) == "<|begin|><|user|>hi<|im_end|>\n"
    p = build_prompts(bos_tok, n=1, prompt_tokens=50, mode="chat")[0]
    ids = bos_tok.tokenizer.encode(bos_tok.render(p.messages), add_special_tokens=False).ids
    assert len(ids) == 50 and ids[0] == bos_tok.tokenizer.token_to_id("<|begin|>")


def test_deterministic_and_distinct(tok: ChatTokenizer) -> None:
    a = build_prompts(tok, n=20, prompt_tokens=100, mode="chat", seed=7)
    b = build_prompts(tok, n=20, prompt_tokens=100, mode="chat", seed=7)
    c = build_prompts(tok, n=20, prompt_tokens=100, mode="chat", seed=8)
    assert a == b
    assert a != c
    assert len({p.messages[0]["content"] for p in a}) == 20
    # distinct prompts differ from their first words on, so no shared prefix beyond the template header
    firsts = {tok.tokenizer.encode(p.messages[0]["content"]).ids[:4].__repr__() for p in a}
    assert len(firsts) >= 18
    same = build_prompts(tok, n=5, prompt_tokens=100, mode="chat", seed=7, distinct=False)
    assert len({p.messages[0]["content"] for p in same}) == 1


def test_system_message_counts(tok: ChatTokenizer) -> None:
    p = build_prompts(tok, n=1, prompt_tokens=80, mode="chat", system="You are terse.")[0]
    assert p.messages[0] == {"role": "system", "content": "You are terse."}
    assert tok.chat_count(p.messages) == 80


def test_token_id_mode(tok: ChatTokenizer) -> None:
    ps = build_prompts(None, n=3, prompt_tokens=257, mode="ids", vocab_size=1000, seed=2)
    assert [len(p.token_ids) for p in ps] == [257] * 3
    assert all(0 <= i < 1000 for p in ps for i in p.token_ids)
    assert ps == build_prompts(None, n=3, prompt_tokens=257, mode="ids", vocab_size=1000, seed=2)
    assert len({p.token_ids for p in ps}) == 3
    withtok = build_prompts(tok, n=2, prompt_tokens=500, mode="ids")
    specials = tok.special_ids()
    assert specials and not any(i in specials for p in withtok for i in p.token_ids)


def test_user_errors(tok: ChatTokenizer, tmp_path: Path) -> None:
    overhead = tok.chat_count([{"role": "user", "content": ""}])
    with pytest.raises(UserError, match="chat template adds"):
        build_prompts(tok, n=1, prompt_tokens=overhead, mode="chat")
    with pytest.raises(UserError, match="tokenizer.json"):
        ChatTokenizer.from_dir(tmp_path)
    with pytest.raises(UserError, match="needs the model's tokenizer"):
        build_prompts(None, n=1, prompt_tokens=10, mode="chat")
    with pytest.raises(UserError, match="vocab_size"):
        build_prompts(None, n=1, prompt_tokens=10, mode="ids")


def test_clamp_shortens_prompt_first() -> None:
    # the incident: a "30k" prompt + 1024 output on a 32k-context SGLang server
    c = clamp_lengths(30000, 4096, 32768, margin=CONTEXT_MARGIN["sglang"])
    assert (c.prompt_tokens, c.output_tokens) == (32768 - 1 - 4096, 4096)
    assert c.clamped
    assert c.as_dict() == {"requested_prompt_tokens": 30000, "prompt_tokens": 28671, "output_tokens": 4096,
                           "context_len": 32768, "clamped": True, "requested_output_tokens": 4096, "margin": 1}
    ok = clamp_lengths(1024, 128, 32768, margin=CONTEXT_MARGIN["vllm"])
    assert not ok.clamped and ok.prompt_tokens == 1024
    edge = clamp_lengths(1024, 128, 1152, margin=0)  # vLLM allows prompt + output == max_model_len
    assert not edge.clamped
    assert clamp_lengths(1024, 128, 1152, margin=1).prompt_tokens == 1023
    assert clamp_lengths(10, 10, None).context_len is None


def test_clamp_shortens_output_when_prompt_minimum_does_not_fit() -> None:
    c = clamp_lengths(100, 5000, 4096, margin=1, min_prompt_tokens=12)
    assert (c.prompt_tokens, c.output_tokens) == (12, 4096 - 1 - 12)
    with pytest.raises(UserError):
        clamp_lengths(100, 10, 8, margin=1, min_prompt_tokens=8)
    with pytest.raises(UserError):
        clamp_lengths(0, 10, 100)


def test_project_tiny_model_tokenizer(tmp_path: Path) -> None:
    """The tokenizer `specbench models build` writes for the local engine (models_gen), exact in every mode."""
    gen = pytest.importorskip("specbench.models_gen.tokenizer")
    spec = gen.TokenizerSpec(corpus_lines=1500)
    gen.write_tokenizer(gen.train_tokenizer(spec), spec, tmp_path)
    ct = ChatTokenizer.from_dir(tmp_path)
    assert ct.chat_template and ct.special_tokens["eos_token"] == "<|im_end|>"
    for target in (30, 128, 1000):
        for p in build_prompts(ct, n=4, prompt_tokens=target, mode="chat", seed=target):
            assert len(ct.tokenizer.encode(ct.render(p.messages), add_special_tokens=False).ids) == target
        for p in build_prompts(ct, n=4, prompt_tokens=target, mode="text", seed=target):
            assert len(ct.tokenizer.encode(p.text).ids) == target
