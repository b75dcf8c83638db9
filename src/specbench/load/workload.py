"""A cell's prompts: a dataset (load/datasets.py) or random words, lengths drawn (load/lengths.py), each request
clamped to the context window and built to the exact token count the engine will see.

- Order: the dataset's conversations shuffled by the workload seed (the same for every server of the matrix, so
  the autoregressive and the speculative cells get the same requests), cycled when the cell needs more requests
  than the dataset holds (the engine's prefix cache can then serve a repeated prompt's head). `category` keeps
  one category's records.
- Lengths: `"fixed"` / `"uniform:.."` / `"normal:.."` targets are met exactly: a record longer than its target is
  cut at a token boundary, a shorter one is continued with the following records of its category ("\\n\\n" between
  them), and the last token or two are filled with vocabulary words where a cut cannot land exactly. `"data"`
  sends the record as written, cut only when it does not fit.
- Multi-turn (`multi_turn = true`, ShareGPT conversations): every user turn is one request whose context is the
  conversation so far with its recorded answers; the turns of a conversation follow each other in the send order.
  Too long a history loses its oldest turns first, then the newest message is cut.
- Modes: `chat` sends the turns as messages (counted through the chat template), `text` their contents joined by
  blank lines, `ids` that text's token ids (SGLang `/generate`, the tokenizer still needed to make them).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from specbench.errors import UserError
from specbench.load.datasets import RANDOM, Item, Turn, items, load_dataset
from specbench.load.lengths import LengthDist
from specbench.load.prompts import ChatTokenizer, Clamp, Prompt, PromptMode, _fit, build_prompts, clamp_lengths


@dataclass(frozen=True)
class WorkloadSpec:
    dataset: str = "specbench-mini"
    prompt_tokens: int = 256
    output_tokens: int = 64
    prompt_len: LengthDist = LengthDist()
    output_len: LengthDist = LengthDist()
    category: str | None = None
    multi_turn: bool = False
    seed: int = 0
    base_dir: str | None = None  # relative dataset paths are read from here (the matrix file's folder)


@dataclass(frozen=True)
class Workload:
    prompts: tuple[Prompt, ...]
    clamps: tuple[Clamp, ...]

    def clamp_summary(self) -> dict[str, Any]:
        """The cell's `clamp_json`: the one clamp when every request has the same lengths, else the largest
        lengths with `requests`, `requests_clamped`, `prompt_tokens_min`, `output_tokens_min`."""
        cs = self.clamps
        if len({(c.requested_prompt_tokens, c.requested_output_tokens, c.prompt_tokens, c.output_tokens)
                for c in cs}) <= 1:
            return cs[0].as_dict()
        return {
            "requested_prompt_tokens": max(c.requested_prompt_tokens for c in cs),
            "prompt_tokens": max(c.prompt_tokens for c in cs),
            "output_tokens": max(c.output_tokens for c in cs),
            "context_len": cs[0].context_len,
            "clamped": any(c.clamped for c in cs),
            "requested_output_tokens": max(c.requested_output_tokens for c in cs),
            "margin": cs[0].margin,
            "requests": len(cs),
            "requests_clamped": sum(c.clamped for c in cs),
            "prompt_tokens_min": min(c.prompt_tokens for c in cs),
            "output_tokens_min": min(c.output_tokens for c in cs),
        }


def build_workload(ws: WorkloadSpec, *, n: int, tokenizer: ChatTokenizer | None, mode: PromptMode,
                   context_len: int | None, margin: int, min_prompt: int, vocab_size: int | None = None) -> Workload:
    """`n` prompts (warm-up included), each with its clamp."""
    if n < 1:
        raise UserError(f"number of prompts must be >= 1 (got {n})")
    if ws.dataset == RANDOM:
        return _random(ws, n, tokenizer, mode, context_len, margin, min_prompt, vocab_size)
    if tokenizer is None:
        raise UserError(f"dataset {ws.dataset!r} needs the model's tokenizer to count (or make token ids of) its "
                        'text: set `tokenizer` in the matrix, or use dataset = "random"')
    return _from_dataset(ws, n, tokenizer, mode, context_len, margin, min_prompt)


def _random(ws: WorkloadSpec, n: int, tok: ChatTokenizer | None, mode: PromptMode, context_len: int | None,
            margin: int, min_prompt: int, vocab_size: int | None) -> Workload:
    for what, bad in (('prompt_len = "data"', ws.prompt_len.kind == "data"),
                      ('output_len = "data"', ws.output_len.kind == "data"),
                      ("category", ws.category is not None), ("multi_turn", ws.multi_turn)):
        if bad:
            raise UserError(f'{what} needs a dataset with text; the "random" dataset has none')
    rp, ro = random.Random(f"{ws.seed}:prompt"), random.Random(f"{ws.seed}:output")
    clamps = tuple(clamp_lengths(int(ws.prompt_len.draw(rp, ws.prompt_tokens) or 0),
                                 int(ws.output_len.draw(ro, ws.output_tokens) or 0), context_len,
                                 margin=margin, min_prompt_tokens=min_prompt) for _ in range(n))
    vs = vocab_size if (mode == "ids" and tok is None) else None
    if ws.prompt_len.kind == "fixed":
        prompts = build_prompts(tok, n=n, prompt_tokens=clamps[0].prompt_tokens, mode=mode, seed=ws.seed,
                                vocab_size=vs)
    else:
        prompts = [build_prompts(tok, n=1, prompt_tokens=c.prompt_tokens, mode=mode, seed=ws.seed * 7919 + i,
                                 vocab_size=vs)[0] for i, c in enumerate(clamps)]
    return Workload(tuple(dataclasses.replace(p, output_tokens=c.output_tokens) for p, c in zip(prompts, clamps)),
                    clamps)


def _order(its: list[Item], seed: int, n: int) -> list[int]:
    """Indices into `its`: conversations shuffled, each one's turns in order, cycled up to `n`."""
    convs: dict[int, list[int]] = {}
    for i, it in enumerate(its):
        convs.setdefault(it.conversation, []).append(i)
    keys = list(convs)
    random.Random(f"{seed}:order").shuffle(keys)
    flat = [i for k in keys for i in convs[k]]
    return [flat[j % len(flat)] for j in range(n)]


