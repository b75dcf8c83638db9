"""Sections of a report: one per model and GPU, so that no table, ranking or Pareto front compares different models
or GPUs. A section belongs to each cell, not to its store: a cell's model is the one its server was launched with
(`server_model`: the launch command's `--model-path` / `--model` value or the word after `serve`), else the store's
meta `model`, else the model the server answered for (`server_json.effective`: the ids of /v1/models), else
"model ?"; its GPU is meta `gpu`, else the GPU name telemetry read (meta `gpu_name`,
matrix/telemetry.py), else its server's planner GPU (`servers.plan_json.gpu`), else any server's, else "GPU ?"."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from specbench.matrix.adapters import command_model
from specbench.stored.records import CellRecord, LoadedStore, ServerRecord


def server_model(server: ServerRecord | None) -> str | None:
    """The model a server was launched with: its `--model-path` / `--model` value, or the word after `serve`
    (matrix/adapters.py::command_model)."""
    return command_model(server.command) if server is not None else None


def store_model(store: LoadedStore) -> str | None:
    """The store's model as its header shows it: meta `model`, else the model the first server naming one was
    launched with."""
    if store.meta.get("model"):
        return store.meta["model"]
    return next((m for s in store.servers if (m := server_model(s))), None)


def _answered_model(store: LoadedStore, cell: CellRecord) -> str | None:
    """The model the server answered for at boot: the first of its engine's `served_models` of server_json.effective
    (engines/base.py::ServerAdapter.served_models: the ids of /v1/models)."""
    from specbench.engines.base import server_adapter
    from specbench.errors import UserError

    eff = cell.server.get("effective") if isinstance(cell.server, Mapping) else None
    if not isinstance(eff, Mapping):
        return None
    try:
        served = server_adapter(store.engine or "openai", None).served_models(eff)
    except UserError:  # an engine this specbench does not know
        return None
    return served[0] if served else None


def cell_model(store: LoadedStore, cell: CellRecord) -> str | None:
    """The model of a cell's section: its server's launch model, else meta `model`, else the model it answered for."""
    return _launch_model(store, cell.server_id) or store.meta.get("model") or _answered_model(store, cell)


def _launch_model(store: LoadedStore, server_id: str | None) -> str | None:
    """server_model of a store's server, read from its command once per server (LoadedStore.memo)."""
    key = ("launch_model", server_id)
    if key not in store.memo:
        store.memo[key] = server_model(store.server(server_id))
    found = store.memo[key]
    return found if isinstance(found, str) else None


def ar_key(store: LoadedStore, cell: CellRecord) -> tuple[object, ...]:
    """The key a cell meets its AR baseline by: the store, the cell's model (a speculative cell of one model is never
    compared with another model's AR cell, runner.py::fill_speedups the same), then CellRecord.baseline_key."""
    return (store.label, cell_model(store, cell), *cell.baseline_key)


def _any_plan_gpu(store: LoadedStore) -> str | None:
    """The first server's planner GPU, looked for once per store (LoadedStore.memo)."""
    if "any_plan_gpu" not in store.memo:
        store.memo["any_plan_gpu"] = next((g for s in store.servers if (g := _plan_gpu(s))), None)
    found = store.memo["any_plan_gpu"]
    return found if isinstance(found, str) else None


def _plan_gpu(server: ServerRecord | None) -> str | None:
    g = server.plan.get("gpu") if server is not None and isinstance(server.plan, Mapping) else None
    return g if isinstance(g, str) and g else None


def cell_gpu(store: LoadedStore, cell: CellRecord) -> str | None:
    """The GPU of a cell's section (module docstring): meta `gpu` / `gpu_name`, else its server's planner GPU, else
    any server's; None when nothing says."""
    return (next((str(store.meta[k]) for k in ("gpu", "gpu_name") if store.meta.get(k)), None)
            or _plan_gpu(store.server(cell.server_id)) or _any_plan_gpu(store))


def _section(store: LoadedStore, server: ServerRecord | None, cell: CellRecord | None = None) -> str:
    """'<model> · <GPU>' of a server (and of a cell of it: the model it answered for as the last resort)."""
    model = cell_model(store, cell) if cell is not None else (server_model(server) or store.meta.get("model"))
    gpu = (next((str(store.meta[k]) for k in ("gpu", "gpu_name") if store.meta.get(k)), None) or _plan_gpu(server)
           or _any_plan_gpu(store) or "GPU ?")
    return f"{model or 'model ?'} · {gpu}"


def cell_section(store: LoadedStore, cell: CellRecord) -> str:
    """'<model> · <GPU>' of one cell: its server's."""
    return _section(store, store.server(cell.server_id), cell)


def sections(stores: Sequence[LoadedStore]) -> dict[tuple[str, str], str]:
    """(store label, cell id) -> its section name."""
    return {(s.label, c.cell_id): cell_section(s, c) for s in stores for c in s.cells}


def server_sections(stores: Sequence[LoadedStore]) -> dict[tuple[str, str], str]:
    """(store label, server id) -> its section: its first cell's, else the server's own."""
    out: dict[tuple[str, str], str] = {}
    for s in stores:
        for srv in s.servers:
            first = next((c for c in s.cells if c.server_id == srv.server_id), None)
            out[(s.label, srv.server_id)] = cell_section(s, first) if first is not None else _section(s, srv)
    return out


def section_order(stores: Sequence[LoadedStore]) -> tuple[str, ...]:
    """The section names in the order their first cell was given (stores in order, cells in store order)."""
    out: list[str] = []
    for name in sections(stores).values():
        if name not in out:
            out.append(name)
    return tuple(out)
