"""A matrix cell (or a stored one) as the step model reads it: its `CellShape` and its calibration class.

Both come from what the runner already records per cell: the server settings (algorithm, num_steps, eagle_topk,
num_draft_tokens, draft_model, tp), the launched argv, the client (concurrency, prompt_tokens, output_tokens) and
the matrix's [plan] table (model_config, draft_config, gpu, engine_version), plus the planner's
max_running_requests. The class key reads two launch flags by their spelling, whatever the engine:
`--attention-backend X` (SGLang and vLLM), and CUDA graphs off when any of `--disable-cuda-graph` (SGLang <= 0.5.12),
`--cuda-graph-backend-decode disabled` (SGLang 0.5.15), `--enforce-eager` (vLLM) is given.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from specbench.errors import UserError
from specbench.plan.reach import reach_of
from specbench.predict.model import CellShape, Params, method_of
from specbench.predict.roofline import INDEPENDENT, TOKEN_ID
from specbench.specs.model_types import ModelSpec
from specbench.specs.resolve import load_model_spec

if TYPE_CHECKING:
    from specbench.engines.base import ServerAdapter

GRAPHS_OFF_FLAGS = ("--disable-cuda-graph", "--enforce-eager")
GRAPHS_OFF_VALUES = {"--cuda-graph-backend-decode": "disabled"}


@dataclass(frozen=True, order=True)
class ClassKey:
    """What the calibrated constants depend on (issue 25): engine release, GPU, attention backend, CUDA graphs, and
    the target model ("" = a class pooled over every model recorded with the rest of the key)."""

    engine: str
    engine_version: str
    gpu: str
    attention_backend: str
    cuda_graphs: bool
    model: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"engine": self.engine, "engine_version": self.engine_version, "gpu": self.gpu,
                "attention_backend": self.attention_backend, "cuda_graphs": self.cuda_graphs, "model": self.model}

    def pooled(self) -> ClassKey:
        return ClassKey(self.engine, self.engine_version, self.gpu, self.attention_backend, self.cuda_graphs)

    def text(self) -> str:
        g = "graphs" if self.cuda_graphs else "eager"
        m = f" / {self.model}" if self.model else " / any model"
        return f"{self.engine} {self.engine_version} / {self.gpu} / {self.attention_backend} / {g}{m}"


def _flag_value(argv: Sequence[str], flag: str) -> str | None:
    for i, w in enumerate(argv):
        if w == flag and i + 1 < len(argv):
            return argv[i + 1]
        if w.startswith(flag + "="):
            return w.split("=", 1)[1]
    return None


def class_key(engine: str, engine_version: str, gpu: str, argv: Sequence[str], model: str = "") -> ClassKey:
    backend = _flag_value(argv, "--attention-backend") or "default"
    off = any(f in argv for f in GRAPHS_OFF_FLAGS) or any(
        (_flag_value(argv, f) or "").lower() == v for f, v in GRAPHS_OFF_VALUES.items())
    return ClassKey(engine, engine_version, gpu, backend, not off, model)


_SPECS: dict[str, ModelSpec] = {}


def model(source: str) -> ModelSpec:
    """The planner's model spec for a config source (specs/resolve.py), read once per process."""
    if source not in _SPECS:
        _SPECS[source] = load_model_spec(source)
    return _SPECS[source]


def _int(v: Any, default: int) -> int:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else default


def kv_scale(argv: Sequence[str], target: ModelSpec) -> float:
    """KV cache bytes per element over the model dtype's, from `--kv-cache-dtype` (SGLang and vLLM spell it alike:
    fp8_e4m3 / fp8_e5m2 / fp8 / fp4_e2m1; auto / bf16 / the model dtype: 1)."""
    from specbench.specs.dtypes import dtype_bytes

    v = (_flag_value(argv, "--kv-cache-dtype") or "auto").lower()
    size = 1.0 if v.startswith("fp8") else 0.5 if v.startswith("fp4") else None
    return 1.0 if size is None else size / max(0.5, float(dtype_bytes(target.dtype)))


@dataclass(frozen=True)
class PlanKeys:
    """What the predictor reads of a matrix's [plan] table (matrix/schema.py::PlanSettings): the models' configs,
    the GPU and the engine release."""

    model_config: str | None = None
    draft_config: str | None = None
    gpu: str | None = None
    engine_version: str | None = None

    @staticmethod
    def of(table: Mapping[str, Any]) -> PlanKeys:
        """From the table as a matrix's TOML holds it (a stored matrix_text); values that are no text count as unset."""
        def text(key: str) -> str | None:
            v = table.get(key)
            return str(v) if v else None  # as the dict was read: an empty or zero value is unset
        return PlanKeys(text("model_config"), text("draft_config"), text("gpu"), text("engine_version"))


