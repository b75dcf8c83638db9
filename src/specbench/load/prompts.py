"""Prompts of an exact token length, measured with the model's own tokenizer and chat template.

Three modes:
- ``chat``: one user message; the count is that of the chat template rendered the way HF
  ``apply_chat_template(tokenize=True)`` does it (jinja2 sandbox, trim_blocks, lstrip_blocks; the
  rendered text encoded with ``add_special_tokens=False``). This is what vLLM and SGLang do for
  ``/v1/chat/completions`` (vllm/entrypoints/chat_utils.py renders, then tokenizes without special
  tokens; sglang/srt/entrypoints/openai/serving_chat.py calls ``apply_chat_template(tokenize=True)``).
- ``text``: a raw prompt for ``/v1/completions``; counted with ``add_special_tokens=True`` because both
  engines tokenize completion prompts that way (BOS is added when the tokenizer's post-processor does).
- ``ids``: random token ids of exact length, no tokenizer needed (SGLang ``/generate`` with
  ``input_ids`` on a server started with ``--skip-tokenizer-init``).

The text is built from words of the tokenizer's own vocabulary, counted, and adjusted until the
count is exactly the target. Every prompt is different (seeded), so the engine's prefix cache cannot
serve one request from another unless ``distinct=False`` is asked for.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from specbench.errors import UserError

if TYPE_CHECKING:
    import jinja2

PromptMode = Literal["chat", "text", "ids"]

# Tokens an engine must leave free between prompt + output and the context length.
# SGLang refuses when `input + max_new_tokens >= context_len`
#   (sglang/srt/managers/tokenizer_manager.py::TokenizerManager._validate_one_request), so one token.
# vLLM 0.32 refuses only a prompt longer than max_model_len (vllm/renderers/params.py::_token_len_check) and
#   silently cuts max_tokens to `max_model_len - prompt` (vllm/entrypoints/serve/utils/api_utils.py::
#   get_max_tokens), so prompt + output == max_model_len is the most that keeps the requested output: none.
#   (Measured on the local engine: tests/engine/test_load_engine.py.)
CONTEXT_MARGIN: dict[str, int] = {"sglang": 1, "vllm": 0, "local": 0}

_WORD = re.compile(r"^ [a-z]{2,12}$")


@dataclass(frozen=True, slots=True)
class Prompt:
    """One request's prompt. Exactly one of `text`, `messages`, `token_ids` is set.

    `output_tokens` is this request's own output length (None: the LoadSpec's); `category` is the dataset
    record's, carried to the request's row in the store."""

    n_tokens: int
    text: str | None = None
    messages: tuple[dict[str, str], ...] | None = None
    token_ids: tuple[int, ...] | None = None
    output_tokens: int | None = None
    category: str | None = None

    @property
    def mode(self) -> PromptMode:
        if self.messages is not None:
            return "chat"
        if self.token_ids is not None:
            return "ids"
        return "text"


@dataclass(frozen=True, slots=True)
class Clamp:
    """What the context length did to a requested (prompt, output) pair."""

    requested_prompt_tokens: int
    prompt_tokens: int
    requested_output_tokens: int
    output_tokens: int
    context_len: int | None
    margin: int

    @property
    def clamped(self) -> bool:
        return (self.prompt_tokens, self.output_tokens) != (self.requested_prompt_tokens, self.requested_output_tokens)

    def as_dict(self) -> dict[str, Any]:
        """The store's `clamp_json` (docs/structures.md), plus the requested output and the margin."""
        return {
            "requested_prompt_tokens": self.requested_prompt_tokens,
            "prompt_tokens": self.prompt_tokens,
            "output_tokens": self.output_tokens,
            "context_len": self.context_len,
            "clamped": self.clamped,
            "requested_output_tokens": self.requested_output_tokens,
            "margin": self.margin,
        }


def clamp_lengths(
    prompt_tokens: int, output_tokens: int, context_len: int | None, *, margin: int = 0, min_prompt_tokens: int = 1
) -> Clamp:
    """Fit prompt + output under `context_len - margin`, shortening the prompt first.

    The output is only shortened when even a `min_prompt_tokens` prompt (e.g. the chat template's own
    tokens) would not fit next to it.
    """
    if prompt_tokens < 1 or output_tokens < 1:
        raise UserError(f"prompt and output tokens must be >= 1 (got {prompt_tokens} and {output_tokens})")
    if context_len is None:
        return Clamp(prompt_tokens, prompt_tokens, output_tokens, output_tokens, None, margin)
    budget = context_len - margin
    if budget < min_prompt_tokens + 1:
        raise UserError(
            f"context length {context_len} (margin {margin}) leaves no room for a {min_prompt_tokens}-token prompt"
            " and one output token"
        )
    out = min(output_tokens, budget - min_prompt_tokens)
    prompt = min(prompt_tokens, budget - out)
    return Clamp(prompt_tokens, prompt, output_tokens, out, context_len, margin)


