"""The rows a cell's measurement is re-derived from: one per request (`requests`), one per repeat (`repeat_runs`), one
per boot of a server (`boots`); their types and the SQL that writes and reads them (matrix/store.py calls these).

A repeat is the unit that is kept: its request rows and its `repeat_runs` row are written in one transaction as it
ends, so a run killed mid-repeat loses only that repeat, and a resumed run goes on from the repeats stored. Everything
a cell's metrics are computed from is here (matrix/repeat_metrics.py reads only these rows): each request's times
relative to its repeat's start (`sent_at` - `repeat_runs.started_at`), its counts and SGLang acceptance histogram, and
per repeat its measured time, the client's stalls, the server's speculative-decoding counter deltas, the running cap
and the prefix-cache reset of its boot.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from specbench.engines.prometheus import SpecCounters, samples, spec_counters
from specbench.redact import redact_obj, redact_text


def _j(value: object) -> str | None:
    """JSON of a value with its secrets masked (specbench/redact.py): every JSON column goes through here."""
    return None if value is None else json.dumps(redact_obj(value), default=str)


def _t(text: str | None) -> str | None:
    """A text column (log, reason, a path) with its secrets masked."""
    return None if text is None else redact_text(storable(text))


def storable(text: str) -> str:
    """Text SQLite can hold: a path with bytes that are no UTF-8 (a folder named in Latin-1, which Python reads as
    lone surrogates) is written with those bytes as `\\xNN` escapes, not a UnicodeEncodeError mid-run."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        try:
            return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        except UnicodeEncodeError:  # a surrogate no file name gives (JSON's "\ud800")
            return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _unj(text: str | None) -> Any:
    return None if text is None else json.loads(text)


@dataclass(frozen=True)
class RequestRow:
    idx: int
    prompt_tokens: int | None
    output_tokens: int | None
    ttft_s: float | None
    e2e_s: float | None
    itl: list[float] | None
    error: str | None
    accept_len: float | None = None
    spec_verify_ct: int | None = None
    category: str | None = None  # the dataset record's category
    repeat: int | None = None  # which repeat of the cell (None: the cell ran once)
    server_output_tokens: int | None = None  # the server's own count (usage / meta_info)
    counted_tokens: int | None = None  # the client's count (load/counting.py)
    count_source: str | None = None  # token_ids | tokenizer | None
    early_stop: bool | None = None  # asked ignore_eos, ended before max_tokens
    sent_at: float | None = None  # epoch seconds: its repeat's started_at + its send time in the repeat
    first_token_at: float | None = None  # sent_at + ttft_s (None without a first token)
    ended_at: float | None = None  # sent_at + e2e_s (None when it never ended)
    boot: int | None = None  # which boot of its server (boots.boot); set by the store from the repeat's boot
    max_tokens: int | None = None  # the output tokens the request asked for
    accept_hist: tuple[int, ...] | None = None  # SGLang meta_info spec_correct_drafts_histogram


REQUEST_INSERT = """INSERT OR REPLACE INTO requests(cell_id, idx, prompt_tokens, output_tokens, ttft_s, e2e_s, itl_json,
    error, accept_len, spec_verify_ct, category, repeat, server_output_tokens, counted_tokens, count_source, early_stop,
    sent_at, first_token_at, ended_at, boot, max_tokens, accept_hist_json)
    VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"""


def insert_requests(conn: sqlite3.Connection, cell_id: str, rows: Iterable[RequestRow],
                    boot: int | None = None) -> None:
    """Write request rows (inside the caller's transaction); `boot` (when given) for every row."""
    conn.executemany(REQUEST_INSERT, [
        (cell_id, r.idx, r.prompt_tokens, r.output_tokens, r.ttft_s, r.e2e_s, _j(r.itl), _t(r.error), r.accept_len,
         r.spec_verify_ct, r.category, r.repeat, r.server_output_tokens, r.counted_tokens, r.count_source,
         None if r.early_stop is None else int(r.early_stop), r.sent_at, r.first_token_at, r.ended_at,
         boot if boot is not None else r.boot, r.max_tokens,
         None if r.accept_hist is None else json.dumps(list(r.accept_hist))) for r in rows])


