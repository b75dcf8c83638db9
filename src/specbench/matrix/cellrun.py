"""One cell on a running server: exact-length prompts clamped under the context, warm-up, load, metrics.

Prompts come from `specbench.load.workload` (the cell's dataset, lengths and category, counted with the model's own
tokenizer and chat template; each request row keeps its record's category), the sampling from the cell's client
settings (`load_spec`), the load from
`specbench.load.client`, per-cell numbers from `specbench.load.metrics` when present. The server's counters
(`/metrics`) are read after the warm-up and after the measured requests (nothing else in flight), and the prefix
cache is emptied before them where the server offers a route (`hygiene`); the delta gives the mean accept length
(vLLM's own definition: 1 + accepted / drafts, vllm/v1/spec_decode/metrics.py; SGLang with --enable-metrics: its
generation tokens / verify calls). SGLang gives it per request in `/generate`'s `meta_info` (completion_tokens /
spec_verify_ct). Every request's output tokens are counted by the client (load/counting.py); `truth_metrics` adds
the keys of load/integrity.py (docs/contracts.md "Measurement truth"): counts, early stops (a `partial` cell unless
`allow_early_stop`), the running cap and effective concurrency, saturation, per-token ITL, one accept length.

`repeats = N` sends the cell's load N times on the same server, the warm-up once before the first (its requests are
never measured), each repeat with its own prompts (repeat_prompts); the request rows keep their repeat, the metrics
pool every repeat and add `spread` (load/spread.py: mean, std, CV, Student-t 95% interval per metric, the noisy flag).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from specbench.engines import server_auth
from specbench.engines.base import ServerAdapter
from specbench.engines.openai.server import served_model
from specbench.errors import UserError
from specbench.matrix.adapters import local_tokenizer_dir
from specbench.matrix.expansion import Cell
from specbench.matrix.lifecycle import ServerProcess
from specbench.matrix.schema import MatrixSpec
from specbench.matrix.store import RequestRow

if TYPE_CHECKING:  # the load package is imported where a cell runs (a dry run never needs it)
    from specbench.load.prompts import PromptMode
    from specbench.load.results import Api


@dataclass(frozen=True)
class CellContext:
    spec: MatrixSpec
    adapter: ServerAdapter
    base_url: str
    argv: list[str]
    server_info: dict[str, Any]
    settings: dict[str, Any]
    proc: ServerProcess | None = None
    plan: dict[str, Any] | None = None  # the planner's result for what was launched (context_len fallback)
    cache: dict[str, Any] = field(default_factory=dict)  # tokenizer and served model name, per server


@dataclass(frozen=True)
class CellOutcome:
    status: str  # done | partial | failed
    reason: str | None = None
    metrics: dict[str, Any] | None = None
    clamp: dict[str, Any] | None = None
    requests: tuple[RequestRow, ...] = ()


def context_len(ctx: CellContext) -> int | None:
    """What the server reports (SGLang context_len / vLLM max_model_len), else the configured value."""
    info = ctx.server_info or {}
    inner = info.get("info") if isinstance(info.get("info"), dict) else {}
    for key in ("context_len", "context_length", "max_model_len"):
        v = inner.get(key) if inner else None
        if isinstance(v, int) and v > 0:
            return v
    for m in info.get("models") or []:
        v = m.get("max_model_len") if isinstance(m, dict) else None
        if isinstance(v, int) and v > 0:
            return v
    v = ctx.settings.get("context_length")
    if v:
        return int(v)
    v = (ctx.plan or {}).get("context_len")  # the planner's resolved default (the model's max positions)
    return int(v) if isinstance(v, int) and v > 0 else None


def _vocab_size(ctx: CellContext) -> int | None:
    """For token-id prompts without a tokenizer: the vocab size of the matrix's [plan] model config."""
    src = ctx.spec.plan.model_config_
    if not src:
        return None
    from specbench.specs.resolve import load_model_spec

    return int(load_model_spec(src).vocab_size)


def _tokenizer(ctx: CellContext) -> Any:
    if "tokenizer" not in ctx.cache:
        from specbench.load.prompts import ChatTokenizer

        d = local_tokenizer_dir(ctx.spec)
        ctx.cache["tokenizer"] = ChatTokenizer.from_dir(d) if d else None
    return ctx.cache["tokenizer"]