# ---------------------------------------------------------------------------------------------
# tokenizer + chat template


def _token_text(value: Any) -> str | None:
    """tokenizer_config.json writes special tokens as a string or as an AddedToken dict."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _raise_exception(message: str) -> None:
    raise UserError(f"chat template raised: {message}")


def _tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None,
            sort_keys: bool = False) -> str:
    # transformers/utils/chat_template_utils.py::_compile_jinja_template::tojson
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


@dataclass(frozen=True)
class ChatTokenizer:
    """A model folder's `tokenizer.json` plus its chat template and special tokens."""

    tokenizer: Any  # tokenizers.Tokenizer
    chat_template: str | None
    special_tokens: dict[str, str] = field(default_factory=dict)
    source: str = ""

    @classmethod
    def from_dir(cls, model_dir: str | Path) -> ChatTokenizer:
        from tokenizers import Tokenizer

        d = Path(model_dir)
        tj = d / "tokenizer.json"
        if not tj.is_file():
            raise UserError(f"{d}: no tokenizer.json (a model folder with a fast tokenizer is needed)")
        try:
            tok = Tokenizer.from_file(str(tj))
        except Exception as exc:  # the tokenizers library raises its own Exception type
            raise UserError(f"{tj}: cannot load tokenizer: {exc}") from None
        cfg: dict[str, object] = {}
        tc = d / "tokenizer_config.json"
        if tc.is_file():
            try:
                loaded = json.loads(tc.read_text(encoding="utf-8"))
            except json.JSONDecodeError as exc:
                raise UserError(f"{tc}: not JSON ({exc.msg} at line {exc.lineno})") from None
            if not isinstance(loaded, dict):
                raise UserError(f"{tc}: not a JSON object")
            cfg = loaded
        template = cfg.get("chat_template")
        if isinstance(template, list):  # [{"name": "default", "template": ...}, ...]
            named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
            template = named.get("default") or next(iter(named.values()), None)
        jinja_file = d / "chat_template.jinja"  # transformers >= 4.43 saves the template here
        if not template and jinja_file.is_file():
            template = jinja_file.read_text(encoding="utf-8")
        specials = {
            k: t
            for k in ("bos_token", "eos_token", "unk_token", "pad_token")
            if (t := _token_text(cfg.get(k))) is not None
        }
        return cls(tokenizer=tok, chat_template=template if isinstance(template, str) and template else None, special_tokens=specials, source=str(d))

    def count(self, text: str, *, add_special_tokens: bool) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=add_special_tokens).ids)

    def render(self, messages: Sequence[dict[str, str]], *, add_generation_prompt: bool = True) -> str:
        """Render the chat template the way HF `apply_chat_template` does."""
        if not self.chat_template:
            raise UserError(f"{self.source or 'tokenizer'}: no chat_template (use prompt mode 'text' or 'ids')")
        return _compiled(self.chat_template).render(
            messages=list(messages),
            add_generation_prompt=add_generation_prompt,
            tools=None,
            documents=None,
            **self.special_tokens,
        )

    def chat_count(self, messages: Sequence[dict[str, str]]) -> int:
        return self.count(self.render(messages), add_special_tokens=False)

    def vocab_size(self) -> int:
        return int(self.tokenizer.get_vocab_size(with_added_tokens=True))

    def special_ids(self) -> frozenset[int]:
        ids = {self.tokenizer.token_to_id(t) for t in self.special_tokens.values()}
        try:
            ids |= set(self.tokenizer.get_added_tokens_decoder().keys())
        except AttributeError:
            pass
        return frozenset(i for i in ids if i is not None)

    @cached_property
    def word_pool(self) -> tuple[str, ...]:
        """Vocabulary entries that decode to ' word' and encode back to that one token.

        Falls back to any non-special single token that round-trips when the vocabulary is tiny.
        """
        return _word_pool(self)


_TEMPLATES: dict[str, jinja2.Template] = {}


def _compiled(template: str) -> jinja2.Template:
    # transformers/utils/chat_template_utils.py::_compile_jinja_template
    if template not in _TEMPLATES:
        import jinja2.ext
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
        env.filters["tojson"] = _tojson
        env.globals["raise_exception"] = _raise_exception
        env.globals["strftime_now"] = _strftime_now
        try:
            _TEMPLATES[template] = env.from_string(template)
        except jinja2.TemplateSyntaxError as exc:
            raise UserError(f"chat template: {exc.message} (line {exc.lineno})") from None
    return _TEMPLATES[template]


