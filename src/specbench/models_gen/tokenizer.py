"""Train the tiny byte-level BPE tokenizer and write it the way `PreTrainedTokenizerFast.save_pretrained` does.

Only `tokenizers` is used (no transformers, no torch). Files written into a model folder:
`tokenizer.json` (the trained tokenizer), `tokenizer_config.json` (special tokens, ChatML chat template,
`tokenizer_class`), `special_tokens_map.json`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

from specbench.errors import UserError
from specbench.models_gen.corpus import corpus_lines

# ids 0, 1, 2 in this order: the trainer puts special tokens first.
ENDOFTEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = (ENDOFTEXT, IM_START, IM_END)
BOS_TOKEN, EOS_TOKEN, PAD_TOKEN = ENDOFTEXT, IM_END, ENDOFTEXT

# ChatML, the same shape as Qwen's template without tools: every message, then the assistant header on request.
CHATML_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


@dataclass(frozen=True, slots=True)
class TokenizerSpec:
    vocab_size: int = 4096
    seed: int = 0
    corpus_lines: int = 6000
    model_max_length: int = 131072


def train_tokenizer(spec: TokenizerSpec) -> Tokenizer:
    """Train a byte-level BPE on the deterministic corpus; the vocabulary has exactly `spec.vocab_size` entries."""
    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=spec.vocab_size,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus_lines(spec.seed, spec.corpus_lines), trainer=trainer)
    got = tok.get_vocab_size()
    if got != spec.vocab_size:
        raise UserError(f"tokenizer training reached {got} tokens, not {spec.vocab_size}: use a smaller vocab_size")
    for i, t in enumerate(SPECIAL_TOKENS):
        if tok.token_to_id(t) != i:
            raise RuntimeError(f"special token {t} has id {tok.token_to_id(t)}, expected {i}")
    return tok


def special_token_ids() -> dict[str, int]:
    """bos/eos/pad ids as written into config.json and generation_config.json."""
    ids = {t: i for i, t in enumerate(SPECIAL_TOKENS)}
    return {"bos_token_id": ids[BOS_TOKEN], "eos_token_id": ids[EOS_TOKEN], "pad_token_id": ids[PAD_TOKEN]}


def tokenizer_config(spec: TokenizerSpec) -> dict[str, object]:
    """The `tokenizer_config.json` that `PreTrainedTokenizerFast.save_pretrained` would write for this tokenizer."""
    added = {
        str(i): {"content": t, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
                 "special": True}
        for i, t in enumerate(SPECIAL_TOKENS)
    }
    return {
        "add_bos_token": False,
        "add_eos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": added,
        "additional_special_tokens": [IM_START, IM_END],
        "bos_token": BOS_TOKEN,
        "chat_template": CHATML_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": EOS_TOKEN,
        "errors": "replace",
        "extra_special_tokens": {},
        "model_max_length": spec.model_max_length,
        "pad_token": PAD_TOKEN,
        "split_special_tokens": False,
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": None,
    }


def special_tokens_map() -> dict[str, object]:
    return {"additional_special_tokens": [IM_START, IM_END], "bos_token": BOS_TOKEN, "eos_token": EOS_TOKEN,
            "pad_token": PAD_TOKEN}


def write_tokenizer(tok: Tokenizer, spec: TokenizerSpec, folder: Path) -> None:
    """Write tokenizer.json, tokenizer_config.json and special_tokens_map.json into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"), pretty=True)
    _write_json(folder / "tokenizer_config.json", tokenizer_config(spec))
    _write_json(folder / "special_tokens_map.json", special_tokens_map())


def _write_json(path: Path, obj: object) -> None:
    path.write_text(json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
