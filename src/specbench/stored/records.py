"""The frozen records a results store is read into (`read.py` reads them): servers, cells, requests, the store,
and the sort keys the report orders them by."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from specbench.load import speedup as speedups
from specbench.load.metrics import draft_positions


@dataclass(frozen=True)
class ServerRecord:
    """One row of `servers`: a launched (or skipped) server tuple."""

    server_id: str
    phase: int | None
    tp: int | None
    engine: str | None
    settings: Mapping[str, Any]
    command: tuple[str, ...]
    verdict: str | None
    plan: Mapping[str, Any] | None
    status: str | None
    log_path: str | None
    log_text: str | None
    diagnosis: Any


@dataclass(frozen=True)
class RequestRecord:
    """One row of `requests` (its inter-token gaps left out): what the per-category tables read."""

    idx: int
    repeat: int | None
    category: str | None
    prompt_tokens: int | None
    output_tokens: int | None
    ttft_s: float | None
    e2e_s: float | None
    accept_len: float | None
    spec_verify_ct: int | None
    error: str | None
    # absolute times (epoch s) and the boot of its server (stores written before them: None): the request as it ran,
    # so throughput, concurrency and a timeline can be re-derived from the rows (matrix/store.py ADDED_COLUMNS)
    sent_at: float | None = None
    first_token_at: float | None = None
    ended_at: float | None = None
    boot: int | None = None

    @property
    def ok(self) -> bool:
        return not self.error


@dataclass(frozen=True)
class CellRecord:
    """One row of `cells` plus the per-request accept lengths of that cell."""

    cell_id: str
    server_id: str | None
    phase: int | None
    tp: int | None
    algorithm: str | None
    label: str
    status: str
    reason: str | None
    attempts: int
    started_at: float | None
    ended_at: float | None
    metrics: Mapping[str, Any]
    server: Mapping[str, Any]
    client: Mapping[str, Any]
    clamp: Mapping[str, Any]
    log_text: str | None
    diagnosis: Any
    accept_lengths: tuple[float, ...] = ()
    requests: tuple[RequestRecord, ...] = ()

    @property
    def simulated_accept_len(self) -> float | None:
        """server_json.simulated_accept_len: the engine was told to accept this many tokens per step (the cell's
        acceptance is simulated, not the drafter's own)."""
        v = self.server.get("simulated_accept_len")
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    @property
    def draft_tokens(self) -> int | None:
        """Draft positions per verify step: load/metrics.py::draft_positions of server_json, as the runner stores."""
        return draft_positions(self.server)

    @property
    def spread(self) -> Mapping[str, Any]:
        """metrics_json.spread (load/spread.py), {} for a cell measured once."""
        v = self.metrics.get("spread")
        return v if isinstance(v, dict) else {}

    @property
    def is_ar(self) -> bool:
        """Autoregressive baseline: `cells.algorithm == "ar"` (docs/structures.md)."""
        return speedups.is_ar(self.algorithm, self.label)

    @property
    def concurrency(self) -> int | None:
        """metrics_json.concurrency, else client_json.concurrency / max_concurrency."""
        for src in (self.metrics, self.client):
            for key in ("concurrency", "max_concurrency"):
                value = src.get(key)
                if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                    return int(value)
        return None

    @property
    def budget(self) -> int | None:
        """Draft budget of a tree/block algorithm: server_json keys, else the `-b<N>` suffix of the label."""
        for key in ("ddtree_budget", "budget", "num_draft_tokens", "speculative_num_draft_tokens",
                    "num_speculative_tokens"):
            value = self.server.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        match = re.search(r"-b(\d+)$", self.label)
        return int(match.group(1)) if match else None

    @property
    def baseline_key(self) -> tuple[Any, ...]:
        """Cells with equal keys compare against the same AR cell (matrix/expansion.py Cell.baseline_key):
        TP, concurrency, and client_json prompt_tokens, output_tokens, request_rate, dataset."""
        return speedups.baseline_key(self.tp, self.concurrency, self.client)

    def metric(self, key: str) -> float | None:
        """A numeric metrics_json value, or None when absent or not a number."""
        value = self.metrics.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return None
        return float(value)


@dataclass(frozen=True)
class LoadedStore:
    """A whole results store, read once."""

    path: Path
    label: str
    meta: Mapping[str, str]
    servers: tuple[ServerRecord, ...]
    cells: tuple[CellRecord, ...]
    warnings: tuple[str, ...] = field(default=())

    @property
    def engine(self) -> str | None:
        return self.meta.get("engine") or next((s.engine for s in self.servers if s.engine), None)

    @property
    def engine_version(self) -> str | None:
        return self.meta.get("engine_version") or self.meta.get("version")

    def server(self, server_id: str | None) -> ServerRecord | None:
        return self._server_by_id.get(server_id)

    @cached_property
    def _server_by_id(self) -> dict[str | None, ServerRecord]:
        """server_id -> its record (the first of a repeated id), built once: a 20,000-cell report asks per cell."""
        out: dict[str | None, ServerRecord] = {}
        for s in self.servers:
            out.setdefault(s.server_id, s)
        return out

    @cached_property
    def memo(self) -> dict[object, object]:
        """Values derived from this store once and asked per cell (report/sections.py: each server's model, the
        fallback GPU); the store itself never changes."""
        return {}



def first_repeat_in_send_order(reqs: Sequence[RequestRecord]) -> list[RequestRecord]:
    """The requests of the earliest repeat among `reqs`, in the order they were sent: by send time, or for a store
    older than the send times by index, the order a closed loop sends in (load/schedule.py::closed_loop takes the
    requests in order, `concurrency` at a time). The waves of a closed-loop cell are its consecutive runs."""
    if not reqs:
        return []
    first = min(r.repeat or 0 for r in reqs)
    mine = [r for r in reqs if (r.repeat or 0) == first]
    timed = all(r.sent_at is not None for r in mine)
    mine.sort(key=(lambda r: r.sent_at or 0.0) if timed else (lambda r: r.idx))
    return mine


def natural_key(text: str) -> tuple[Any, ...]:
    """'ddtree-b4' < 'ddtree-b16': digits compare as numbers."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text.lower()))


def label_key(label: str) -> tuple[Any, ...]:
    """AR first, then the speculative labels in natural order."""
    return (0 if label.lower() == "ar" else 1, natural_key(label))


def cell_sort_key(cell: CellRecord) -> tuple[Any, ...]:
    return (cell.phase or 0, cell.tp or 0, label_key(cell.label), cell.concurrency or 0, natural_key(cell.cell_id))