def cell_shape(settings: Mapping[str, Any], client: Mapping[str, Any], plan: PlanKeys | Mapping[str, Any],
               cap: int | None, argv: Sequence[str] = (), *, routing: str) -> CellShape:
    """A cell's shape; raises ValueError / UserError when its models or method cannot be read. `routing`: how a
    MoE target's tokens route (predict/observe.py::routing asks the engine; roofline.py::ROUTING_SHARE)."""
    plan = plan if isinstance(plan, PlanKeys) else PlanKeys.of(plan)
    target_src = plan.model_config
    if not target_src:
        raise ValueError("the matrix's [plan] table names no model_config")
    target = model(str(target_src))
    method = method_of(settings.get("algorithm"))
    draft = None
    if method in ("eagle", "block"):
        src = plan.draft_config
        if not src:
            raise ValueError(f"{settings.get('algorithm')} needs the drafter's config: [plan] draft_config")
        draft = model(str(src))
    steps = _int(settings.get("num_steps"), 0)
    topk = _int(settings.get("eagle_topk"), 1)
    dt = _int(settings.get("num_draft_tokens"), 0)
    if method == "ar":
        verify = 1
    elif method in ("eagle", "mtp"):
        steps = steps or max(1, dt - 1) or 3
        verify = dt or (steps * topk + 1)
    else:  # block / tree / ngram: the tokens a verify checks per sequence (DDTree: its node budget)
        block = draft.draft.block_size if (draft is not None and draft.draft and draft.draft.block_size) else 16
        verify = _int(settings.get("ddtree_budget"), 0) or dt or block
    prompt = _int(client.get("prompt_tokens"), 0) or _int(client.get("prompt_len"), 512)
    out = _int(client.get("output_tokens"), 0) or _int(client.get("output_len"), 128)
    return CellShape(target=target, draft=draft, method=method, num_steps=steps, verify_tokens=max(1, verify),
                     tp=_int(settings.get("tp"), 1), concurrency=_int(client.get("concurrency"), 1),
                     cap=cap if cap and cap > 0 else _int(settings.get("max_running_requests"), 0) or None,
                     prompt_tokens=prompt, output_tokens=out, topk=max(1, topk) if method == "eagle" else 1,
                     kv_scale=kv_scale(argv, target), routing=routing if target.moe else INDEPENDENT)


def held(shape: CellShape, plan: Mapping[str, Any] | None, length: int | None) -> CellShape:
    """The shape at the batch its launch holds at once: the planner's cap, lowered to the requests its KV tokens
    (and Mamba slots) hold at `length` tokens a request (plan/reach.py::reach_of, the arithmetic of the "fastest setup
    that fits" table and of the dry run's "about N run at once"). A closed-loop cell asking more waits for the rest:
    its throughput is that batch's. `plan`: the plan contract or a dry-run row's `plan_limits`; `length`:
    request_length(client), None for a cell whose lengths are not fixed (no KV limit then). Raises ValueError when
    one request is longer than the launch's KV tokens: nothing of it runs to predict."""
    if not plan or length is None:
        return shape
    reach = reach_of(plan, length, None)
    if reach.planned and reach.kv == 0:
        raise ValueError(f"one request of {length:,} tokens is longer than the {reach.kv_tokens:,} KV tokens its "
                         "launch holds (plan/reach.py)")
    holds = reach.holds
    if not holds or holds <= 0 or (shape.cap is not None and holds >= shape.cap):
        return shape
    return replace(shape, cap=holds)


def routing(adapter: ServerAdapter | None, argv: Sequence[str], settings: Mapping[str, object]) -> str:
    """How a MoE target's tokens route in this launch (predict/roofline.py::ROUTING_SHARE): by token id where the
    engine says its dummy weights do, else each token on its own."""
    if adapter is not None and adapter.stand_in_routing(argv, settings):
        return TOKEN_ID
    return INDEPENDENT


def adapter_for(engine: str, version: str) -> ServerAdapter | None:
    """The engine's server adapter (once per store or matrix), None for an engine this specbench does not know."""
    from specbench.engines.base import server_adapter

    try:
        return server_adapter(engine, None if version == "unknown" else version)
    except UserError:
        return None


@dataclass(frozen=True)
class ClassFit:
    """One class's fitted constants and how well they fit (predict/fit.py fits them; a calibration file holds them:
    here, without numpy, so that predicting from a file never imports the fitter)."""

    key: ClassKey
    params: Params
    n_step: int            # step observations
    n_ttft: int
    step_rel_rms: float    # RMS of the relative step-time residuals
    ttft_rel_rms: float
    stores: tuple[str, ...]