def _model_name(ctx: CellContext) -> str:
    if "model" not in ctx.cache:
        name = ctx.spec.served_model_name
        if not name and ctx.adapter.client_mode(ctx.argv) == "openai":
            name = served_model(ctx.base_url)  # GET /v1/models (vLLM and SGLang both answer it)
        ctx.cache["model"] = name or "default"
    return str(ctx.cache["model"])


def _api_mode(ctx: CellContext) -> tuple[Api, PromptMode, Any, int]:
    """(api, prompt mode, tokenizer, the shortest prompt the mode can send)."""
    choice = ctx.spec.api
    if choice == "auto":  # SGLang --skip-tokenizer-init: /generate with token ids; else chat when templated
        choice = "generate" if ctx.adapter.client_mode(ctx.argv) == "generate-ids" else "auto"
    tok = _tokenizer(ctx)  # None when no tokenizer.json is found (token ids then take the vocab size)
    if choice == "generate":  # token ids: the count is exact without any tokenizer rule
        return "generate", "ids", tok, 1
    if tok is None:
        raise UserError("no tokenizer for exact-length prompts: set `tokenizer` (a folder with tokenizer.json)"
                        " in the matrix, or launch SGLang with --skip-tokenizer-init")
    if choice in ("auto", "chat") and tok.chat_template:
        return "chat", "chat", tok, tok.chat_count([{"role": "user", "content": ""}]) + 1
    if choice == "chat":
        raise UserError(f"api = \"chat\" needs a chat template; {tok.source} has none")
    return "completions", "text", tok, 2


def workload_seed(cell: Cell) -> int:
    """The prompts' seed: a hash of the client settings only, so every server of the matrix (the autoregressive
    baseline and each speculative variant) gets the same requests, and two cells of one server different ones."""
    from specbench.matrix.expansion import cell_identity, stable_id

    ident = {k: v for k, v in cell_identity(dict(cell.client)).items() if k != "repeats"}  # same prompts with or without
    return int(stable_id("wl", ident).split("-")[-1], 16) % 1_000_000_007


def build_cell_workload(cell: Cell, ctx: CellContext, pmode: PromptMode, tok: Any) -> Any:
    """The cell's prompts (warm-up included) from its dataset, lengths and category (load/workload.py)."""
    from specbench.load.lengths import parse_length
    from specbench.load.prompts import CONTEXT_MARGIN
    from specbench.load.workload import WorkloadSpec, build_workload

    c = cell.client
    _, _, _, min_prompt = _api_mode(ctx)
    ws = WorkloadSpec(dataset=str(c.get("dataset") or "specbench-mini"), prompt_tokens=int(c["prompt_tokens"]),
                      output_tokens=int(c["output_tokens"]), prompt_len=parse_length(c.get("prompt_len") or "fixed"),
                      output_len=parse_length(c.get("output_len") or "fixed"), category=c.get("category"),
                      multi_turn=bool(c.get("multi_turn")), seed=workload_seed(cell), base_dir=ctx.spec.matrix_dir)
    n = request_count(c) * repeats_of(c) + int(c.get("warmup_requests") or 0)
    return build_workload(ws, n=n, tokenizer=tok, mode=pmode, context_len=context_len(ctx),
                          margin=CONTEXT_MARGIN.get(ctx.spec.engine, 0), min_prompt=min_prompt,
                          vocab_size=_vocab_size(ctx) if (pmode == "ids" and tok is None) else None)


def request_count(client: Mapping[str, Any]) -> int:
    """The measured requests of a cell: num_requests, raised to requests_per_concurrency x concurrency."""
    n = int(client["num_requests"])
    if client.get("requests_per_concurrency"):
        n = max(n, int(client["requests_per_concurrency"]) * int(client["concurrency"]))
    return n