class _Counter:
    """How one prompt mode counts (and renders) a conversation."""

    def __init__(self, tok: ChatTokenizer, mode: PromptMode) -> None:
        self.tok, self.mode = tok, mode

    @staticmethod
    def text(msgs: Sequence[Turn]) -> str:
        return "\n\n".join(c for _, c in msgs)

    def ids(self, msgs: Sequence[Turn]) -> list[int]:
        return list(self.tok.tokenizer.encode(self.text(msgs), add_special_tokens=True).ids)

    def count(self, msgs: Sequence[Turn]) -> int:
        if self.mode == "chat":
            return self.tok.chat_count([{"role": r, "content": c} for r, c in msgs])
        if self.mode == "ids":
            return len(self.ids(msgs))
        return self.tok.count(self.text(msgs), add_special_tokens=True)

    def prompt(self, msgs: Sequence[Turn], n_tokens: int, output: int, category: str | None) -> Prompt:
        if self.mode == "chat":
            return Prompt(n_tokens, messages=tuple({"role": r, "content": c} for r, c in msgs),
                          output_tokens=output, category=category)
        if self.mode == "ids":
            return Prompt(n_tokens, token_ids=tuple(self.ids(msgs)), output_tokens=output, category=category)
        return Prompt(n_tokens, text=self.text(msgs), output_tokens=output, category=category)


def _output_of(it: Item, ws: WorkloadSpec, rng: random.Random, tok: ChatTokenizer) -> int:
    drawn = ws.output_len.draw(rng, ws.output_tokens)
    if drawn is not None:
        return drawn
    if it.output_tokens is not None:
        return it.output_tokens
    if it.reply:
        return max(1, tok.count(it.reply, add_special_tokens=False))
    raise UserError(f'{it.where}: output_len = "data" but this record has no `output_tokens` / `max_tokens` and no '
                    "recorded answer")


