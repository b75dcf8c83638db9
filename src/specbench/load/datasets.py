"""Prompt datasets from files and the local Hugging Face cache, read into one shape: conversations with a category.

A matrix's `dataset` names one of:
- `"specbench-mini"` (the default): 48 prompts written for specbench, 12 each of chat, code, math and
  summarisation (src/specbench/data/prompts/, Apache-2.0);
- `"specbench-edit"`: 24 code-editing prompts (12 Python snippets, each to be returned whole with one variable
  renamed or a comment added): the answer repeats the prompt, as in code editing, where prompt-lookup (n-gram)
  drafting matches (src/specbench/data/prompts/, Apache-2.0);
- `"random"`: words of the tokenizer's own vocabulary (load/prompts.py build_prompts), no text of its own;
- a file: ShareGPT JSON (`[{"conversations": [{"from": "human" | "gpt" | "system", "value": ...}]}]`), JSONL
  (one object a line: `prompt` (or `question` / `instruction`) or chat `messages` [{role, content}] or ShareGPT
  `conversations`), CSV (a header row with a `prompt` column) or Parquet (through `pyarrow`, the `datasets` extra).
  Optional fields of every format: `category` (a string), `output_tokens` / `max_tokens` (a recorded answer
  length, for `output_len = "data"`), `system` (a system message), `response` / `completion` / `answer` (the
  recorded answer, whose token count is the output length when no `output_tokens` is given). Relative paths are
  read from the matrix file's folder.
- `"hf:NAME"` or `"hf:NAME:SPLIT"` (default split `train`): a Hugging Face dataset already in the local cache (or a
  local folder `datasets` can read), through `datasets.load_dataset(..., download_mode="reuse_cache_if_exists")`
  with `HF_DATASETS_OFFLINE=1` and `HF_HUB_OFFLINE=1` set first: never the network.

Conversations without a user turn (ShareGPT dumps hold empty ones) are skipped and counted; a value of the wrong
type is an error naming `file:line` (JSON, JSONL, CSV) or `file: row N` (Parquet, HF).
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from specbench.errors import UserError

RANDOM, MINI, EDIT = "random", "specbench-mini", "specbench-edit"
SHIPPED = (MINI, EDIT)  # files under src/specbench/data/prompts/
BUILTIN = (MINI, EDIT, RANDOM)
EXTRA_HINT = "pip install 'specbench-llm[datasets]'"

ROLES = {"human": "user", "user": "user", "gpt": "assistant", "chatgpt": "assistant", "bard": "assistant",
         "assistant": "assistant", "model": "assistant", "bot": "assistant", "system": "system"}
PROMPT_FIELDS = ("prompt", "question", "instruction")
REPLY_FIELDS = ("response", "completion", "answer")
OUTPUT_FIELDS = ("output_tokens", "max_tokens")
SUFFIXES = {".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".parquet": "parquet",
            ".pq": "parquet"}

Turn = tuple[str, str]  # (role, content); role is system | user | assistant


@dataclass(frozen=True, slots=True)
class Record:
    """One conversation of a dataset: its turns in order, its category, a recorded answer length."""

    turns: tuple[Turn, ...]
    category: str | None = None
    output_tokens: int | None = None
    where: str = ""  # file:line (or file: row N) of the record, for messages


@dataclass(frozen=True, slots=True)
class Item:
    """One request's conversation: the turns up to and including a user turn, and the answer recorded after it."""

    messages: tuple[Turn, ...]
    reply: str | None
    category: str | None
    output_tokens: int | None
    where: str
    conversation: int  # index of the record it came from (its turns are sent in order in a multi-turn replay)
    turn: int  # 0 for the first user turn


@dataclass(frozen=True)
class Dataset:
    name: str
    records: tuple[Record, ...]
    source: str
    skipped: int = 0  # conversations without a user turn

    @property
    def categories(self) -> tuple[str, ...]:
        return tuple(sorted({r.category for r in self.records if r.category is not None}))


def is_file_name(name: str) -> bool:
    return name not in BUILTIN and not name.startswith("hf:")


def resolve_path(name: str, base_dir: str | Path | None) -> Path:
    p = Path(name).expanduser()
    if not p.is_absolute() and base_dir is not None:
        p = Path(base_dir) / p
    return p


# ---------------------------------------------------------------------------------------------
# one object -> one record


def _text(value: Any, where: str, key: str) -> str:
    if not isinstance(value, str):
        raise UserError(f"{where}: `{key}` must be a string, got {type(value).__name__}")
    return value