def _word_pool(ct: ChatTokenizer) -> tuple[str, ...]:
    tok = ct.tokenizer
    special = ct.special_ids()
    words: list[str] = []
    loose: list[str] = []
    for _, i in sorted(tok.get_vocab(with_added_tokens=False).items(), key=lambda kv: kv[1]):
        if i in special:
            continue
        s = tok.decode([i], skip_special_tokens=False)
        if not s or "\ufffd" in s or not s.isprintable():
            continue
        if tok.encode(s, add_special_tokens=False).ids != [i]:
            continue
        (words if _WORD.match(s) else loose).append(s)
    pool = tuple(words) if len(words) >= 32 else tuple(words + [s for s in loose if s.strip()])
    if not pool:
        raise UserError(f"{ct.source or 'tokenizer'}: no vocabulary entry round-trips to one token")
    return pool


# ---------------------------------------------------------------------------------------------
# exact-length search


def _fit(count: Callable[[str], int], target: int, overhead: int, pool: Sequence[str], rng: random.Random) -> str:
    """Words from `pool` whose text makes `count(text) == target` exactly."""
    words = [rng.choice(pool) for _ in range(max(0, target - overhead))]
    for attempt in range(200):
        n = count("".join(words))
        if n == target:
            return "".join(words)
        if attempt >= 6 and words:
            # token merges across word boundaries made the count jump over the target: reshuffle the tail
            k = min(len(words), 1 + attempt // 20)
            words[-k:] = [rng.choice(pool) for _ in range(k)]
            n = count("".join(words))
            if n == target:
                return "".join(words)
        if n < target:
            words.extend(rng.choice(pool) for _ in range(target - n))
        elif words:
            del words[max(0, len(words) - (n - target)):]
        else:
            break
    raise UserError(f"cannot build a prompt of exactly {target} tokens with this tokenizer (closest reached: {n})")


def build_prompts(
    tokenizer: ChatTokenizer | None,
    *,
    n: int,
    prompt_tokens: int,
    mode: PromptMode = "chat",
    seed: int = 0,
    distinct: bool = True,
    vocab_size: int | None = None,
    system: str | None = None,
) -> list[Prompt]:
    """`n` prompts of exactly `prompt_tokens` tokens each (as the engine will count them).

    `distinct=False` repeats one prompt (to measure the prefix cache on purpose). In `ids` mode without a
    tokenizer, `vocab_size` bounds the random ids.
    """
    if n < 0:
        raise UserError(f"number of prompts must be >= 0 (got {n})")
    if prompt_tokens < 1:
        raise UserError(f"prompt tokens must be >= 1 (got {prompt_tokens})")
    if mode == "ids":
        return _id_prompts(tokenizer, n=n, prompt_tokens=prompt_tokens, seed=seed, distinct=distinct,
                           vocab_size=vocab_size)
    if tokenizer is None:
        raise UserError(f"prompt mode '{mode}' needs the model's tokenizer (a folder with tokenizer.json)")
    pool = tokenizer.word_pool
    head = [{"role": "system", "content": system}] if system else []

    if mode == "chat":
        def count(text: str) -> int:
            return tokenizer.chat_count([*head, {"role": "user", "content": text}])
    elif mode == "text":
        def count(text: str) -> int:
            return tokenizer.count(text, add_special_tokens=True)
    else:
        raise UserError(f"unknown prompt mode '{mode}' (chat, text or ids)")

    overhead = count("")
    if prompt_tokens <= overhead:
        raise UserError(
            f"prompt tokens {prompt_tokens} is not more than the {overhead} tokens the "
            f"{'chat template' if mode == 'chat' else 'tokenizer'} adds by itself"
        )
    out: list[Prompt] = []
    for i in range(n):
        if out and not distinct:
            out.append(out[0])
            continue
        text = _fit(count, prompt_tokens, overhead, pool, random.Random(seed * 1_000_003 + i))
        if mode == "chat":
            out.append(Prompt(prompt_tokens, messages=(*head, {"role": "user", "content": text})))
        else:
            out.append(Prompt(prompt_tokens, text=text))
    return out


def _id_prompts(
    tokenizer: ChatTokenizer | None, *, n: int, prompt_tokens: int, seed: int, distinct: bool, vocab_size: int | None
) -> list[Prompt]:
    if tokenizer is not None:
        size = tokenizer.vocab_size()
        banned = tokenizer.special_ids()
    elif vocab_size is not None:
        size, banned = vocab_size, frozenset()
    else:
        raise UserError("prompt mode 'ids' needs a tokenizer or the model's vocab_size")
    if size - len(banned) < 2:
        raise UserError(f"vocab_size {size} is too small for random token ids")
    out: list[Prompt] = []
    for i in range(n):
        if out and not distinct:
            out.append(out[0])
            continue
        rng = random.Random(seed * 1_000_003 + i)
        ids: list[int] = []
        while len(ids) < prompt_tokens:
            t = rng.randrange(size)
            if t not in banned:
                ids.append(t)
        out.append(Prompt(prompt_tokens, token_ids=tuple(ids)))
    return out
