"""The checks of the matrix's dataset, workload and sampling keys (`[client]` and overrides' `client`), each raising
ValueError with the reason; pydantic adds the key path and `toml_load.py` the file:line.

An override's `client` table is checked on its own (`partial` in the validation context): a check that needs a
partner key (a category needs its dataset, multi_turn needs prompt_len) runs there only when the override sets the
partner too; other combinations are checked when the cell is prepared.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from typing import Any

from specbench.errors import UserError
from specbench.load.datasets import BUILTIN, RANDOM, load_dataset
from specbench.load.lengths import parse_length
from specbench.load.results import check_sampling

__all__ = ["SKIP", "base_dir", "partner", "category", "dataset", "length", "multi_turn", "sampling",
           "stop_axis", "typed"]

NUMERIC = {"temperature": (int, float), "top_p": (int, float), "top_k": (int,), "seed": (int,)}


def base_dir(context: Any) -> str | None:
    if isinstance(context, Mapping) and context.get("matrix_dir"):
        return str(context["matrix_dir"])
    return None


SKIP = object()  # a partner key an override's client table does not set: the check waits for the cell


def partner(context: Any, data: Mapping[str, Any], key: str) -> Any:
    """The value of an earlier key of the same table, or SKIP in an override that does not set it."""
    if isinstance(context, Mapping) and "partial_keys" in context and key not in context["partial_keys"]:
        return SKIP
    return data.get(key)


def typed(name: str, v: Any) -> Any:
    """Before pydantic's coercion: a bool is not a number and a number is not a bool."""
    for x in v if isinstance(v, list) else [v]:
        if x is None:
            continue
        if name in NUMERIC:
            if isinstance(x, bool) or not isinstance(x, NUMERIC[name]):
                kind = "a whole number" if NUMERIC[name] == (int,) else "a number"
                raise ValueError(f"{name} must be {kind}, got {x!r}")
        elif not isinstance(x, bool):
            raise ValueError(f"{name} must be true or false, got {x!r}")
    return v


def sampling(name: str, x: Any) -> None:
    try:
        check_sampling(**{"temperature": None, "top_p": None, "top_k": None, "seed": None, "stop": None, name: x})
    except UserError as exc:
        raise ValueError(str(exc)) from None


def stop_axis(v: Any) -> tuple[tuple[str, ...], ...]:
    """`stop`: a list of strings is one value, a list of lists an axis of them."""
    if v is None:
        return ()
    values = v if v and all(isinstance(x, list) for x in v) else [v]
    for x in values:
        if any(isinstance(s, list) for s in x):
            raise ValueError("stop must be a list of strings, or a list of such lists (an axis)")
        try:
            check_sampling(None, None, None, None, x)
        except UserError as exc:
            raise ValueError(str(exc)) from None
    return tuple(tuple(x) for x in values)


def dataset(name: Any, base: str | None) -> None:
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"dataset must be a name or a path, got {name!r}")
    if name in BUILTIN:
        return
    if name.startswith("hf:"):
        if not name.removeprefix("hf:").partition(":")[0]:
            raise ValueError(f"dataset {name!r}: give hf:NAME or hf:NAME:SPLIT")
        if importlib.util.find_spec("datasets") is None:
            raise ValueError(f"dataset {name!r} needs the `datasets` package: pip install 'specbench-llm[datasets]'")
        return  # read when the cell runs: loading a cached HF dataset can take a while
    try:
        load_dataset(name, base)  # a file: read now, so that its own errors name the file and line
    except UserError as exc:
        raise ValueError(str(exc)) from None


def _datasets(v: Any) -> list[str]:
    return [d for d in (v if isinstance(v, list) else [v]) if isinstance(d, str)]


def length(name: str, x: Any, datasets: Any) -> None:
    dist = parse_length(x)
    if datasets is not SKIP and dist.kind == "data" and RANDOM in _datasets(datasets):
        raise ValueError(f'{name} = "data" needs a dataset with text; the "random" dataset has none')


def category(x: Any, datasets: Any, base: str | None) -> None:
    if not isinstance(x, str) or not x:
        raise ValueError(f"category must be a non-empty string, got {x!r}")
    if datasets is None or datasets is SKIP:  # the dataset key failed (reported there), or an override lacks it
        return
    for d in _datasets(datasets):
        if d == RANDOM:
            raise ValueError('category needs a dataset with categories; the "random" dataset has none')
        if d.startswith("hf:"):
            continue
        try:
            ds = load_dataset(d, base)
        except UserError:
            continue  # the dataset key reports it
        if x not in ds.categories:
            have = ", ".join(ds.categories) or "none"
            raise ValueError(f"dataset {d!r} has no category {x!r} (its categories: {have})")


def multi_turn(prompt_len: Any, datasets: Any) -> None:
    if datasets not in (None, SKIP) and RANDOM in _datasets(datasets):
        raise ValueError('multi_turn needs a dataset of conversations; the "random" dataset has none')
    if prompt_len is SKIP:
        return
    lens = prompt_len if isinstance(prompt_len, list) else [prompt_len]
    if any(p is None or parse_length(p).kind != "data" for p in lens):
        raise ValueError('multi_turn = true needs prompt_len = "data": a replayed conversation is as long as its '
                         "history")
