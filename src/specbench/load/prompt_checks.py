"""Prompts that make a speculative measurement meaningless: random tokens with a real drafter.

A drafter (EAGLE / EAGLE3, MTP / NEXTN, DFlash, DDTree, a draft model, n-gram lookup) guesses the next tokens of a
text. On prompts of random tokens (`dataset = "random"`: words or ids drawn from the tokenizer's vocabulary,
load/prompts.py::build_prompts) its guesses meet the output of a model continuing noise, so its acceptance, and with
it the speedup, is not the one it would have on the workload (an n-gram drafter finds nothing to match; a trained
drafter is scored on text it was never trained for). Nothing is wrong with the number as a measurement of that
input; it is the wrong input for the question "how much faster is this drafter on my traffic". Two inputs answer it:
a real dataset, or the engine told to accept a chosen mean number of tokens (`simulated_accept_len`,
engines/simulate.py), which makes the acceptance a setting rather than the drafter's luck on noise.

Pure: reads a cell's client settings and its server settings (`specbench run --dry-run --json` rows' `client` and
`server`; a store's `client_json` and `server_json`), returns one line or None.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specbench.load.datasets import RANDOM

_AR = frozenset({"", "ar", "none", "autoregressive"})  # the spellings of "no drafter" (matrix/schema_base.AR_NAMES)


def random_prompts_warning(client: Mapping[str, Any], server: Mapping[str, Any]) -> str | None:
    """One line when the cell's prompts are random tokens and its server has a real drafter whose acceptance is not
    simulated, naming the drafter and what would measure the workload; None otherwise (autoregressive, a real
    dataset, a simulated accept length, or settings that do not say)."""
    if client.get("dataset") != RANDOM:
        return None
    algorithm = str(server.get("algorithm") or "").strip()
    if algorithm.lower() in _AR or server.get("simulated_accept_len") is not None:
        return None
    return (f'prompts of random tokens (dataset = "random") with a real {algorithm} drafter: its acceptance on '
            "random tokens is not the workload's, so neither is its speedup; use a real dataset (specbench-mini, a "
            "file, hf:NAME; needs `tokenizer`) or a simulated acceptance (`simulated_accept_len`)")
