"""Several stores in one report: each store is one set of series, labelled by file / engine / version.

With one store a series is the cell label ("ar", "dflash", "ddtree-b8"); with several it is
"<store>: <label>", so every table and plot draws one line per store and configuration.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from specbench.load.axes import CLIENT_KEYS, value_text, workload_text
from specbench.stored.read import load_store
from specbench.stored.records import CellRecord, LoadedStore


@dataclass(frozen=True)
class Entry:
    """A cell with the store it came from and its series name in this report."""

    store: LoadedStore
    cell: CellRecord
    series: str
    workload: str = ""
    config: str = ""  # the series name without the store prefix: same config, same colour across stores


def unique_labels(paths: Sequence[Path]) -> list[str]:
    """File stems; where two stems collide, parent/stem; where those collide too, a #n suffix."""
    stems = [p.stem for p in paths]
    labels = list(stems)
    for i, p in enumerate(paths):
        if stems.count(p.stem) > 1:
            labels[i] = f"{p.parent.name}/{p.stem}" if p.parent.name else p.stem
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if labels.count(label) == 1 else f"{label}#{seen[label]}")
    return out


def load_stores(paths: Sequence[str | Path]) -> tuple[LoadedStore, ...]:
    """Read every store (UserError on the first unreadable one), each with a unique label."""
    resolved = [Path(p) for p in paths]
    labels = unique_labels(resolved)
    return tuple(load_store(p, label) for p, label in zip(resolved, labels))


def describe(store: LoadedStore) -> str:
    """'<label> (<engine> <version>)' from the store's meta table, as far as it says."""
    extra = " ".join(x for x in (store.engine, store.engine_version) if x)
    return f"{store.label} ({extra})" if extra else store.label


# Settings that may tell two cells of one label apart, with their short names in a series label.
# server_json keys come from matrix/expansion.py ServerTuple.settings, client_json keys from its client axes.
SERVER_KEYS = (("mem_fraction_static", "mem"), ("max_running_requests", "mrr"), ("context_length", "ctx"),
               ("draft_model", "draft"), ("num_draft_tokens", "d"), ("num_steps", "steps"),
               ("eagle_topk", "topk"), ("ddtree_budget", "b"), ("flags", "flags"), ("env", "env"))


def varying_keys(stores: Sequence[LoadedStore]) -> tuple[tuple[str, str, str], ...]:
    """(where, key, short) of the settings that differ between cells of the same store, TP and label:
    those must appear in the series name or two different lines would merge."""
    groups: dict[tuple[str, int | None, str], list[CellRecord]] = {}
    for s in stores:
        for c in s.cells:
            groups.setdefault((s.label, c.tp, c.label), []).append(c)
    out = []
    for where, keys in (("server", SERVER_KEYS), ("client", CLIENT_KEYS)):
        for key, short in keys:
            for cells in groups.values():
                values = {value_text(getattr(c, where).get(key)) for c in cells}
                if len(values) > 1:
                    out.append((where, key, short))
                    break
    return tuple(out)


def series_name(store: LoadedStore, cell: CellRecord, multi: bool,
                varying: Sequence[tuple[str, str, str]] = ()) -> str:
    """'<label>' or '<store>: <label>', plus ' [k=v ...]' for the settings that vary within a label."""
    name = f"{store.label}: {cell.label}" if multi else cell.label
    extra = " ".join(f"{short}={value_text(getattr(cell, where).get(key))}" for where, key, short in varying)
    return f"{name} [{extra}]" if extra else name


def workload_name(cell: CellRecord, varying: Sequence[tuple[str, str, str]]) -> str:
    """The client-side part of the series suffix ('in=1024 out=256'): cells compare only within one."""
    return " ".join(f"{short}={value_text(cell.client.get(key))}" for where, key, short in varying if where == "client")


def workload_label(cell: CellRecord) -> str:
    """Every workload axis the cell sets (load/axes.py workload_text): the fastest tables' workload column."""
    return workload_text(cell.client)


def entries(stores: Sequence[LoadedStore]) -> tuple[Entry, ...]:
    multi = len(stores) > 1
    varying = varying_keys(stores)
    return tuple(Entry(store=s, cell=c, series=series_name(s, c, multi, varying), workload=workload_name(c, varying),
                       config=series_name(s, c, False, varying))
                 for s in stores for c in s.cells)
