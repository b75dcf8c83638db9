"""One cell on a running server: exact-length prompts clamped under the context, warm-up, load, metrics.

Prompts come from `specbench.load.workload` (the cell's dataset, lengths and category, counted with the model's own
tokenizer and chat template; each request row keeps its record's category), the sampling from the cell's client
settings (matrix/cellload.py: what a cell sends), the load from
`specbench.load.client`, per-cell numbers from `specbench.load.metrics` when present. The server's counters
(`/metrics`) are read after the warm-up and after the measured requests (nothing else in flight), and the prefix
cache is emptied before them where the server offers a route (`hygiene`); the delta gives the mean accept length
(vLLM's own definition: 1 + accepted / drafts, vllm/v1/spec_decode/metrics.py; SGLang with --enable-metrics: its
generation tokens / verify calls). SGLang gives it per request in `/generate`'s `meta_info` (completion_tokens /
spec_verify_ct). Every request's output tokens are counted by the client (load/counting.py); the metrics
(matrix/repeat_metrics.py) add the keys of load/integrity.py (docs/contracts.md "Measurement truth"): counts, early
stops (a `partial` cell unless `allow_early_stop`), the running cap and effective concurrency, saturation, per-token
ITL, one accept length.

`repeats = N` sends the cell's load N times on the same server, the warm-up once before the first (its requests are
never measured), each repeat with its own prompts (repeat_prompts); the request rows keep their repeat, the metrics
pool every repeat and add `spread` (load/spread.py: mean, std, CV, Student-t 95% interval per metric, the noisy flag).
A cell's visit (matrix/visits.py) may run only some of its repeats on this boot (`repeat_across_boots`, a resumed
cell, a repeat-until-decided round): each repeat is stored as it ends (matrix/store_rows.py) and the metrics are
computed from all the cell's stored repeats, as if they had run in one go.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypedDict

from specbench.errors import UserError
from specbench.matrix.cellload import CellContext, api_mode, build_cell_workload, load_spec
from specbench.matrix.expansion import Cell
from specbench.matrix.lifecycle import ServerProcess
from specbench.matrix.repeat_metrics import cell_metrics_repeats, request_count, request_rows
from specbench.matrix.store_rows import CounterDelta, RepeatRecord, StoredRepeat
from specbench.matrix.visits import Visit, first_visit, policy_of
from specbench.matrix.warmup import warmup_count

__all__ = ["CellOutcome", "hygiene", "request_count", "run_cell", "truth_verdict"]

@dataclass(frozen=True)
class CellOutcome:
    status: str  # done | partial | failed | continue (the visit leaves the cell unfinished: matrix/visits.py)
    reason: str | None = None
    metrics: dict[str, Any] | None = None
    clamp: dict[str, Any] | None = None
    requests: tuple[Any, ...] = ()  # request rows written with the outcome (besides `repeat`'s)
    repeat: StoredRepeat | None = None  # the last repeat, written with the cell's status in one transaction


def run_cell(cell: Cell, ctx: CellContext, on_request: Callable[[Any], None] | None = None,
             on_repeat: Callable[[StoredRepeat], None] | None = None) -> CellOutcome:
    """Send the cell's load for the repeats of its visit (matrix/visits.py; without one: all its planned repeats on
    this server, the warm-up once before the first). Every repeat but the one that finishes the cell is handed to
    `on_repeat` (the store) as it ends; the finishing one rides with the outcome (`CellOutcome.repeat`, written with
    the cell's status in one transaction). The metrics are those of every repeat of the cell, the stored ones
    included (matrix/repeat_metrics.py). `continue` when the visit leaves the cell unfinished; `failed` when no
    request succeeded or the server died, `partial` when more requests failed than `max_failed_fraction` allows."""
    visit = cell.visit or first_visit(cell.client)
    n = request_count(cell.client)
    try:
        api, pmode, tok, _ = api_mode(ctx)
        if cell.client.get("stop") and pmode == "ids":
            raise UserError("stop strings need the server's tokenizer, and token-id prompts mean the server has none"
                            " (SGLang --skip-tokenizer-init refuses them)")
        work = build_cell_workload(cell, ctx, pmode, tok, visit.slots)
        load = load_spec(cell, ctx, api, max(p.output_tokens or 1 for p in work.prompts))
    except UserError as exc:
        return CellOutcome("failed", reason=f"cannot prepare the cell: {exc}")
    clamp_d = work.clamp_summary()
    new, stored = _run_repeats(cell, ctx, load, work.prompts, n, visit, on_request, on_repeat)
    every = list(visit.prior) + new
    if not every:  # nothing stored and nothing sent (a dead server before the first repeat)
        return CellOutcome("failed", f"server exited (status {ctx.proc.returncode() if ctx.proc else '?'}) "
                                     "before the cell's first request")
    new_results = [r for rep in new for r in rep.rows]
    completed_new = sum(1 for r in new_results if r.error is None)
    alive = _alive_after(ctx.proc, failed=completed_new < n * len(new) or any(r.error for r in new_results))
    last = new[-1] if new and stored < len(new) else None  # the finishing repeat, not stored yet
    if not visit.finish and alive and len(new) == visit.repeats:
        return CellOutcome("continue", clamp=clamp_d)
    metrics = cell_metrics_repeats(every, cell)
    metrics.update(dataset_note(cell, work, every, n))
    metrics["clamped"] = clamp_d["clamped"]
    total = n * len(every)
    if not alive:
        return CellOutcome("failed", f"server exited (status {ctx.proc.returncode() if ctx.proc else '?'}) "
                                     f"during the cell; {metrics['completed']}/{total} requests completed",
                           metrics, clamp_d, repeat=last)
    if metrics["completed"] == 0:
        first = next((r.error for rep in every for r in rep.rows if r.error), "no request was sent")
        return CellOutcome("failed", f"no request completed ({metrics['failed']} failed; first error: {first})",
                           metrics, clamp_d, repeat=last)
    outcome = failed_fraction_verdict(metrics, cell.client, [r for rep in every for r in rep.rows], clamp_d, ())
    return replace(truth_verdict(early_stop_verdict(outcome, metrics, cell.client), cell), repeat=last)


def truth_verdict(outcome: CellOutcome, cell: Cell) -> CellOutcome:
    """A `done` cell whose server said something the client saw to be false is `partial`, with the reason: a running
    cap exceeded by what ran at once (load/integrity.py::cap_check), speculative-decoding counters that cannot be
    true (integrity.spec_counter_problem: the acceptance keys are then cleared, never stored as measured). Returns
    a new outcome; the metrics it was given are left as they were."""
    from specbench.load.integrity import spec_counter_problem
    from specbench.load.metrics import draft_positions
    from specbench.load.speedup import runs_autoregressive

    metrics = dict(outcome.metrics or {})
    why = []
    if metrics.get("cap_check") == "exceeded":
        why.append(str(metrics.get("cap_check_reason")))
    problem = spec_counter_problem(metrics, draft_positions(cell.server)) if not runs_autoregressive(cell.algorithm) else None
    if problem is not None:
        metrics.update(acceptance_error=problem, accept_length_mean=None, accept_length_common=None,
                       draft_acceptance_rate=None, accept_lengths=[])
        metrics.pop("acceptance_per_pos", None)
        why.append(f"the server's speculative-decoding numbers cannot be true: {problem}; acceptance not stored")
    if outcome.status != "done" or not why:
        return replace(outcome, metrics=metrics if outcome.metrics is not None else None)
    return replace(outcome, status="partial", reason="; ".join(why), metrics=metrics)


def early_stop_verdict(outcome: CellOutcome, metrics: dict[str, Any], client: Mapping[str, Any]) -> CellOutcome:
    """A `done` cell whose requests asked ignore_eos and ended before their max_tokens is `partial` (the server
    stopped early: its throughput is not that of the asked lengths) unless the matrix allows early stops."""
    early = int(metrics.get("early_stops") or 0)
    if outcome.status != "done" or not early or client.get("allow_early_stop"):
        return outcome
    total = int(metrics.get("completed") or 0)
    return CellOutcome("partial", f"{early}/{total} requests ended before their max_tokens despite ignore_eos "
                                  f"({metrics.get('early_stop_example')}); set allow_early_stop = true to accept",
                       outcome.metrics, outcome.clamp, outcome.requests)


class DatasetNote(TypedDict):
    """The keys `dataset_note` adds to a cell's metrics (docs/contracts.md)."""

    dataset_cycled: bool
    distinct_prompts: int
    dataset_warning: str | None


def dataset_note(cell: Cell, work: Any, every: Sequence[StoredRepeat], n: int) -> DatasetNote:
    """`dataset_cycled`: a prefix cache could serve a measured prompt from an earlier request of the cell. Within one
    repeat that is a prompt sent twice; across repeats only where the cache was not emptied between them (hygiene
    before each repeat: with every reset answered, repeat 3 may reuse repeat 1's prompts and still start cold).
    `distinct_prompts` counts the distinct measured prompts; `dataset_warning` says why when it cycled."""
    import json

    def key(p: Any) -> str:
        return json.dumps([p.text, p.token_ids, p.messages])

    slots = max((r.record.repeat for r in every), default=0) + 1
    sent = [repeat_prompts(work.prompts, n, slots, r.record.repeat)[:n] for r in every]
    distinct = len({key(p) for prompts in sent for p in prompts})
    within = max((len(prompts) - len({key(p) for p in prompts}) for prompts in sent), default=0)
    emptied = all(isinstance(r.record.cache_reset, dict) and r.record.cache_reset.get("reset") is True
                  for r in every[1:])
    across = distinct < n * len(every) and not emptied
    name = cell.client.get("dataset") or "specbench-mini"
    why = (f"{within} of one repeat's {n} requests repeat a prompt: the dataset {name!r} cycles (or its records cut "
           "to the same text), so a prefix cache can serve repeats" if within else
           f"{n * len(every)} measured requests from {distinct} distinct prompts and the prefix cache not emptied "
           f"between repeats: the dataset {name!r} cycles, so a prefix cache can serve a repeat from the one before"
           if across else None)
    return DatasetNote(dataset_cycled=why is not None, distinct_prompts=distinct, dataset_warning=why)


def failed_fraction_verdict(metrics: dict[str, Any], client: Mapping[str, Any], results: Any,
                            clamp_d: Any, rows: tuple[Any, ...]) -> CellOutcome:
    """`done` when the failed requests are within the client's `max_failed_fraction` (default 0: none may fail),
    else `partial` with the count and the first error (the cell measured only what succeeded)."""
    failed = int(metrics.get("failed") or 0)
    total = failed + int(metrics.get("completed") or 0)
    limit = float(client.get("max_failed_fraction") or 0.0)
    if failed and failed > limit * total:
        first = next((r.error for r in results if r.error), "?")
        return CellOutcome("partial", f"{failed}/{total} requests failed (max_failed_fraction {limit:g});"
                                      f" first error: {first}", metrics, clamp_d, rows)
    return CellOutcome("done", None, metrics, clamp_d, rows)


def repeats_of(client: Mapping[str, Any]) -> int:
    """The planned repeats: `repeats` (default 1; with a range its `min`, matrix/visits.py)."""
    return policy_of(client).min


def repeat_prompts(prompts: Sequence[Any], n: int, reps: int, k: int) -> list[Any]:
    """Repeat k's prompts: its own n measured prompts, then the warm-up tail (the client takes warm-up prompts
    from the end). Each repeat gets other prompts so that a prefix cache holds none of them from the repeat before;
    with one repeat this is the whole list, as before repeats existed."""
    if reps == 1:
        return list(prompts)
    return list(prompts[k * n:(k + 1) * n]) + list(prompts[reps * n:])


def _run_repeats(cell: Cell, ctx: CellContext, load: Any, prompts: Sequence[Any], n: int, visit: Visit,
                 on_request: Callable[[Any], None] | None,
                 on_repeat: Callable[[StoredRepeat], None] | None) -> tuple[list[StoredRepeat], int]:
    """The visit's repeats, each as it would be read back from the store: its record (matrix/store_rows.py: measured
    time, stalls, the /metrics counter deltas read after its warm-up and at its end, the boot's running cap, the
    prefix-cache reset) and its request rows (idx running on over the repeats: repeat k's from k x n), and how many
    of them went to `on_repeat` as they ended (all but the one that finishes the cell). The warm-up runs before the
    visit's first repeat (each boot's), a full wave where the boot has not run the cell's concurrency (warmup.py). A repeat after the server died is not sent."""
    import dataclasses

    from specbench.load.client import run_load

    out: list[StoredRepeat] = []
    stored = 0
    info = ctx.server_info if isinstance(ctx.server_info, dict) else {}
    cap = info.get("running_cap")
    for k in range(visit.start, visit.stop):
        if k > visit.start and ctx.proc is not None and not ctx.proc.alive():
            break
        mine = repeat_prompts(prompts, n, visit.slots, k)
        warm = warmup_count(cell.client, ctx.cache.setdefault("warmed_concurrency", set())) if k == visit.start else 0
        spec_k = dataclasses.replace(load, warmup_requests=warm)
        scraped: list[str | None] = []

        def between(scraped: list[str | None] = scraped) -> None:  # after the warm-up: counters count the measured
            hygiene(ctx)
            scraped.append(ctx.adapter.metrics_text(ctx.base_url))

        run = run_load(spec_k, mine, on_request, between)
        before = scraped[0] if scraped else None
        after = ctx.adapter.metrics_text(ctx.base_url) if before is not None else None
        rec = RepeatRecord(repeat=k, started_at=run.started_at, duration_s=run.duration_s, server_id=cell.server_id,
                           boot_started_at=ctx.boot_started_at, round=visit.round, client_cpu_s=run.client_cpu_s,
                           stall_longest_s=run.client_stalls.longest_s, stall_total_s=run.client_stalls.total_s,
                           counters=CounterDelta.between(before, after),
                           running_cap=cap if isinstance(cap, int) and not isinstance(cap, bool) else None,
                           running_cap_source=info.get("running_cap_source"),
                           cache_reset=ctx.cache.get("cache_reset"), warmup_errors=tuple(run.warmup_errors),
                           reason=visit.reason)
        rows = request_rows(run, k * n, k if visit.slots > 1 else None, [p.category for p in mine[:n]] or [None])
        out.append(StoredRepeat(rec, rows))
        if on_repeat is not None and not (visit.finish and k == visit.stop - 1):
            on_repeat(out[-1])  # in the store now: a run stopped after this repeat keeps it
            stored += 1
    return out, stored


NO_RESET_ROUTE = "the server offers no prefix-cache reset route"  # `prefix_cache_reset.how` when none was tried


def no_reset_route(how: str | None) -> bool:
    """Did the server offer no reset route? None tried (NO_RESET_ROUTE), or the route answered 404: it is not mounted
    (vLLM mounts /reset_prefix_cache only with VLLM_SERVER_DEV_MODE=1, vllm/entrypoints/serve/__init__.py@0.32.0), so
    nothing failed: each repeat sends other prompts, and the cell says so instead of warning."""
    return bool(how) and (str(how).startswith(NO_RESET_ROUTE) or " HTTP 404" in f" {how}")


def hygiene(ctx: CellContext) -> None:
    """Before each measured run: empty the server's prefix cache where it offers a route for it
    (engines/base.py::ServerAdapter.cache_reset_path), so no repeat or cell is served from an earlier one's cache;
    what happened is kept in ctx.cache["cache_reset"] for the metrics."""
    from specbench.engines.openai.server import post_path

    path = ctx.adapter.cache_reset_path()
    if path is None:
        ctx.cache["cache_reset"] = {"reset": False, "how": NO_RESET_ROUTE}
        return
    ok, how = post_path(ctx.base_url, path)
    ctx.cache["cache_reset"] = {"reset": ok, "how": how}


EXIT_GRACE_S = 2.0  # how long a server whose requests failed may take to finish exiting (ServerProcess.exits_within)


def _alive_after(proc: ServerProcess | None, *, failed: bool) -> bool:
    """Is the server still up after its cell? Where requests failed it may be dying (killed, crashed): it is given
    EXIT_GRACE_S to be reaped, so a dead server's cell says `server exited`, not what its dying port looked like."""
    if proc is None:
        return True
    if not proc.alive():
        return False
    return not (failed and proc.exits_within(EXIT_GRACE_S))


