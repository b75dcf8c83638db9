"""One cell on a running server: exact-length prompts clamped under the context, warm-up, load, metrics.

Prompts come from `specbench.load.prompts` (the model's own tokenizer and chat template), the load from
`specbench.load.client`, per-cell numbers from `specbench.load.metrics` when present. vLLM's speculative
counters (`/metrics`) are read before and after the cell; the delta gives the mean accept length
(vLLM's own definition: 1 + accepted / drafts, vllm/v1/spec_decode/metrics.py). SGLang gives it per
request in `meta_info` (completion_tokens / spec_verify_ct).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from specbench.errors import UserError
from specbench.matrix.adapters import Adapter, local_tokenizer_dir, served_model
from specbench.matrix.lifecycle import ServerProcess
from specbench.matrix.spec import Cell, MatrixSpec
from specbench.matrix.store import RequestRow


@dataclass(frozen=True)
class CellContext:
    spec: MatrixSpec
    adapter: Adapter
    base_url: str
    argv: list[str]
    server_info: dict[str, Any]
    settings: dict[str, Any]
    proc: ServerProcess | None = None
    cache: dict[str, Any] = field(default_factory=dict)  # tokenizer and served model name, per server


@dataclass(frozen=True)
class CellOutcome:
    status: str  # done | failed
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
    return int(v) if v else None


def _tokenizer(ctx: CellContext) -> Any:
    if "tokenizer" not in ctx.cache:
        from specbench.load.prompts import ChatTokenizer

        d = local_tokenizer_dir(ctx.spec)
        ctx.cache["tokenizer"] = ChatTokenizer.from_dir(d) if d else None
    return ctx.cache["tokenizer"]


def _model_name(ctx: CellContext) -> str:
    if "model" not in ctx.cache:
        name = ctx.spec.served_model_name
        if not name and ctx.adapter.engine != "sglang":
            name = served_model(ctx.base_url)
        ctx.cache["model"] = name or ""
    return str(ctx.cache["model"])


def plan_requests(cell: Cell, ctx: CellContext) -> tuple[str, str, Any, Any]:
    """(api, prompt mode, tokenizer, clamp) for this cell."""
    from specbench.load.prompts import CONTEXT_MARGIN, clamp_lengths

    mode = ctx.adapter.client_mode(ctx.argv)
    tok = _tokenizer(ctx)
    if mode == "generate-ids":
        api, pmode, min_prompt = "generate", "ids", 1
    elif tok is not None and tok.chat_template:
        api, pmode = "chat", "chat"
        min_prompt = tok.chat_count([{"role": "user", "content": ""}]) + 1
    elif tok is not None:
        api, pmode, min_prompt = "completions", "text", 2
    else:
        raise UserError("no tokenizer for exact-length prompts: set `tokenizer` (a folder with tokenizer.json)"
                        " in the matrix, or launch SGLang with --skip-tokenizer-init")
    c = cell.client
    clamp = clamp_lengths(int(c["prompt_tokens"]), int(c["output_tokens"]), context_len(ctx),
                          margin=CONTEXT_MARGIN.get(ctx.spec.engine, 0), min_prompt_tokens=min_prompt)
    return api, pmode, tok, clamp


def run_cell(cell: Cell, ctx: CellContext, on_request: Callable[[Any], None] | None = None) -> CellOutcome:
    """Send the cell's load; `failed` when no request succeeded or the server died."""
    from specbench.load.client import LoadSpec, run_load
    from specbench.load.prompts import build_prompts

    c = cell.client
    try:
        api, pmode, tok, clamp = plan_requests(cell, ctx)
        n, w = int(c["num_requests"]), int(c.get("warmup_requests") or 0)
        prompts = build_prompts(tok, n=n + w, prompt_tokens=clamp.prompt_tokens, mode=pmode,
                                seed=int(cell.cell_id.split("-")[-1], 16) % 1_000_000)
        rate = c.get("request_rate")
        rate_v = None if isinstance(rate, str) or rate is None or math.isinf(float(rate)) else float(rate)
        load = LoadSpec(base_url=ctx.base_url, api=api, model=_model_name(ctx), output_tokens=clamp.output_tokens,
                        concurrency=int(c["concurrency"]), request_rate=rate_v, num_requests=n, warmup_requests=w,
                        request_timeout_s=ctx.spec.timeouts.request_s)
    except UserError as exc:
        return CellOutcome("failed", reason=f"cannot prepare the cell: {exc}")
    clamp_d = clamp.as_dict()
    before = ctx.adapter.spec_counters(ctx.base_url)
    run = run_load(load, prompts, on_request)
    after = ctx.adapter.spec_counters(ctx.base_url) if before is not None else None
    rows = tuple(
        RequestRow(idx=r.idx, prompt_tokens=r.prompt_tokens, output_tokens=r.output_tokens, ttft_s=r.ttft_s,
                   e2e_s=r.e2e_s, itl=list(r.itl_s), error=r.error, accept_len=r.accept_len,
                   spec_verify_ct=r.spec_verify_ct)
        for r in run.results
    )
    metrics = cell_metrics(run, cell, spec_delta(before, after))
    metrics["clamped"] = clamp_d["clamped"]
    if run.warmup_errors:
        metrics["warmup_errors"] = list(run.warmup_errors)
    alive = ctx.proc.alive() if ctx.proc is not None else True
    if not alive:
        return CellOutcome("failed", f"server exited (status {ctx.proc.returncode() if ctx.proc else '?'}) "
                                     f"during the cell; {metrics['completed']}/{n} requests completed",
                           metrics, clamp_d, rows)
    if metrics["completed"] == 0:
        first = next((r.error for r in run.results if r.error), "no request was sent")
        return CellOutcome("failed", f"no request completed ({metrics['failed']} failed; first error: {first})",
                           metrics, clamp_d, rows)
    return CellOutcome("done", None, metrics, clamp_d, rows)


