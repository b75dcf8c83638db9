"""Per-request identity and counts: what a response says of itself, checked against what the client knows (pure
functions, run after the run, off the measured window).

- The model: every OpenAI-route event names the model that answered (`model`). Both engines echo the served name
  the request asked for (vllm/entrypoints/openai/serving_completion.py `model_name`; sglang/srt/entrypoints/openai/
  serving_completions.py `request.model`), and the client asks for the one /v1/models listed at boot
  (matrix/served_model.py): an answer naming another model (a server that switched models after the boot's check, or
  lists one model and answers with another) is a request error naming both (`model_problem`).
- Prompt tokens: the prompt_tokens of a request is the client's own count of what it sent (token ids, or its
  tokenizer over the text or the chat template: load/prompts.py); the server's `usage.prompt_tokens` is checked
  against it, within PROMPT_ABS tokens or PROMPT_REL of the count (a BOS or a template's edge), never put in its
  place (`prompt_problem`).
- Content events: an event is content when it carries text (or reasoning, a tool call) or token ids; a server may
  send events with neither between tokens (a held-back partial character, a keep-alive): those are not tokens, and
  the times of a request are those of its content events (`content_mask`).
- Answers: a digest of each answer's content (its token ids where the stream carries them, else its text). One
  answer given to most of the different prompts of a run is a cache or a stub answering, not a model
  (`identical_answers`): those requests are errors, the cell fails with the reason.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
from collections.abc import Hashable, Sequence
from typing import Any

from specbench.load.stream import EV

PROMPT_ABS = 8  # tokens: a BOS, a template's edge
PROMPT_REL = 0.10  # of the client's count
SAME_MIN_PROMPTS = 3  # different prompts one answer must cover before it says anything
SAME_MIN_TOKENS = 8
NON_CONTENT_MAX = 4  # events of a stream that carry no token: the chat role chunk, a finish chunk, usage, [DONE]  # shorter answers may well coincide (one word, a stop)


def parse_events(body: bytes) -> list[Any]:
    """Every event of a (possibly chunk-framed) SSE body, in order, one per `data:` line start as the hot path
    counts them (stream.EV): the parsed JSON payload, None for `[DONE]` or one that is not JSON."""
    out: list[Any] = []
    for part in (b"\n" + body if body.startswith(b"data:") else body).split(EV)[1:]:
        end = part.find(b"\n")
        p = (part if end < 0 else part[:end]).strip()
        try:
            out.append(None if p == b"[DONE]" else json.loads(p))
        except ValueError:
            out.append(None)
    return out


def _choice(obj: Any) -> dict[str, Any]:
    choices = obj.get("choices") if isinstance(obj, dict) else None
    c = choices[0] if isinstance(choices, list) and choices else None
    return c if isinstance(c, dict) else {}


def has_content(obj: Any, api: str) -> bool:
    """The event carries text, reasoning, a tool call or token ids."""
    if not isinstance(obj, dict):
        return False
    if api == "generate":
        return True
    c = _choice(obj)
    ids = c.get("token_ids")
    if isinstance(ids, list) and ids:
        return True
    if api == "chat":
        d = c.get("delta")
        d = d if isinstance(d, dict) else {}
        return bool(d.get("content") or d.get("reasoning_content") or d.get("reasoning") or d.get("tool_calls"))
    return bool(c.get("text"))


def content_mask(objs: Sequence[Any], api: str) -> list[bool]:
    """For each event: is it a content event."""
    return [has_content(o, api) for o in objs]


def named_models(objs: Sequence[Any]) -> list[str]:
    """The distinct models the events name, in order of first mention."""
    out: list[str] = []
    for o in objs:
        m = o.get("model") if isinstance(o, dict) else None
        if isinstance(m, str) and m not in out:
            out.append(m)
    return out


def model_problem(sent: str, named: Sequence[str], served: Sequence[str] = ()) -> str | None:
    """Why the answer is not from the model the request named (checked at boot on /v1/models), or None. `served`:
    every name /v1/models listed at boot, each an honest answer (vLLM names its first served name for any alias)."""
    if not sent or not named:
        return None
    ok = {m.rstrip("/") for m in (sent, *served)}
    other = [m for m in named if m.rstrip("/") not in ok]
    if not other:
        return None
    return (f"the answer names model {', '.join(repr(m) for m in other)}, but the request asked for {sent!r}, the "
            "model /v1/models served at boot (the server changed or misreports its model)")


def prompt_tolerance(client: int) -> int:
    return max(PROMPT_ABS, math.ceil(PROMPT_REL * client))


def prompt_problem(client: int | None, server: int | None) -> str | None:
    """Why the server's prompt_tokens cannot be the prompt the client sent, or None (they agree, or one is unknown)."""
    if not client or server is None:
        return None
    tol = prompt_tolerance(client)
    if abs(server - client) <= tol:
        return None
    return (f"server reported prompt_tokens={server} but the client sent {client} (tolerance {tol}): it did not "
            "read the prompt it was sent")