def _from_dataset(ws: WorkloadSpec, n: int, tok: ChatTokenizer, mode: PromptMode, context_len: int | None,
                  margin: int, min_prompt: int) -> Workload:
    ds = load_dataset(ws.dataset, ws.base_dir)
    its = items(ds, multi_turn=ws.multi_turn, category=ws.category)
    order = _order(its, ws.seed, n)
    ctr = _Counter(tok, mode)
    rp, ro = random.Random(f"{ws.seed}:prompt"), random.Random(f"{ws.seed}:output")
    prompts, clamps = [], []
    for j, i in enumerate(order):
        it = its[i]
        msgs = it.messages
        target = ws.prompt_len.draw(rp, ws.prompt_tokens)
        natural = ctr.count(msgs) if target is None else None
        clamp = clamp_lengths(target if target is not None else int(natural or 1), _output_of(it, ws, ro, tok),
                              context_len, margin=margin, min_prompt_tokens=min_prompt)
        if natural is not None and natural > clamp.prompt_tokens and ws.multi_turn:
            msgs = _drop_oldest(msgs, ctr, clamp.prompt_tokens)
            natural = ctr.count(msgs)
        if natural is not None and natural <= clamp.prompt_tokens:
            prompt = ctr.prompt(msgs, natural, clamp.output_tokens, it.category)
        else:
            exact = natural is None
            filler = _filler(its, i) if exact else _no_filler
            msgs = _fit_last(msgs, ctr, clamp.prompt_tokens, filler, tok, random.Random(f"{ws.seed}:fit:{j}"),
                             exact=exact)
            prompt = ctr.prompt(msgs, ctr.count(msgs), clamp.output_tokens, it.category)
        prompts.append(prompt)
        clamps.append(dataclasses.replace(clamp, prompt_tokens=prompt.n_tokens))
    return Workload(tuple(prompts), tuple(clamps))


def _drop_oldest(msgs: tuple[Turn, ...], ctr: _Counter, budget: int) -> tuple[Turn, ...]:
    """Drop the oldest non-system turns (a history starts with a user turn) while the whole is over `budget`."""
    head = tuple(t for t in msgs if t[0] == "system")
    rest = [t for t in msgs if t[0] != "system"]
    while len(rest) > 1 and ctr.count(head + tuple(rest)) > budget:
        rest.pop(0)
        while len(rest) > 1 and rest[0][0] != "user":  # a history starts with a user turn
            rest.pop(0)
    return head + tuple(rest)


def _no_filler() -> str:
    return ""


def _filler(its: list[Item], start: int) -> Callable[[], str]:
    """The next records' user texts of the same category, cycling."""
    cat = its[start].category
    pool = [it.messages[-1][1] for it in its if it.category == cat] or [its[start].messages[-1][1]]
    state = {"k": pool.index(its[start].messages[-1][1]) if its[start].messages[-1][1] in pool else 0}

    def nxt() -> str:
        state["k"] = (state["k"] + 1) % len(pool)
        return pool[state["k"]]
    return nxt


def _fit_last(msgs: tuple[Turn, ...], ctr: _Counter, target: int, filler: Callable[[], str], tok: ChatTokenizer,
              rng: random.Random, *, exact: bool) -> tuple[Turn, ...]:
    """The conversation with its last (user) message cut or continued so that it counts `target` tokens
    (`exact`) or at most `target`."""
    head = msgs[:-1]

    def count(content: str) -> int:
        return ctr.count(head + (("user", content),))

    overhead = count("")
    if overhead >= target:
        raise UserError(f"a prompt of {target} tokens cannot hold this record's other turns and template "
                        f"({overhead} tokens)")
    content = msgs[-1][1]
    if exact:
        for _ in range(10_000):
            if count(content) >= target:
                break
            more = filler()
            if not more:
                break
            content += "\n\n" + more
    ids = tok.tokenizer.encode(content, add_special_tokens=False).ids
    lo, hi = 0, len(ids)  # the longest prefix of the content's tokens that still fits
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(tok.tokenizer.decode(ids[:mid], skip_special_tokens=False)) <= target:
            lo = mid
        else:
            hi = mid - 1
    prefix = tok.tokenizer.decode(ids[:lo], skip_special_tokens=False)
    if exact and count(prefix) != target:  # a cut cannot land on the target: vocabulary words fill the rest
        base = prefix
        prefix = base + _fit(lambda t: count(base + t), target, count(base), tok.word_pool, rng)
    return head + (("user", prefix),)