# ---------------------------------------------------------------- the counters of one repeat


class CounterJson(TypedDict):
    """`repeat_runs.counters_json`: a CounterDelta as stored (key order as written)."""

    drafts: float
    draft_tokens: float
    accepted: float
    accepted_per_pos: list[float]
    sglang_generated: float
    sglang_verify_calls: float


class CacheReset(TypedDict):
    """`repeat_runs.cache_reset_json` (matrix/cellrun.py::hygiene): was the server's prefix cache emptied before the
    repeat, and how (the route's answer, or why none was tried); metrics_json keeps it as `prefix_cache_reset`."""

    reset: bool
    how: str

SGLANG_GENERATED = "sglang:generation_tokens_total"
SGLANG_VERIFY = "sglang:spec_verify_calls_total"


@dataclass(frozen=True)
class CounterDelta:
    """What the server's /metrics counters moved by over one repeat (after its warm-up, to its end): vLLM's
    spec-decode counters (engines/prometheus.py::SpecCounters) and SGLang's generated tokens and verify calls. The
    deltas of several repeats add up (`plus`) to what one scrape before the first and one after the last would give
    when nothing else ran on the server in between; a counter that went down in a repeat (a restart) stays negative
    in the sum, so load/integrity.py::spec_counter_problem still sees it."""

    spec: SpecCounters
    sglang_generated: float = 0.0
    sglang_verify_calls: float = 0.0

    @staticmethod
    def between(before: str | None, after: str | None) -> CounterDelta | None:
        """The delta of two scrapes; None when either is missing (the server has no /metrics)."""
        if before is None or after is None:
            return None
        b, a = samples(before), samples(after)
        return CounterDelta(spec_counters(after).minus(spec_counters(before)),
                            a.get(SGLANG_GENERATED, 0.0) - b.get(SGLANG_GENERATED, 0.0),
                            a.get(SGLANG_VERIFY, 0.0) - b.get(SGLANG_VERIFY, 0.0))

    def plus(self, other: CounterDelta) -> CounterDelta:
        s, o = self.spec, other.spec
        n = max(len(s.accepted_per_pos), len(o.accepted_per_pos))
        pa = s.accepted_per_pos + (0.0,) * (n - len(s.accepted_per_pos))
        pb = o.accepted_per_pos + (0.0,) * (n - len(o.accepted_per_pos))
        return CounterDelta(SpecCounters(_add(s.drafts, o.drafts), _add(s.draft_tokens, o.draft_tokens),
                                         _add(s.accepted, o.accepted), tuple(_add(x, y) for x, y in zip(pa, pb))),
                            _add(self.sglang_generated, other.sglang_generated),
                            _add(self.sglang_verify_calls, other.sglang_verify_calls))

    def sglang_samples(self) -> tuple[dict[str, float], dict[str, float]]:
        """(before, after) sample maps whose difference is this delta (what load/integrity.py's SGLang readers
        take)."""
        return {}, {SGLANG_GENERATED: self.sglang_generated, SGLANG_VERIFY: self.sglang_verify_calls}

    def as_json(self) -> CounterJson:
        s = self.spec
        return {"drafts": s.drafts, "draft_tokens": s.draft_tokens, "accepted": s.accepted,
                "accepted_per_pos": list(s.accepted_per_pos), "sglang_generated": self.sglang_generated,
                "sglang_verify_calls": self.sglang_verify_calls}

    @staticmethod
    def from_json(d: Any) -> CounterDelta | None:
        if not isinstance(d, Mapping):
            return None
        return CounterDelta(SpecCounters(float(d.get("drafts") or 0.0), float(d.get("draft_tokens") or 0.0),
                                         float(d.get("accepted") or 0.0),
                                         tuple(float(x) for x in d.get("accepted_per_pos") or ())),
                            float(d.get("sglang_generated") or 0.0), float(d.get("sglang_verify_calls") or 0.0))