def load_spec(cell: Cell, ctx: CellContext, api: Api, output_tokens: int) -> Any:
    """The LoadSpec of a cell: its load shape and its sampling (unset keys: temperature 0, ignore_eos on)."""
    from specbench.load.counting import tokenizer_counter
    from specbench.load.results import LoadSpec

    c = cell.client
    rate = c.get("request_rate")
    rate_v = None if isinstance(rate, str) or rate is None or math.isinf(float(rate)) else float(rate)
    stop = c.get("stop")
    return LoadSpec(base_url=ctx.base_url, api=api, model=_model_name(ctx),
                    output_tokens=output_tokens, concurrency=int(c["concurrency"]), request_rate=rate_v,
                    num_requests=request_count(c), warmup_requests=int(c.get("warmup_requests") or 0),
                    request_timeout_s=ctx.spec.timeouts.request_s,
                    temperature=float(c["temperature"]) if c.get("temperature") is not None else 0.0,
                    top_p=c.get("top_p"), top_k=c.get("top_k"), sampling_seed=c.get("seed"),
                    ignore_eos=c.get("ignore_eos") is not False, stop=tuple(stop) if stop is not None else None,
                    extra_body=ctx.adapter.count_body(api), token_counter=tokenizer_counter(_tokenizer(ctx)),
                    api_key=server_auth.current())


def run_cell(cell: Cell, ctx: CellContext, on_request: Callable[[Any], None] | None = None) -> CellOutcome:
    """Send the cell's load (`repeats` times on this server, the warm-up once before the first); `failed` when no
    request succeeded or the server died, `partial` when more requests failed than `max_failed_fraction` allows."""
    n = request_count(cell.client)
    reps = repeats_of(cell.client)
    try:
        api, pmode, tok, _ = _api_mode(ctx)
        if cell.client.get("stop") and pmode == "ids":
            raise UserError("stop strings need the server's tokenizer, and token-id prompts mean the server has none"
                            " (SGLang --skip-tokenizer-init refuses them)")
        work = build_cell_workload(cell, ctx, pmode, tok)
        load = load_spec(cell, ctx, api, max(p.output_tokens or 1 for p in work.prompts))
    except UserError as exc:
        return CellOutcome("failed", reason=f"cannot prepare the cell: {exc}")
    clamp_d = work.clamp_summary()
    runs, rows, scrapes = _run_repeats(cell, ctx, load, work.prompts, n, reps, on_request)
    metrics = cell_metrics_repeats(runs, cell, scrapes, ctx)
    metrics.update(dataset_note(cell, work))
    metrics["clamped"] = clamp_d["clamped"]
    warm_errors = [e for r in runs for e in r.warmup_errors]
    if warm_errors:
        metrics["warmup_errors"] = warm_errors
    total = n * reps
    alive = _alive_after(ctx.proc, failed=metrics["completed"] < total or bool(metrics["failed"]))
    if not alive:
        return CellOutcome("failed", f"server exited (status {ctx.proc.returncode() if ctx.proc else '?'}) "
                                     f"during the cell; {metrics['completed']}/{total} requests completed",
                           metrics, clamp_d, rows)
    if metrics["completed"] == 0:
        first = next((r.error for run in runs for r in run.results if r.error), "no request was sent")
        return CellOutcome("failed", f"no request completed ({metrics['failed']} failed; first error: {first})",
                           metrics, clamp_d, rows)
    outcome = failed_fraction_verdict(metrics, cell.client, [r for run in runs for r in run.results], clamp_d, rows)
    return truth_verdict(early_stop_verdict(outcome, metrics, cell.client), cell)


def truth_verdict(outcome: CellOutcome, cell: Cell) -> CellOutcome:
    """A `done` cell whose server said something the client saw to be false is `partial`, with the reason: a running
    cap exceeded by what ran at once (load/integrity.py::cap_check), speculative-decoding counters that cannot be
    true (integrity.spec_counter_problem: the acceptance keys are then cleared, never stored as measured). Returns
    a new outcome; the metrics it was given are left as they were."""
    from specbench.load.integrity import spec_counter_problem
    from specbench.load.metrics import draft_positions

    metrics = dict(outcome.metrics or {})
    why = []
    if metrics.get("cap_check") == "exceeded":
        why.append(str(metrics.get("cap_check_reason")))
    problem = spec_counter_problem(metrics, draft_positions(cell.server)) if cell.algorithm != "ar" else None
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


def dataset_note(cell: Cell, work: Any) -> dict[str, Any]:
    """`dataset_cycled`: the cell sends more requests than its prompts hold distinct ones (the dataset cycles, so a
    prefix cache can serve repeats of a prompt), with the numbers in `dataset_warning`."""
    sent = request_count(cell.client) * repeats_of(cell.client)
    import json

    distinct = len({json.dumps([p.text, p.token_ids, p.messages]) for p in work.prompts[:sent]})
    cycled = distinct < sent
    return {"dataset_cycled": cycled, "distinct_prompts": distinct,
            "dataset_warning": (f"{sent} measured requests from {distinct} distinct prompts: the dataset "
                                f"{cell.client.get('dataset') or 'specbench-mini'!r} cycles (or its records cut to "
                                "the same text), so a prefix cache can serve repeats") if cycled else None}