def _turns(seq: Any, where: str, key: str) -> list[Turn]:
    if not isinstance(seq, list):
        raise UserError(f"{where}: `{key}` must be a list of turns, got {type(seq).__name__}")
    out: list[Turn] = []
    for i, t in enumerate(seq):
        if not isinstance(t, Mapping):
            raise UserError(f"{where}: `{key}[{i}]` must be an object, got {type(t).__name__}")
        who = t.get("from", t.get("role"))
        role = ROLES.get(str(who).lower()) if who is not None else None
        if role is None:
            raise UserError(f"{where}: `{key}[{i}]` has role {who!r}; use one of {sorted(ROLES)}")
        content = t.get("value", t.get("content"))
        out.append((role, _text(content, where, f"{key}[{i}].{'value' if 'value' in t else 'content'}")))
    return out


def _count(value: Any, where: str, key: str) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UserError(f"{where}: `{key}` must be a whole number >= 1, got {value!r}")
    return value


def record_of(obj: Any, where: str) -> Record | None:
    """A record from one object of any format; None for a conversation without a user turn."""
    if not isinstance(obj, Mapping):
        raise UserError(f"{where}: each record must be an object, got {type(obj).__name__}")
    if "conversations" in obj:
        turns = _turns(obj["conversations"], where, "conversations")
    elif "messages" in obj:
        turns = _turns(obj["messages"], where, "messages")
    else:
        key = next((k for k in PROMPT_FIELDS if obj.get(k) not in (None, "")), None)
        if key is None:
            raise UserError(f"{where}: no prompt: give one of {', '.join(PROMPT_FIELDS)}, `messages` or "
                            "`conversations`")
        turns = [("user", _text(obj[key], where, key))]
        reply_key = next((k for k in REPLY_FIELDS if obj.get(k) not in (None, "")), None)
        if reply_key is not None:
            turns.append(("assistant", _text(obj[reply_key], where, reply_key)))
    if obj.get("system") not in (None, ""):
        turns.insert(0, ("system", _text(obj["system"], where, "system")))
    cat = obj.get("category")
    if cat == "":
        cat = None
    if cat is not None and not isinstance(cat, str):
        raise UserError(f"{where}: `category` must be a string, got {cat!r}")
    out_key = next((k for k in OUTPUT_FIELDS if obj.get(k) not in (None, "")), OUTPUT_FIELDS[0])
    out = _count(obj.get(out_key), where, out_key)
    if not any(role == "user" and content.strip() for role, content in turns):
        return None
    return Record(tuple(turns), cat, out, where)


# ---------------------------------------------------------------------------------------------
# formats


def _json_array(text: str, src: str) -> Iterable[tuple[Any, str]]:
    """The elements of a top-level JSON array, each with the line it starts on."""
    dec = json.JSONDecoder()
    i, n = 0, len(text)

    def ws(j: int) -> int:
        while j < n and text[j] in " \t\r\n":
            j += 1
        return j

    def line(j: int) -> int:
        return text.count("\n", 0, j) + 1

    i = ws(i)
    if i >= n or text[i] != "[":
        raise UserError(f"{src}:{line(i)}: a .json dataset must be an array of records (ShareGPT); use .jsonl for "
                        "one object a line")
    i = ws(i + 1)
    if i < n and text[i] == "]":
        return
    while True:
        try:
            obj, end = dec.raw_decode(text, i)
        except json.JSONDecodeError as exc:
            raise UserError(f"{src}:{exc.lineno}: not JSON ({exc.msg})") from None
        yield obj, f"{src}:{line(i)}"
        i = ws(end)
        if i < n and text[i] == ",":
            i = ws(i + 1)
            continue
        if i < n and text[i] == "]":
            return
        raise UserError(f"{src}:{line(i)}: expected ',' or ']' in the array")


def _jsonl(text: str, src: str) -> Iterable[tuple[Any, str]]:
    for no, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            yield json.loads(raw), f"{src}:{no}"
        except json.JSONDecodeError as exc:
            raise UserError(f"{src}:{no}: not JSON ({exc.msg} at column {exc.colno})") from None


def _csv(text: str, src: str) -> Iterable[tuple[Any, str]]:
    reader = csv.DictReader(text.splitlines(keepends=True))
    fields = reader.fieldnames or []
    if not any(f in fields for f in PROMPT_FIELDS):
        raise UserError(f"{src}:1: the header row needs a `prompt` column (or {', '.join(PROMPT_FIELDS[1:])}); "
                        f"it has {fields}")
    prev = 1
    for row in reader:
        yield {k: v for k, v in row.items() if k is not None}, f"{src}:{prev + 1}"
        prev = reader.line_num


