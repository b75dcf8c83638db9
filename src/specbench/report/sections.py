"""Sections of a report over several stores: one per model and GPU, so that no table, ranking or Pareto front
compares different models or GPUs. A store's model is report/model.py::store_model (meta `model`, else the
launch command's model); its GPU is meta `gpu`, else the GPU name telemetry read (meta `gpu_name`,
matrix/telemetry.py), else the planner's GPU (`servers.plan_json.gpu`), else "GPU ?"."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from specbench.report.load import Store

MODEL_FLAGS = ("--model-path", "--model")  # SGLang launch_server / vLLM serve (vLLM also takes it positionally)


def store_model(store: Store) -> str | None:
    """meta `model`, else the model the first server was launched with (its `--model-path` / `--model` value, or
    the word after `serve`)."""
    if store.meta.get("model"):
        return store.meta["model"]
    for s in store.servers:
        argv = list(s.command)
        for i, a in enumerate(argv[:-1]):
            if a in MODEL_FLAGS or (a == "serve" and not argv[i + 1].startswith("-")):
                return argv[i + 1]
            for flag in MODEL_FLAGS:
                if a.startswith(flag + "="):
                    return a.split("=", 1)[1]
    return None


def store_gpu(store: Store) -> str:
    for key in ("gpu", "gpu_name"):
        if store.meta.get(key):
            return str(store.meta[key])
    for s in store.servers:
        g = s.plan.get("gpu") if isinstance(s.plan, Mapping) else None
        if isinstance(g, str) and g:
            return g
    return "GPU ?"


def store_section(store: Store) -> str:
    """'<model> · <GPU>'."""
    return f"{store_model(store) or 'model ?'} · {store_gpu(store)}"


def sections(stores: Sequence[Store]) -> dict[str, str]:
    """store label -> its section name."""
    return {s.label: store_section(s) for s in stores}


def section_order(stores: Sequence[Store]) -> tuple[str, ...]:
    """The section names in the order their first store was given."""
    out: list[str] = []
    for s in stores:
        name = store_section(s)
        if name not in out:
            out.append(name)
    return tuple(out)