def failed_fraction_verdict(metrics: dict[str, Any], client: Mapping[str, Any], results: Any,
                            clamp_d: Any, rows: tuple[RequestRow, ...]) -> CellOutcome:
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
    """`repeats` (default 1)."""
    return int(client.get("repeats") or 1)


def repeat_prompts(prompts: Sequence[Any], n: int, reps: int, k: int) -> list[Any]:
    """Repeat k's prompts: its own n measured prompts, then the warm-up tail (the client takes warm-up prompts
    from the end). Each repeat gets other prompts so that a prefix cache holds none of them from the repeat before;
    with one repeat this is the whole list, as before repeats existed."""
    if reps == 1:
        return list(prompts)
    return list(prompts[k * n:(k + 1) * n]) + list(prompts[reps * n:])


def _run_repeats(cell: Cell, ctx: CellContext, load: Any, prompts: Sequence[Any], n: int, reps: int,
                 on_request: Callable[[Any], None] | None) -> tuple[list[Any], tuple[RequestRow, ...],
                                                                     list[tuple[str | None, str | None]]]:
    """Each repeat's LoadRun, every request as a row (idx running on over the repeats), the /metrics scrapes
    before and after each repeat. A repeat after the server died is not sent."""
    import dataclasses

    from specbench.load.client import run_load

    runs, rows, scrapes = [], [], []
    for k in range(reps):
        if k and ctx.proc is not None and not ctx.proc.alive():
            break
        mine = repeat_prompts(prompts, n, reps, k)
        spec_k = load if k == 0 else dataclasses.replace(load, warmup_requests=0)
        scraped: list[str | None] = []

        def between(scraped: list[str | None] = scraped) -> None:  # after the warm-up: counters count the measured
            hygiene(ctx)
            scraped.append(ctx.adapter.metrics_text(ctx.base_url))

        run = run_load(spec_k, mine, on_request, between)
        before = scraped[0] if scraped else None
        after = ctx.adapter.metrics_text(ctx.base_url) if before is not None else None
        runs.append(run)
        scrapes.append((before, after))
        rows += [RequestRow(idx=k * n + r.idx, prompt_tokens=r.prompt_tokens, output_tokens=r.output_tokens,
                            ttft_s=r.ttft_s, e2e_s=r.e2e_s, itl=list(r.itl_s), error=r.error,
                            accept_len=r.accept_len, spec_verify_ct=r.spec_verify_ct,
                            category=mine[r.idx % len(mine)].category, repeat=k if reps > 1 else None,
                            server_output_tokens=r.server_output_tokens, counted_tokens=r.counted_tokens,
                            count_source=r.count_source, early_stop=r.early_stop)
                 for r in run.results]
    return runs, tuple(rows), scrapes


NO_RESET_ROUTE = "the server offers no prefix-cache reset route"  # `prefix_cache_reset.how` when none was tried


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


