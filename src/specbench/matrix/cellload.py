"""What one cell sends: the context a running server gives its cells (`CellContext`), the cell's prompts (its dataset,
lengths and category at exact token counts under the server's context, seeded by its client settings) and its load
spec (the API the server speaks, the sampling, the warm-up of matrix/warmup.py). matrix/cellrun.py runs them."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from specbench.contracts import PlanOutcome, PlanResult
from specbench.engines import server_auth
from specbench.engines.base import ServerAdapter
from specbench.engines.openai.server import served_model
from specbench.errors import UserError
from specbench.matrix.adapters import local_tokenizer_dir
from specbench.matrix.expansion import Cell
from specbench.matrix.lifecycle import ServerProcess
from specbench.matrix.repeat_metrics import request_count
from specbench.matrix.schema import MatrixSpec
from specbench.matrix.visits import policy_of
from specbench.matrix.warmup import warmup_prompts

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
    plan: PlanOutcome = None  # the planner's result for what was launched (context_len fallback)
    cache: dict[str, Any] = field(default_factory=dict)  # tokenizer and served model name, per server
    boot_started_at: float | None = None  # the boot's key in the store (boots.started_at)



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
    # the planner's resolved default (the model's max positions), an engine key of the plan
    v = ctx.plan.extra.get("context_len") if isinstance(ctx.plan, PlanResult) else None
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


def api_mode(ctx: CellContext) -> tuple[Api, PromptMode, Any, int]:
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

    ident = {k: v for k, v in cell_identity(dict(cell.client)).items()
             if k not in ("repeats", "repeats_max", "repeat_across_boots")}  # same prompts with or without
    return int(stable_id("wl", ident).split("-")[-1], 16) % 1_000_000_007


def build_cell_workload(cell: Cell, ctx: CellContext, pmode: PromptMode, tok: Any, slots: int | None = None) -> Any:
    """The cell's prompts (warm-up included) from its dataset, lengths and category (load/workload.py): `slots`
    repeats' worth (default: its planned repeats; a range: its `max`, so every repeat keeps its own prompts)."""
    from specbench.load.lengths import parse_length
    from specbench.load.prompts import CONTEXT_MARGIN
    from specbench.load.workload import WorkloadSpec, build_workload

    c = cell.client
    _, _, _, min_prompt = api_mode(ctx)
    ws = WorkloadSpec(dataset=str(c.get("dataset") or "specbench-mini"), prompt_tokens=int(c["prompt_tokens"]),
                      output_tokens=int(c["output_tokens"]), prompt_len=parse_length(c.get("prompt_len") or "fixed"),
                      output_len=parse_length(c.get("output_len") or "fixed"), category=c.get("category"),
                      multi_turn=bool(c.get("multi_turn")), seed=workload_seed(cell), base_dir=ctx.spec.matrix_dir)
    n = request_count(c) * (slots or policy_of(c).slots) + warmup_prompts(c)
    return build_workload(ws, n=n, tokenizer=tok, mode=pmode, context_len=context_len(ctx),
                          margin=CONTEXT_MARGIN.get(ctx.spec.engine, 0), min_prompt=min_prompt,
                          vocab_size=_vocab_size(ctx) if (pmode == "ids" and tok is None) else None)


def load_spec(cell: Cell, ctx: CellContext, api: Api, output_tokens: int) -> Any:
    """The LoadSpec of a cell: its load shape and its sampling (unset keys: temperature 0, ignore_eos on)."""
    from specbench.load.counting import tokenizer_counter
    from specbench.load.results import LoadSpec

    c = cell.client
    rate = c.get("request_rate")
    rate_v = None if isinstance(rate, str) or rate is None or math.isinf(float(rate)) else float(rate)
    stop = c.get("stop")
    return LoadSpec(base_url=ctx.base_url, api=api, model=_model_name(ctx),
                    served_models=tuple(ctx.cache.get("served", ())),
                    output_tokens=output_tokens, concurrency=int(c["concurrency"]), request_rate=rate_v,
                    num_requests=request_count(c), warmup_requests=int(c.get("warmup_requests") or 0),
                    request_timeout_s=ctx.spec.timeouts.request_s,
                    temperature=float(c["temperature"]) if c.get("temperature") is not None else 0.0,
                    top_p=c.get("top_p"), top_k=c.get("top_k"), sampling_seed=c.get("seed"),
                    ignore_eos=c.get("ignore_eos") is not False, stop=tuple(stop) if stop is not None else None,
                    extra_body=ctx.adapter.count_body(api), token_counter=tokenizer_counter(_tokenizer(ctx)),
                    api_key=server_auth.current())