def spec_delta(before: dict[str, float] | None, after: dict[str, float] | None) -> dict[str, float] | None:
    if before is None or after is None:
        return None
    return {k: after.get(k, 0.0) - before.get(k, 0.0) for k in set(before) | set(after)}


def _pct(values: list[float], q: float) -> float | None:
    """Linear-interpolated percentile (numpy's default), as vLLM/SGLang bench clients report."""
    if not values:
        return None
    s = sorted(values)
    pos = (len(s) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def _dist(prefix: str, values_s: list[float]) -> dict[str, float | None]:
    ms = [v * 1000.0 for v in values_s]
    return {
        f"{prefix}_mean": (sum(ms) / len(ms)) if ms else None,
        f"{prefix}_p50": _pct(ms, 50), f"{prefix}_p90": _pct(ms, 90), f"{prefix}_p99": _pct(ms, 99),
    }


def cell_metrics(run: Any, cell: Cell, delta: dict[str, float] | None) -> dict[str, Any]:
    """metrics_json (docs/structures.md) from the measured requests; `speedup` is filled after the matrix."""
    try:  # the load package's own per-cell summary, when it offers one
        from specbench.load import metrics as lm

        fn = getattr(lm, "cell_metrics", None) or getattr(lm, "summarize", None)
    except ImportError:
        fn = None
    c = cell.client
    if fn is not None:
        try:
            out = dict(fn(run, slo_ttft_ms=c.get("slo_ttft_ms"), slo_tpot_ms=c.get("slo_tpot_ms")))
        except TypeError:
            out = None
        if out is not None:
            return _with_spec(out, run, cell, delta)
    ok = [r for r in run.results if r.error is None]
    dur = run.duration_s
    out_tok = sum(r.output_tokens for r in ok)
    in_tok = sum(r.prompt_tokens or 0 for r in ok)
    m: dict[str, Any] = {
        "completed": len(ok), "failed": len(run.results) - len(ok), "duration_s": dur,
        "concurrency": c["concurrency"], "request_rate": c["request_rate"],
        "request_throughput": len(ok) / dur if dur else None,
        "output_throughput": out_tok / dur if dur else None,
        "total_token_throughput": (out_tok + in_tok) / dur if dur else None,
        "total_output_tokens": out_tok, "total_input_tokens": in_tok,
    }
    m.update(_dist("ttft_ms", [r.ttft_s for r in ok if r.ttft_s is not None]))
    m.update(_dist("tpot_ms", [r.tpot_s for r in ok if r.tpot_s is not None]))
    m.update(_dist("itl_ms", [g for r in ok for g in r.itl_s]))
    m.update(_dist("e2e_ms", [r.e2e_s for r in ok if r.e2e_s is not None]))
    slo_t, slo_p = c.get("slo_ttft_ms"), c.get("slo_tpot_ms")
    good = [r for r in ok
            if (slo_t is None or (r.ttft_s is not None and r.ttft_s * 1000 <= slo_t))
            and (slo_p is None or r.tpot_s is None or r.tpot_s * 1000 <= slo_p)]
    m["goodput"] = len(good) / dur if dur else None
    m["slo"] = {"ttft_ms": slo_t, "tpot_ms": slo_p}
    return _with_spec(m, run, cell, delta)


def _with_spec(m: dict[str, Any], run: Any, cell: Cell, delta: dict[str, float] | None) -> dict[str, Any]:
    per_req = [r.accept_len for r in run.results if r.error is None and r.accept_len is not None]
    m.setdefault("speedup", None)
    if cell.algorithm == "ar":
        m["accept_length_mean"] = None
        m["accept_lengths"] = []
        return m
    if per_req:  # SGLang meta_info
        m["accept_lengths"] = per_req
        m["accept_length_mean"] = sum(per_req) / len(per_req)
        m["accept_length_source"] = "meta_info completion_tokens/spec_verify_ct"
    elif delta and delta.get("vllm:spec_decode_num_drafts", 0) > 0:
        drafts = delta["vllm:spec_decode_num_drafts"]
        accepted = delta.get("vllm:spec_decode_num_accepted_tokens", 0.0)
        draft_tokens = delta.get("vllm:spec_decode_num_draft_tokens", 0.0)
        m["accept_lengths"] = []
        m["accept_length_mean"] = 1.0 + accepted / drafts
        m["acceptance_rate"] = accepted / draft_tokens if draft_tokens else None
        m["accept_length_source"] = "vllm /metrics delta: 1 + accepted/drafts"
        m["spec_counters_delta"] = delta
    else:
        m.setdefault("accept_lengths", [])
        m.setdefault("accept_length_mean", None)
    return m