def truth_metrics(results: Sequence[Any], cell: Cell, ctx: CellContext | None, m: Mapping[str, Any],
                  counters: tuple[str | None, str | None]) -> dict[str, Any]:
    """The keys of load/integrity.py: counts, the concurrency that ran, saturation, per-token ITL, the common
    accept length (docs/contracts.md "Measurement truth")."""
    from specbench.engines.prometheus import samples
    from specbench.load import integrity

    info = ctx.server_info if ctx is not None else {}
    cap = info.get("running_cap") if isinstance(info, dict) else None
    src = info.get("running_cap_source") if isinstance(info, dict) else None
    out: dict[str, Any] = {}
    out.update(integrity.counts(results))
    out.update(integrity.concurrency(int(cell.client["concurrency"]), cap if isinstance(cap, int) else None, src))
    out.update(integrity.saturation(results, out["queued"], out["running_cap"], closed_loop=is_closed_loop(cell)))
    out.update(integrity.cap_check(results, out["running_cap"], out["running_cap_source"], out["peak_in_flight"]))
    out.update(integrity.itl_per_token(results))
    n = request_count(cell.client)
    out["waves"] = n / out["effective_concurrency"] if out["effective_concurrency"] else None
    if ctx is not None and "cache_reset" in ctx.cache:
        out["prefix_cache_reset"] = ctx.cache["cache_reset"]
    common, source = None, None
    if cell.algorithm != "ar":
        if m.get("accept_length_source") == "vllm_metrics":
            common, source = m.get("accept_length_mean"), "vllm_metrics"
        elif (c := integrity.accept_common_sglang(results)) is not None:
            common, source = c, "sglang_meta_info"
        elif counters[0] is not None and counters[1] is not None:
            before, after = samples(counters[0]), samples(counters[1])
            c = integrity.accept_common_sglang_counters(before, after, sum(1 for r in results if r.ok))
            if c is not None:
                common, source = c, "sglang_metrics"
                if m.get("accept_length_mean") is None:  # SGLang's own definition, as its meta_info would give it
                    out["accept_length_mean"] = integrity.accept_sglang_counters(before, after)
                    out["accept_length_source"] = "sglang_metrics"
        hist = integrity.per_pos_from_histograms(results)
        if hist is not None and not m.get("acceptance_per_pos"):
            out["acceptance_per_pos"] = hist
    out["accept_length_common"] = common
    out["accept_length_common_source"] = source
    return out


def is_closed_loop(cell: Cell) -> bool:
    """A closed loop of `concurrency` workers (no request rate, or "inf"): load/speedup.py::is_rate_cell's opposite."""
    from specbench.load.speedup import is_rate_cell

    return not is_rate_cell(cell.client)


EXIT_GRACE_S = 2.0  # how long a server whose requests failed may take to finish exiting (ServerProcess.exits_within)


def _alive_after(proc: ServerProcess | None, *, failed: bool) -> bool:
    """Is the server still up after its cell? Where requests failed it may be dying (killed, crashed): it is given
    EXIT_GRACE_S to be reaped, so a dead server's cell says `server exited`, not what its dying port looked like."""
    if proc is None:
        return True
    if not proc.alive():
        return False
    return not (failed and proc.exits_within(EXIT_GRACE_S))


def cell_metrics(run: Any, cell: Cell, metrics_before: str | None, metrics_after: str | None,
                 ctx: CellContext | None = None) -> dict[str, Any]:
    """metrics_json (docs/structures.md) by `specbench.load.metrics.aggregate`; speedup is filled after the
    matrix (runner.fill_speedups). An autoregressive cell carries no accept length."""
    from specbench.engines.prometheus import spec_delta
    from specbench.load.metrics import Slo, aggregate, draft_acceptance, draft_positions
    from specbench.load.stall import client_stall_metrics

    c = cell.client
    rate = c.get("request_rate")
    rate_v = None if rate is None or isinstance(rate, str) else float(rate)
    spec = None
    if cell.algorithm != "ar" and metrics_before is not None and metrics_after is not None:
        spec = spec_delta(metrics_before, metrics_after)
    slo = Slo(ttft_ms=c.get("slo_ttft_ms"), tpot_ms=c.get("slo_tpot_ms"))
    m = aggregate(run.results, run.duration_s, concurrency=int(c["concurrency"]), request_rate=rate_v,
                  slo=slo, spec=spec)
    m.update(client_stall_metrics(run.client_stalls, run.duration_s))
    if cell.algorithm == "ar":
        m["accept_length_mean"] = None
        m["accept_lengths"] = []
    else:
        m.update(draft_acceptance(m, draft_positions(cell.server)))
    truth = truth_metrics(run.results, cell, ctx, m, (metrics_before, metrics_after))
    m.update(truth)
    if "accept_length_mean" in truth:  # read from SGLang's counters: its draft acceptance follows
        m.update(draft_acceptance(m, draft_positions(cell.server)))
    return m