def digest(content: bytes) -> str:
    """A short digest of an answer's content."""
    return hashlib.blake2b(content, digest_size=8).hexdigest()


def text_digest(text: str) -> str | None:
    return digest(text.encode("utf-8", "surrogatepass")) if text else None


def generate_digest(objs: Sequence[Any]) -> str | None:
    """`/generate`'s answer (its last events: `output_ids` and `text`, cumulative by default) as one digest."""
    parts = [[o.get("output_ids"), o.get("text")] for o in objs if isinstance(o, dict)
             and (o.get("output_ids") or o.get("text"))]
    return digest(json.dumps(parts, separators=(",", ":")).encode()) if parts else None


# Two prompts this alike (difflib's ratio over their tokens / words) may honestly get one answer: a model continues
# near-identical text alike (the engine test's code prompts differ in one identifier per line, 0.75; "note about
# apples number 1" / "... 2", 0.86, and a small model answered them identically). Different texts score well below.
SAME_NEAR = 0.5


def _unlike(seqs: Sequence[Sequence[Hashable]], need: int) -> int:
    """How many of `seqs` are unlike each other (pairwise ratio < SAME_NEAR), counted up to `need`."""
    reps: list[Sequence[Hashable]] = []
    for s in seqs:
        if all(difflib.SequenceMatcher(None, s, r, autojunk=False).ratio() < SAME_NEAR for r in reps):
            reps.append(s)
            if len(reps) >= need:
                break
    return len(reps)


def identical_answers(results: Sequence[Any], prompts: Sequence[Hashable],
                      contents: Sequence[Sequence[Hashable]] | None = None) -> dict[int, str]:
    """Requests (index into `results`) that got one answer (`answer_digest`) given to most of the run's different
    prompts (`prompts[i]`: a key of the prompt results[i] was sent), with the reason: at least SAME_MIN_PROMPTS
    different prompts unlike each other (`contents[i]`: its tokens or words; near-identical prompts may honestly get
    one answer), more than half of those whose answers have a digest, answers of at least SAME_MIN_TOKENS tokens. The
    same prompt sent twice may well get the same answer (temperature 0): it counts once."""
    covered: dict[str, dict[Hashable, Sequence[Hashable]]] = {}
    every: set[Hashable] = set()
    for i, (r, p) in enumerate(zip(results, prompts)):
        d = getattr(r, "answer_digest", None)
        if r.error is None and d is not None and r.output_tokens >= SAME_MIN_TOKENS:
            covered.setdefault(d, {})[p] = contents[i] if contents is not None else (p,)
            every.add(p)
    out: dict[int, str] = {}
    for d, ps in covered.items():
        if len(ps) >= SAME_MIN_PROMPTS and 2 * len(ps) > len(every) \
                and _unlike(list(ps.values()), SAME_MIN_PROMPTS) >= SAME_MIN_PROMPTS:
            why = (f"the same answer (digest {d}) to {len(ps)} of {len(every)} different prompts: a cache or a stub "
                   "answered, not the model")
            out.update({i: why for i, r in enumerate(results)
                        if r.error is None and getattr(r, "answer_digest", None) == d})
    return out
