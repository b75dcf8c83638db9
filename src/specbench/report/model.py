"""The whole report as one frozen value: which stores, their tables, their figures."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specbench.decide.fits import FitRow
from specbench.report.compare import describe
from specbench.report.plot_base import Plot
from specbench.report.predicted import PredictedSection
from specbench.report.rows import Tables
from specbench.report.sections import store_model
from specbench.stored.records import LoadedStore


@dataclass(frozen=True)
class StoreInfo:
    label: str
    path: str
    description: str  # label (engine version)
    engine: str | None
    engine_version: str | None
    model: str | None
    n_cells: int
    n_servers: int
    meta: tuple[tuple[str, str], ...]  # short meta values worth showing


@dataclass(frozen=True)
class Report:
    title: str
    generated_at: str
    stores: tuple[StoreInfo, ...]
    tables: Tables
    plots: tuple[Plot, ...]
    predicted: PredictedSection = PredictedSection()  # report/predicted.py
    fits: tuple[FitRow, ...] = ()  # report/fits.py: the fastest setup that fits, per workload

    @property
    def multi(self) -> bool:
        return len(self.stores) > 1


META_SHOWN = ("name", "engine", "engine_version", "host", "gpu", "model", "matrix_path", "specbench_version", "started_at",
              "synthetic")


def store_info(store: LoadedStore) -> StoreInfo:
    meta = tuple((k, v if len(v) <= 120 else v[:117] + "...") for k, v in store.meta.items() if k in META_SHOWN and v)
    return StoreInfo(label=store.label, path=str(store.path.resolve()), description=describe(store), engine=store.engine,
                     engine_version=store.engine_version, model=store_model(store), n_cells=len(store.cells), n_servers=len(store.servers),
                     meta=meta)


def build_report(stores: Sequence[LoadedStore], tables: Tables, plots: Sequence[Plot], generated_at: str) -> Report:
    title = ("specbench report: " + stores[0].label) if len(stores) == 1 else \
        f"specbench comparison: {' vs '.join(s.label for s in stores)}"
    return Report(title=title, generated_at=generated_at, stores=tuple(store_info(s) for s in stores),
                  tables=tables, plots=tuple(plots))