def cell_metrics_repeats(runs: Sequence[Any], cell: Cell, scrapes: Sequence[tuple[str | None, str | None]],
                         ctx: CellContext | None = None) -> dict[str, Any]:
    """One repeat: `cell_metrics` as before. Several: the metrics of all repeats' requests pooled (throughputs over
    the summed measured time, percentiles over every request, vLLM counters from the first scrape to the last),
    plus `spread` (load/spread.py) from each repeat's own metrics."""
    from specbench.load.integrity import cap_check, saturation
    from specbench.load.results import LoadRun
    from specbench.load.spread import NOISY_CV_DEFAULT, spread_json
    from specbench.load.stall import Stalls

    raw_runs = list(runs)
    raw = [x for r in runs for x in r.results]
    trims = [trim_run(r, cell.client) for r in runs]
    runs = [r for r, _ in trims]
    if len(runs) == 1:
        m1 = cell_metrics(runs[0], cell, *scrapes[0], ctx=ctx)
        if trims[0][1]:  # over-saturation is the whole run's: its trend is read before the ends are trimmed
            m1.update(saturation(raw, bool(m1.get("queued")), m1.get("running_cap"), closed_loop=is_closed_loop(cell)))
        return {**m1, **trims[0][1]}
    per = [cell_metrics(r, cell, b, a, ctx=ctx) for r, (b, a) in zip(runs, scrapes)]
    pooled = LoadRun(results=tuple(x for r in runs for x in r.results),
                     duration_s=sum(r.duration_s for r in runs), started_at=runs[0].started_at,
                     client_stalls=functools.reduce(Stalls.merged, (r.client_stalls for r in runs)))
    m = cell_metrics(pooled, cell, scrapes[0][0], scrapes[-1][1], ctx=ctx)
    cv = cell.client.get("noisy_cv")
    m["spread"] = spread_json(per, float(cv) if cv is not None else NOISY_CV_DEFAULT)
    # each repeat's own trend (their send times restart at 0): the cell is over-saturated when one of them was
    per_sat = [saturation(r.results, bool(m.get("queued")), m.get("running_cap"), closed_loop=is_closed_loop(cell))
               for r in raw_runs]
    growths = [x["ttft_growth"] for x in per_sat if x["ttft_growth"] is not None]
    peaks = [x["peak_in_flight"] for x in per_sat if x["peak_in_flight"] is not None]
    m.update({"ttft_growth": max(growths) if growths else None, "peak_in_flight": max(peaks) if peaks else None,
              "oversaturated": any(x["oversaturated"] for x in per_sat),
              "saturation_reason": next((x["saturation_reason"] for x in per_sat if x["saturation_reason"]), None)})
    # what ran at once, per repeat too (the pooled send times overlap repeats that never ran together)
    checks = [cap_check(r.results, m.get("running_cap"), m.get("running_cap_source"), x["peak_in_flight"])
              for r, x in zip(raw_runs, per_sat)]
    seen = [c for c in checks if c["observed_concurrency"] is not None]
    if seen:
        order = {"exceeded": 0, "not_reached": 1, "agrees": 2, None: 3}
        m.update(min(seen, key=lambda c: (order[c["cap_check"]], -c["observed_concurrency"])))
    if any(t for _, t in trims):
        m["trimmed_requests"] = sum(int(t.get("trimmed_requests") or 0) for _, t in trims)
        m["trim_window_s"] = [t.get("trim_window_s") for _, t in trims]
    return m


def trim_run(run: Any, client: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The run's steady state (`trim_warmup`, `trim_cooldown`: fractions of its wall time D): the requests sent at or
    after warmup x D and done by (1 - cooldown) x D, over the time from the first kept send to the last kept end;
    `trimmed_requests` and `trim_window_s` say what was left out. Unset: the run as it was."""
    import dataclasses

    a, b = float(client.get("trim_warmup") or 0.0), float(client.get("trim_cooldown") or 0.0)
    if not a and not b:
        return run, {}
    d = run.duration_s
    lo, hi = a * d, (1.0 - b) * d
    kept = tuple(r for r in run.results
                 if r.start_s >= lo and (r.e2e_s is None or r.start_s + r.e2e_s <= hi))
    if not kept:  # nothing in the window: measure the whole run rather than nothing, and say so
        return run, {"trimmed_requests": 0, "trim_window_s": [lo, hi], "trim_note": "no request inside the window"}
    first = min(r.start_s for r in kept)
    last = max(r.start_s + (r.e2e_s or 0.0) for r in kept)
    out = dataclasses.replace(run, results=kept, duration_s=max(last - first, 1e-9))
    return out, {"trimmed_requests": len(run.results) - len(kept), "trim_window_s": [lo, hi]}