def _add(a: float, b: float) -> float:
    """A sum of two counter deltas; a negative one (a counter that went down) is kept as the sum's."""
    return a + b if a >= 0 and b >= 0 else min(a, b)


def summed(deltas: Sequence[CounterDelta | None]) -> CounterDelta | None:
    """The repeats' deltas added up; None when any repeat has none (its counters were not read)."""
    if not deltas or any(d is None for d in deltas):
        return None
    out = deltas[0]
    assert out is not None
    for d in deltas[1:]:
        assert d is not None
        out = out.plus(d)
    return out


# ---------------------------------------------------------------- one repeat


@dataclass(frozen=True)
class RepeatRecord:
    """One repeat of a cell as `repeat_runs` keeps it: where and when it ran, how long it measured, and what the
    cell's metrics need besides its request rows."""

    repeat: int  # 0-based; the request rows of repeat k carry `repeat` = k (NULL for a cell measured once)
    started_at: float  # epoch seconds at the first measured send (load/results.py::LoadRun.started_at)
    duration_s: float  # first measured send to last completion (LoadRun.duration_s)
    server_id: str = ""
    boot_started_at: float | None = None  # the boot's key (boots.started_at); the store turns it into `boot`
    boot: int | None = None  # which boot of the server (1, 2, ...), as read back from the store
    round: int = 0  # 0: a planned repeat (repeats = N, or the first `min`); r >= 1: the r-th repeat-until-decided round
    client_cpu_s: float = 0.0
    stall_longest_s: float = 0.0  # load/stall.py::Stalls
    stall_total_s: float = 0.0
    counters: CounterDelta | None = None
    running_cap: int | None = None  # the boot's running cap (engines/base.py::ServerAdapter.running_cap)
    running_cap_source: str | None = None
    cache_reset: CacheReset | None = None  # matrix/cellrun.py::hygiene before this repeat
    warmup_errors: tuple[str, ...] = ()  # the warm-up before this repeat (a visit's first repeat only)
    reason: str | None = None  # why the repeat ran (a round's decision), None for a planned one


@dataclass(frozen=True)
class StoredRepeat:
    """One repeat's record and its request rows: everything its part of a cell's metrics is computed from."""

    record: RepeatRecord
    rows: tuple[RequestRow, ...]


REPEAT_INSERT = """INSERT OR REPLACE INTO repeat_runs(cell_id, repeat, round, server_id, boot, started_at, duration_s,
    client_cpu_s, stall_longest_s, stall_total_s, counters_json, running_cap, running_cap_source, cache_reset_json,
    warmup_errors_json, reason) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"""


class BootRow(TypedDict):
    """A row of `boots`: the n-th boot of a server, when it started, its log and process."""

    server_id: str
    boot: int  # 1, 2, ... per server
    started_at: float
    log_path: str | None
    pid: int | None


def boot_row(r: sqlite3.Row) -> BootRow:
    return {"server_id": r["server_id"], "boot": r["boot"], "started_at": r["started_at"], "log_path": r["log_path"],
            "pid": r["pid"]}


def boot_of(conn: sqlite3.Connection, server_id: str, started_at: float | None) -> int | None:
    if started_at is None:
        return None
    row = conn.execute("SELECT boot FROM boots WHERE server_id=? AND started_at=?", (server_id, started_at)).fetchone()
    return int(row[0]) if row else None


def insert_boot(conn: sqlite3.Connection, server_id: str, started_at: float, log_path: str | None,
                pid: int | None) -> int:
    """A boot of a server (inside the caller's transaction): the next number for that server, once per key."""
    have = boot_of(conn, server_id, started_at)
    if have is not None:
        return have
    (top,) = conn.execute("SELECT COALESCE(MAX(boot), 0) FROM boots WHERE server_id=?", (server_id,)).fetchone()
    conn.execute("INSERT INTO boots(server_id, boot, started_at, log_path, pid) VALUES(?,?,?,?,?)",
                 (server_id, int(top) + 1, started_at, _t(log_path), pid))
    return int(top) + 1


