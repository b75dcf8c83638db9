"""What the report says, as frozen rows: pure functions from loaded stores to tables, in one pass:
stores -> entries (report/compare.py: each cell with its series name) -> cell rows (report/cellrows.py: every number,
interval, speedup, comparison with AR and integrity of a cell) -> questions (report/decisions.py: one decision per
section · TP · workload · concurrency, each row's rank and verdict against the best) -> the tables the renderers draw.

Every number comes from the store (docs/structures.md):
- throughput, TTFT/TPOT/ITL percentiles, accept length: `cells.metrics_json` keys
  `output_throughput`, `ttft_ms_p50`, `ttft_ms_p99`, `tpot_ms_*`, `itl_ms_*`, `accept_length_mean`;
- speedup: the pooled estimate of load/speedup.py (stored by the runner, else computed by the same function);
- memory plan: `servers.plan_json` `memory` (contracts.py::MemorySplit, each engine's own split; a plan stored
  before it is read by MemorySplit.of_plan from its older keys), headroom = GPU total - those parts (the total from
  the server's settings where the plan has none).

The row types live in rows.py and the display strings in formatting.py (the decisions' tables in decision_tables.py,
the integrity and A/A tables in integrity_tables.py); the renderers and the plots import them from there.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from specbench.contracts import MemorySplit, sum_of_keys
from specbench.errors import UserError
from specbench.report.categories import category_rows
from specbench.report.cellrows import ar_cells, cell_row
from specbench.report.compare import Entry, entries
from specbench.report.decisions import best_rows, questions, with_standings
from specbench.report.rows import (
    DONE,
    FAILED_STATES,
    CellRow,
    FailedRun,
    LogFile,
    MemoryRow,
    PhaseTable,
    Summary,
    Tables,
)
from specbench.report.sections import section_order, sections
from specbench.stored.records import CellRecord, LoadedStore, ServerRecord, label_key, natural_key

__all__ = ["build_tables", "cell_rows", "failures_and_logs", "memory_rows", "one_line", "phase_tables", "safe_name",
           "summarize"]

# ---------------------------------------------------------------- diagnosis and logs


def _first_line(text: str) -> str:
    for line in str(text).splitlines():
        if line.strip():
            return re.sub(r"\s+", " ", line.strip())
    return ""


def one_line(diagnosis: Any, reason: str | None = None, limit: int = 240) -> str:
    """The diagnosis as one line: '<kind>: <engine's message> — <explanation>', else the reason."""
    parts: list[str] = []
    if isinstance(diagnosis, Mapping):
        failure = diagnosis.get("failure")
        if isinstance(failure, Mapping):
            kind = failure.get("kind")
            message = _first_line(failure.get("message") or "")
            parts.append(": ".join(str(x) for x in (kind, message) if x))
        elif isinstance(failure, str):
            parts.append(_first_line(failure))
        for key in ("explanation", "summary", "message", "diagnosis"):
            if diagnosis.get(key):
                parts.append(_first_line(diagnosis[key]))
                break
    elif isinstance(diagnosis, str):
        parts.append(_first_line(diagnosis))
    parts = [p for p in parts if p]
    if not parts and reason:
        parts.append(_first_line(reason))
    elif reason and _first_line(reason) not in " ".join(parts):
        parts.insert(0, _first_line(reason))
    text = " — ".join(parts) or "no diagnosis recorded"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def safe_name(text: str) -> str:
    """A file name from a cell or server id: letters, digits, '.', '_', '-' only."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "unnamed"


def _log_rel(store: LoadedStore, ident: str, multi: bool, prefix: str = "") -> str:
    name = safe_name(f"{store.label}__{prefix}{ident}" if multi else f"{prefix}{ident}")
    return f"logs/{name}.log"


# ---------------------------------------------------------------- builders


def cell_rows(stores: Sequence[LoadedStore], ents: Sequence[Entry] | None = None) -> list[tuple[CellRecord, CellRow]]:
    """Every cell of every store with its row (report/cellrows.py), in entry order."""
    ars = ar_cells(stores)
    of = sections(stores)
    named = len(set(of.values())) > 1
    multi = len(stores) > 1
    stand_ins = {s.label: _stand_ins(s) for s in stores}
    out = []
    for e in (entries(stores) if ents is None else ents):
        c = e.cell
        out.append((c, cell_row(e, ars, multi, of[(e.store.label, c.cell_id)] if named else "",
                                _log_rel(e.store, c.cell_id, multi) if c.log_text else None,
                                stand_in=stand_ins.get(e.store.label, {}).get(c.cell_id))))
    return out


def _stand_ins(store: LoadedStore) -> dict[str, str]:
    """The store's cells that measured a stand-in's artifact (predict/observe.py); none when it cannot be read so."""
    from specbench.predict.observe import stand_in_cells

    try:
        return stand_in_cells(store)
    except (UserError, ValueError, OSError):
        return {}


def phase_tables(stores: Sequence[LoadedStore], rows: Sequence[CellRow] | None = None) -> tuple[PhaseTable, ...]:
    """One table per (section, phase, TP), every cell of every store of the section, AR first then labels in natural
    order; sections (report/sections.py: model · GPU) in the order their stores were given."""
    if rows is None:
        pairs = cell_rows(stores)
        rows = with_standings([r for _, r in pairs], questions(pairs))
    order = {name: i for i, name in enumerate(section_order(stores))} if len(section_order(stores)) > 1 else {}
    groups: dict[tuple[str, int | None, int | None], list[CellRow]] = {}
    for r in rows:
        groups.setdefault((r.section, r.phase, r.tp), []).append(r)
    tables = []
    for (sec, phase, tp), rs in sorted(groups.items(), key=lambda kv: (order.get(kv[0][0], 0), kv[0][1] or 0,
                                                                       kv[0][2] or 0)):
        rs.sort(key=lambda r: (label_key(r.label), natural_key(r.config), natural_key(r.store), r.concurrency or 0,
                               natural_key(r.cell_id)))
        tables.append(PhaseTable(phase=phase, tp=tp, rows=tuple(rs), section=sec))
    return tuple(tables)


def failures_and_logs(stores: Sequence[LoadedStore], ents: Sequence[Entry] | None = None
                      ) -> tuple[tuple[FailedRun, ...], tuple[LogFile, ...]]:
    """Failed servers and failed/skipped cells; every stored log is written whole (not only the failures')."""
    multi = len(stores) > 1
    failures: list[FailedRun] = []
    logs: list[LogFile] = []
    all_series = {(e.store.label, e.cell.cell_id): e.series for e in (entries(stores) if ents is None else ents)}
    for store in stores:
        labels = _server_labels(store)
        server_log: dict[str, str] = {}
        for s in store.servers:
            if s.log_text:
                rel = _log_rel(store, s.server_id, multi, prefix="server-")
                logs.append(LogFile(rel, s.log_text))
                server_log[s.server_id] = rel
            if s.status == "failed":
                failures.append(FailedRun(
                    store=store.label, kind="server", ident=s.server_id,
                    series=_server_series(store, s, multi, labels),
                    tp=s.tp, concurrency=None, status="failed", diagnosis=one_line(s.diagnosis),
                    log_file=server_log.get(s.server_id)))
        series = {c.cell_id: all_series.get((store.label, c.cell_id), c.label) for c in store.cells}
        for c in store.cells:
            cell_log: str | None = None
            if c.log_text:
                cell_log = _log_rel(store, c.cell_id, multi)
                logs.append(LogFile(cell_log, c.log_text))
            if c.status in FAILED_STATES:
                failures.append(FailedRun(
                    store=store.label, kind="cell", ident=c.cell_id,
                    series=f"{store.label}: {series[c.cell_id]}" if multi else series[c.cell_id],
                    tp=c.tp, concurrency=c.concurrency,
                    status=c.status, diagnosis=one_line(c.diagnosis, c.reason),
                    log_file=cell_log or server_log.get(c.server_id or "")))
    return tuple(failures), tuple(logs)


def _server_labels(store: LoadedStore) -> dict[str | None, set[str]]:
    """server_id -> the labels of its cells (one pass over the cells)."""
    out: dict[str | None, set[str]] = {}
    for c in store.cells:
        out.setdefault(c.server_id, set()).add(c.label)
    return out


def _server_series(store: LoadedStore, server: ServerRecord, multi: bool,
                   by_server: Mapping[str | None, set[str]] | None = None) -> str:
    labels = sorted((by_server if by_server is not None else _server_labels(store)).get(server.server_id, ()),
                    key=label_key)
    name = ", ".join(labels) or str(server.settings.get("label") or server.settings.get("algorithm") or server.server_id)
    return f"{store.label}: {name}" if multi else name


def _gpu_total(server: ServerRecord, plan: Mapping[str, Any]) -> float | None:
    """GPU memory per device in GiB where the plan's split has no total: `gpu_mem_gib` in the plan or in the
    server's settings."""
    for src in (plan, server.settings):
        total = sum_of_keys(src, "gpu_mem_gib") or sum_of_keys(src, "total_gib")
        if total:
            return total
    return None


def memory_rows(stores: Sequence[LoadedStore]) -> tuple[MemoryRow, ...]:
    multi = len(stores) > 1
    rows = []
    for store in stores:
        labels = _server_labels(store)
        for s in store.servers:
            plan = s.plan if isinstance(s.plan, Mapping) else None
            if plan is None:
                continue
            split = MemorySplit.of_plan(plan)  # the plan's own `memory`, or an older plan's keys
            if not split.sized:
                continue  # e.g. {"status": None, "planner_error": ...}: the planner did not size this server
            total = split.total_gib if split.total_gib is not None else _gpu_total(s, plan)
            weights, draft, mamba, kv = split.weights_gib, split.draft_gib, split.state_gib, split.kv_gib
            used = sum(v for v in (weights, draft, mamba, kv) if v is not None)
            headroom = total - used if total is not None else None
            kv_tokens = plan.get("kv_tokens")
            mrr = plan.get("max_running_requests")
            mfs = plan.get("mem_fraction_static")
            rows.append(MemoryRow(
                store=store.label, server_id=s.server_id, series=_server_series(store, s, multi, labels), tp=s.tp,
                status=s.status or "", plan_status=plan.get("status"), verdict=s.verdict,
                weights=weights, draft=draft, mamba=mamba, kv=kv, headroom=headroom, total=total,
                kv_tokens=kv_tokens if isinstance(kv_tokens, int) else None,
                max_running_requests=mrr if isinstance(mrr, int) else None,
                mem_fraction_static=float(mfs) if isinstance(mfs, (int, float)) else None,
            ))
    order = {s.label: i for i, s in enumerate(stores)}
    rows.sort(key=lambda m: (m.tp or 0, label_key(m.series.split(": ", 1)[-1] if multi else m.series),
                             order.get(m.store, 0)))
    return tuple(rows)


def summarize(stores: Sequence[LoadedStore]) -> Summary:
    """Empty, all-failed, partial or complete, in one sentence."""
    cells = [c for s in stores for c in s.cells]
    counts = Counter(c.status for c in cells)
    n = len(cells)
    where = "these stores" if len(stores) > 1 else "this store"
    if n == 0:
        servers_failed = sum(1 for s in stores for srv in s.servers if srv.status == "failed")
        extra = f" ({servers_failed} server(s) failed to start)" if servers_failed else ""
        return Summary("empty", f"Empty: {where} holds no cells yet{extra}; nothing was measured.", dict(counts), 0)
    done = counts.get(DONE, 0)
    status_list = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    if done == 0 and (counts.get("failed", 0) + counts.get("skipped", 0)) == n:
        return Summary("all-failed", f"All {n} cells failed or were skipped ({status_list}); nothing was measured.",
                       dict(counts), n)
    if done < n:
        return Summary("partial", f"Partial: {done} of {n} cells done ({status_list}).", dict(counts), n)
    return Summary("complete", f"Complete: all {n} cells done.", dict(counts), n)


def build_tables(stores: Sequence[LoadedStore]) -> Tables:
    ents = entries(stores)  # once: the series names of every cell (compare.py)
    pairs = cell_rows(stores, ents)
    qs = questions(pairs)
    phases = phase_tables(stores, with_standings([r for _, r in pairs], qs))
    failures, logs = failures_and_logs(stores, ents)
    warnings = tuple(f"{s.label}: {w}" for s in stores for w in s.warnings) + tuple(
        f"{s.label}: server {srv.server_id} has no memory plan: {one_line(srv.plan.get('planner_error'))}"
        for s in stores for srv in s.servers
        if isinstance(srv.plan, Mapping) and srv.plan.get("planner_error"))
    secs = section_order(stores)
    return Tables(summary=summarize(stores), phases=phases, best=best_rows(qs), failures=failures,
                  memory=memory_rows(stores), logs=logs, warnings=warnings, categories=category_rows(stores, ents),
                  sections=secs if len(secs) > 1 else (), questions=qs)
