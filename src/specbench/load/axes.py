"""The workload axes of a cell (its client settings that shape what is measured) as one short label, the same words
everywhere a cell is named: the report's series and fastest tables, the dry run, the progress bars.

The axes are the baseline key's (load/speedup.py baseline_key): prompt/output tokens, request rate, dataset and the
optional workload and sampling settings (load/results.py OPTIONAL_CLIENT_KEYS), plus num_requests for series names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specbench.load.results import is_default

# (client key, short name in a label)
CLIENT_KEYS = (("prompt_tokens", "in"), ("output_tokens", "out"), ("request_rate", "rate"),
               ("dataset", "data"), ("category", "cat"), ("prompt_len", "in_len"), ("output_len", "out_len"),
               ("multi_turn", "multi"), ("temperature", "temp"), ("top_p", "top_p"), ("top_k", "top_k"),
               ("seed", "seed"), ("ignore_eos", "ignore_eos"), ("stop", "stop"), ("num_requests", "n"))
ALWAYS_SHOWN = ("prompt_tokens", "output_tokens")  # shown even at their defaults
# A length taken from the dataset's records (`prompt_len`/`output_len` = "data"): prompt_tokens is then not what is
# sent (load/lengths.py), and output_tokens only caps each record's answer.
FROM_DATA = {"prompt_tokens": ("prompt_len", "in=data"), "output_tokens": ("output_len", "out=data,cap={v}")}


def value_text(v: Any) -> str:
    if isinstance(v, dict):
        return ",".join(f"{k}={value_text(x)}" for k, x in sorted(v.items())) or "{}"
    return str(v)


def workload_text(client: Mapping[str, Any], *, skip: tuple[str, ...] = ("num_requests",)) -> str:
    """'in=256 out=64 data=mini cat=code temp=0.7 rate=4': every axis the cell sets to other than its default (a
    closed loop's rate "inf" left out); lengths from the records read 'in=data out=data,cap=160'."""
    parts = []
    for key, short in CLIENT_KEYS:
        v = client.get(key)
        if key in skip or v is None or (key not in ALWAYS_SHOWN and is_default(key, v)):
            continue
        if key == "request_rate" and str(v) == "inf":
            continue
        if v == "data" and any(length == key and tokens not in skip for tokens, (length, _) in FROM_DATA.items()):
            continue  # said by the token count's own part
        if key in FROM_DATA and client.get(FROM_DATA[key][0]) == "data":
            parts.append(FROM_DATA[key][1].format(v=value_text(v)))
            continue
        parts.append(f"{short}={value_text(v)}")
    return " ".join(parts)


def extras_text(client: Mapping[str, Any]) -> str:
    """The axes beyond prompt/output tokens, rate and num_requests ('cat=code temp=0.7'), '' when none is set."""
    return workload_text(client, skip=("num_requests", "prompt_tokens", "output_tokens", "request_rate"))