def insert_repeat(conn: sqlite3.Connection, cell_id: str, rep: StoredRepeat) -> None:
    """A repeat's record and request rows (inside the caller's transaction), each row with the repeat's boot."""
    r = rep.record
    boot = boot_of(conn, r.server_id, r.boot_started_at) if r.boot is None else r.boot
    conn.execute(REPEAT_INSERT, (
        cell_id, r.repeat, r.round, r.server_id, boot, r.started_at, r.duration_s, r.client_cpu_s,
        r.stall_longest_s, r.stall_total_s, _j(r.counters.as_json()) if r.counters is not None else None,
        r.running_cap, r.running_cap_source, _j(r.cache_reset), _j(list(r.warmup_errors)), _t(r.reason)))
    insert_requests(conn, cell_id, rep.rows, boot)


def request_rows(conn: sqlite3.Connection, cell_id: str) -> list[RequestRow]:
    """A cell's request rows in idx order, as they were written (`insert_requests`); a JSON column that no longer
    decodes raises ValueError."""
    out = []
    for q in conn.execute("SELECT idx, prompt_tokens, output_tokens, ttft_s, e2e_s, itl_json, error, accept_len, "
                          "spec_verify_ct, category, repeat, server_output_tokens, counted_tokens, count_source, "
                          "early_stop, sent_at, first_token_at, ended_at, boot, max_tokens, accept_hist_json "
                          "FROM requests WHERE cell_id=? ORDER BY idx", (cell_id,)):
        hist = _unj(q[20])
        out.append(RequestRow(q[0], q[1], q[2], q[3], q[4], _unj(q[5]), q[6], q[7], q[8], q[9], q[10], q[11], q[12],
                              q[13], None if q[14] is None else bool(q[14]), q[15], q[16], q[17], q[18], q[19],
                              tuple(int(x) for x in hist) if isinstance(hist, list) else None))
    return out


def read_repeats(conn: sqlite3.Connection, cell_id: str) -> list[StoredRepeat]:
    """A cell's stored repeats in repeat order, each with its request rows."""
    recs = conn.execute("SELECT repeat, round, server_id, boot, started_at, duration_s, client_cpu_s, "
                        "stall_longest_s, stall_total_s, counters_json, running_cap, running_cap_source, "
                        "cache_reset_json, warmup_errors_json, reason FROM repeat_runs WHERE cell_id=? "
                        "ORDER BY repeat", (cell_id,)).fetchall()
    if not recs:
        return []
    by_rep: dict[int, list[RequestRow]] = {}
    for row in request_rows(conn, cell_id):
        by_rep.setdefault(int(row.repeat or 0), []).append(row)
    out = []
    for (rep, rnd, sid, boot, started, dur, cpu, longest, total, counters, cap, src, reset, warm, reason) in recs:
        rec = RepeatRecord(repeat=int(rep), started_at=float(started), duration_s=float(dur), server_id=sid or "",
                           boot=boot, round=int(rnd or 0), client_cpu_s=float(cpu or 0.0),
                           stall_longest_s=float(longest or 0.0), stall_total_s=float(total or 0.0),
                           counters=CounterDelta.from_json(_unj(counters)), running_cap=cap, running_cap_source=src,
                           cache_reset=_unj(reset), warmup_errors=tuple(_unj(warm) or ()), reason=reason)
        out.append(StoredRepeat(rec, tuple(by_rep.get(int(rep), ()))))
    return out


def repeat_counts(conn: sqlite3.Connection) -> dict[str, int]:
    """{cell id: repeats stored} over the whole store."""
    return {str(c): int(n) for c, n in conn.execute("SELECT cell_id, count(*) FROM repeat_runs GROUP BY cell_id")}
