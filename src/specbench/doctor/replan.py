"""The planner link: the launch a log records, rebuilt by the engine that wrote it, and planned again with the log's
measured numbers (free memory before load, weights, non-KV memory); `facts_for_plan` is what `specbench plan
--from-log` and the what-if (whatif.py) take from a log, `planner_result` the planner's answer for the diagnosis.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict

from specbench.contracts import PlanResult
from specbench.contracts_inputs import PlanOptions
from specbench.doctor.lastboot import log_text, parse_raw, read_log
from specbench.engines.base import engine
from specbench.errors import UserError
from specbench.logs.facts import LogFacts
from specbench.logs.launch_model import facts_model_source, model_source
from specbench.logs.normalize import looks_binary
from specbench.logs.serverargs import ArgValue
from specbench.plan.api import env_gpu_default, plan_result


def argv_from_log(facts: LogFacts, text: str | None = None) -> list[str]:
    """The launch to re-plan, rebuilt by the engine that wrote the log from its own argument dump."""
    return engine(facts.engine).log_plan_argv(facts, text)


class PlanFacts(TypedDict):
    """What a log gives a re-plan (`facts_for_plan`, whatif.py::measured_from_log); None where it does not say."""
    argv: list[str] | None  # the launch rebuilt from the argument dump (None: the log has none)
    engine: str | None
    engine_version: str | None
    avail_before_load_gib: float | None
    weights_gib: float | None
    draft_weights_gib: float | None
    non_kv_gib: float | None  # vLLM
    model_config: str | None
    model: ArgValue  # the dumped model path, as the dump spells it
    model_class: str | None
    gpu_total_gib: float | None


def facts_for_plan(path: str | Path) -> PlanFacts:
    """Measured overrides and the rebuilt launch argv for `specbench plan --from-log FILE`:
    `{"argv": [...], "engine": ..., "engine_version": ..., "avail_before_load_gib": ..., "weights_gib": ...,
    "draft_weights_gib": ..., "non_kv_gib": ... (vLLM), "model_config": <a config source that resolves for the
    dumped model path, or None>}` (None where the log does not say). UserError when the file is unusable."""
    raw = read_log(path)
    if looks_binary(raw):
        raise UserError(f"{path}: not a text log")
    facts = parse_raw(raw)[0]
    if not facts.server_args:
        raise UserError(f"{path}: the log has no argument dump (server_args=ServerArgs(...) / non-default args), "
                        "so the launch cannot be rebuilt; pass the launch command after -- instead")
    return {
        "argv": argv_from_log(facts, log_text(raw)),
        "engine": facts.engine,
        "engine_version": infer_version(facts),
        "avail_before_load_gib": facts.avail_before_load_gib,
        "weights_gib": facts.weights_gib,
        "draft_weights_gib": facts.draft_weights_gib,
        "non_kv_gib": engine(facts.engine).log_non_kv_gib(facts),
        "model_config": facts_model_source(facts),
        "model": facts.server_args.get("model_path") or facts.server_args.get("model"),
        "model_class": facts.model_class,
        "gpu_total_gib": facts.total_gpu_memory_gib if facts.device != "cpu" else None,
    }


def infer_version(facts: LogFacts) -> str | None:
    """The printed version, else the release the engine infers from the log (e.g. SGLang's argument names)."""
    return facts.engine_version or engine(facts.engine).release_from_args(facts)


def planner_result(facts: LogFacts, engine_version: str | None, gpu: str | None = None,
                   draft_config: str | None = None, text: str | None = None) -> tuple[PlanResult | None, str | None]:
    """Call the planner with the log's measured numbers; (result, None) or (None, why not)."""
    if not facts.server_args:
        return None, "no argument dump in the log, so no launch to re-plan"
    opts = PlanOptions(
        model_config=facts_model_source(facts),
        draft_config=draft_config or model_source(
            {"model_path": facts.server_args.get("speculative_draft_model_path")}),
        gpu=gpu or env_gpu_default(),
        engine=facts.engine,
        engine_version=engine_version or infer_version(facts),
        avail_before_load_gib=facts.avail_before_load_gib,
        weights_gib=facts.weights_gib,
        draft_weights_gib=facts.draft_weights_gib,
        non_kv_gib=engine(facts.engine).log_non_kv_gib(facts),
        fixes=True,
    )
    try:
        return plan_result(argv_from_log(facts, text), opts), None
    except UserError as exc:
        return None, f"the planner cannot plan this launch: {exc}"
    except Exception as exc:  # noqa: BLE001 - a planner bug must not hide the diagnosis; it is named, not swallowed
        return None, f"the planner failed ({type(exc).__name__}: {exc}); please report it"
