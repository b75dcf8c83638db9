"""PNG figures of a report (matplotlib, Agg canvas, no pyplot state).

Each function draws one figure from table rows and returns a `Plot`: the file, a caption and the
pixel box of every panel (so tests and the HTML can point at panels). A figure with nothing to draw
is not written; the function returns None.

Quantities (all from `cells.metrics_json` via rows.CellRow):
- output throughput: `output_throughput` (tok/s);
- TPOT: `tpot_ms_p50` (line) and `tpot_ms_p99` (band top);
- speedup: tables.speedup_of (stored `speedup`, else output_throughput / AR's at the same baseline key);
- tok/s per user: 1000 / `tpot_ms_mean` (decode speed one user sees), else output_throughput / concurrency;
- tok/s per GPU: output_throughput / `cells.tp`;
- accept length: `metrics_json.accept_lengths` per request (else `requests.accept_len`), axis 0 .. draft tokens + 1;
- TTFT / E2E: `ttft_ms_p50` / `e2e_ms_p50` (line) to `_p99` (band); goodput: `goodput` (SLOs of the matrix);
- acceptance per draft position: `metrics_json.acceptance_per_pos` (vLLM counters);
- requests over time: `requests.sent_at`, `first_token_at`, `ended_at` of one question's cells (plot_timeline.py);
- GPU memory / utilization / power: `metrics_json.gpu_telemetry` (matrix/telemetry.py), where a GPU was sampled;
- error bars (with repeats): the intervals of report/cellrows.py (throughput and speedup), as the tables show them.

The figures by family: `plot_lines.py` (throughput, TPOT), `plot_spec.py` (speedup heat map, accept length),
`plot_pareto.py`, `plot_memory.py`; what they share (`Plot`, the styles) is in `plot_base.py`. This module lists them
in report order; each other name is imported from the module that defines it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from specbench.report.plot_base import Plot
from specbench.report.plot_lines import (
    e2e_plot,
    goodput_plot,
    gpu_plots,
    speedup_plot,
    throughput_plot,
    tpot_plot,
    ttft_plot,
)
from specbench.report.plot_memory import memory_plot
from specbench.report.plot_pareto import pareto_plot
from specbench.report.plot_spec import accept_plot, accept_pos_plot, speedup_heatmap
from specbench.report.plot_timeline import timeline_plot
from specbench.report.rows import CellRow, MemoryRow, Question
from specbench.report.twocores import run_jobs
from specbench.stored.records import RequestRecord


def all_plots(rows: Sequence[CellRow], accepts: Mapping[str, Sequence[float]], memory: Sequence[MemoryRow],
              stores: Sequence[str], path: Path, questions: Sequence[Question] = (),
              requests: Mapping[tuple[str, str], Sequence[RequestRecord]] | None = None) -> tuple[Plot, ...]:
    """Every figure that has data, in report order."""
    path.mkdir(parents=True, exist_ok=True)
    jobs: list[Callable[[], Plot | None | list[Plot | None]]] = [
        lambda: throughput_plot(rows, stores, path), lambda: tpot_plot(rows, stores, path),
        lambda: speedup_heatmap(rows, path), lambda: speedup_plot(rows, stores, path),
        lambda: ttft_plot(rows, stores, path), lambda: e2e_plot(rows, stores, path),
        lambda: goodput_plot(rows, stores, path), lambda: pareto_plot(rows, stores, path),
        lambda: accept_plot(rows, accepts, stores, path), lambda: accept_pos_plot(rows, stores, path),
        lambda: memory_plot(memory, path), lambda: gpu_plots(rows, stores, path),
        lambda: timeline_plot(questions, requests or {}, path)]
    made: list[Plot | None] = []
    for got in run_jobs(jobs):  # two cores where it is safe (report/twocores.py)
        made.extend(got if isinstance(got, list) else [got])
    return tuple(p for p in made if p is not None)