def _parquet(path: Path) -> Iterable[tuple[Any, str]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise UserError(f"{path}: reading Parquet needs pyarrow: {EXTRA_HINT}") from None
    try:
        rows = pq.read_table(str(path)).to_pylist()
    except Exception as exc:  # pyarrow raises ArrowInvalid and OSError subclasses of its own
        raise UserError(f"{path}: not a readable Parquet file ({type(exc).__name__}: {exc})") from None
    for i, row in enumerate(rows, start=1):
        yield row, f"{path}: row {i}"


def _hf(spec: str) -> Iterable[tuple[Any, str]]:
    name, _, split = spec.removeprefix("hf:").partition(":")
    if not name:
        raise UserError(f"dataset {spec!r}: give hf:NAME or hf:NAME:SPLIT")
    os.environ["HF_DATASETS_OFFLINE"] = "1"  # set before `datasets` reads its configuration: never the network
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        import datasets
    except ImportError:
        raise UserError(f"dataset {spec!r} needs the `datasets` package: {EXTRA_HINT}") from None
    for mod, attr in ((getattr(datasets, "config", None), "HF_DATASETS_OFFLINE"),
                      (getattr(datasets, "config", None), "HF_HUB_OFFLINE")):
        if mod is not None and hasattr(mod, attr):
            setattr(mod, attr, True)  # in case `datasets` was imported before this call
    try:
        ds = datasets.load_dataset(name, split=split or "train", download_mode="reuse_cache_if_exists")
    except Exception as exc:  # datasets raises many types (FileNotFoundError, ConnectionError, DatasetNotFoundError...)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"dataset {spec!r}: not readable from the local cache, offline ({first})") from None
    for i, row in enumerate(ds, start=1):
        yield row, f"{spec}: row {i}"


def _rows(name: str, base_dir: str | Path | None) -> tuple[Iterable[tuple[Any, str]], str]:
    if name in SHIPPED:
        text = resources.files("specbench").joinpath(f"data/prompts/{name}.jsonl").read_text("utf-8")
        return _jsonl(text, name + ".jsonl"), name
    if name.startswith("hf:"):
        return _hf(name), name
    path = resolve_path(name, base_dir)
    kind = SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise UserError(f"unknown dataset {name!r}: use one of {list(BUILTIN)}, hf:NAME[:SPLIT], or a file ending in "
                        f".json (ShareGPT), .jsonl, .csv or .parquet")
    if not path.is_file():
        raise UserError(f"dataset {name!r}: no such file {path}")
    if kind == "parquet":
        return _parquet(path), str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read: {exc}") from None
    src = str(path)
    if kind == "json" and text.lstrip().startswith("{"):
        kind = "jsonl"  # one object a line in a .json file
    return {"json": _json_array, "jsonl": _jsonl, "csv": _csv}[kind](text, src), src


_CACHE: dict[tuple[Any, ...], Dataset] = {}


def load_dataset(name: str, base_dir: str | Path | None = None) -> Dataset:
    """Read a dataset by its matrix name (not `"random"`, which has no records); cached per file version."""
    if name == RANDOM:
        raise UserError("the random dataset has no records (its prompts are built from the tokenizer's words)")
    key: tuple[Any, ...] = (name, str(base_dir))
    if is_file_name(name):
        p = resolve_path(name, base_dir)
        try:
            st = p.stat()
            key += (st.st_mtime_ns, st.st_size)
        except OSError:
            pass
    if key in _CACHE:
        return _CACHE[key]
    rows, src = _rows(name, base_dir)
    records, skipped = [], 0
    for obj, where in rows:
        rec = record_of(obj, where)
        if rec is None:
            skipped += 1
        else:
            records.append(rec)
    if not records:
        raise UserError(f"dataset {name!r} ({src}): no record with a user turn"
                        + (f" ({skipped} skipped)" if skipped else ""))
    ds = Dataset(name, tuple(records), src, skipped)
    _CACHE[key] = ds
    return ds


def items(ds: Dataset, *, multi_turn: bool = False, category: str | None = None) -> list[Item]:
    """The requests of a dataset: the first user turn of each conversation, or every user turn when `multi_turn`
    (each with the turns before it as its history). `category` keeps that category's records only."""
    out: list[Item] = []
    for ci, rec in enumerate(ds.records):
        if category is not None and rec.category != category:
            continue
        k = 0
        for j, (role, content) in enumerate(rec.turns):
            if role != "user" or not content.strip():
                continue
            nxt = rec.turns[j + 1] if j + 1 < len(rec.turns) else None
            reply = nxt[1] if nxt is not None and nxt[0] == "assistant" else None
            out.append(Item(rec.turns[:j + 1], reply, rec.category, rec.output_tokens, rec.where, ci, k))
            k += 1
            if not multi_turn:
                break
    if not out:
        have = ds.categories
        raise UserError(f"dataset {ds.name!r} has no record of category {category!r}"
                        + (f"; its categories: {', '.join(have)}" if have else "; it has no categories"))
    return out
