"""Line figures over concurrency, one panel per TP: output throughput and TPOT (p50 line, band to p99)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

from matplotlib.lines import Line2D

from specbench.report.plot_base import (
    PANEL_H,
    PANEL_W,
    Plot,
    PlotPoint,
    concurrency_axis,
    legend,
    legend_columns,
    new_figure,
    save,
    series_order,
    styles,
    top_series,
    tp_title,
    tps_of,
    workload_subtitle,
)
from specbench.report.rows import DONE, CellRow


def _line_figure(rows: Sequence[CellRow], stores: Sequence[str], path: Path, *, name: str, title: str, caption: str,
                 ylabel: str, value: str, band: str | None = None, ylog: bool = False, err: str | None = None,
                 keep: Callable[[CellRow], bool] | None = None, ref: float | None = None) -> Plot | None:
    """One line per series over concurrency, through each cell's value as the tables show it (the pooled estimate);
    `err`: a CellRow field holding its interval, drawn as error bars from the interval's ends (asymmetric: the
    intervals are built on the log scale, so the value is not their centre); simulated-acceptance series have hollow
    markers and say so in the legend. Every point drawn is recorded in the Plot (`points`)."""
    done = [r for r in rows if r.status == DONE and getattr(r, value) is not None and r.concurrency is not None
            and (keep is None or keep(r))]
    if not done:
        return None
    done, left_out = top_series(done)
    caption += left_out
    tps = tps_of(done)
    st = styles(rows, stores)
    order = series_order(done)
    width = PANEL_W * len(tps) + 0.4
    rows_of_legend = math.ceil(len(order) / legend_columns(order, width))
    fig = new_figure(width, PANEL_H + 0.35 + 0.2 * rows_of_legend)
    axes = fig.subplots(1, len(tps), squeeze=False)[0]
    fig.suptitle(title + workload_subtitle(done), fontsize=11, fontweight="bold")
    drawn: list[PlotPoint] = []
    for ax, tp in zip(axes, tps):
        here = [r for r in done if r.tp == tp]
        for series in order:
            pts = sorted((r for r in here if r.series == series), key=lambda r: r.concurrency or 0)
            if not pts:
                continue
            s = st[series]
            xs = [r.concurrency for r in pts]
            ys = [getattr(r, value) for r in pts]
            cis = [getattr(r, err) if err else None for r in pts]
            drawn += [PlotPoint(tp_title(tp), series, float(x or 0), float(y), ci[0] if ci else None,
                                ci[1] if ci else None) for x, y, ci in zip(xs, ys, cis)]
            lw = 2.4 if pts[0].config.split(" [")[0] == "ar" else 1.8
            face = "white" if pts[0].simulated is not None else s.color
            dense = len(xs) > DENSE_POINTS  # a line of many points reads without a marker at each
            ax.plot(xs, ys, color=s.color, linestyle=s.linestyle, marker=None if dense else s.marker, markersize=4.5,
                    linewidth=lw, markerfacecolor=face)
            if any(ci is not None for ci in cis):
                lo = [max(0.0, y - ci[0]) if ci is not None else 0.0 for y, ci in zip(ys, cis)]
                hi = [max(0.0, ci[1] - y) if ci is not None else 0.0 for y, ci in zip(ys, cis)]
                ax.errorbar(xs, ys, yerr=[lo, hi], fmt="none", ecolor=s.color, elinewidth=1.1, capsize=3)
            if band:
                tops = [getattr(r, band) for r in pts]
                if all(t is not None for t in tops):
                    ax.fill_between(xs, ys, tops, color=s.color, alpha=0.10, linewidth=0)
        concurrency_axis(ax, [r.concurrency for r in here if r.concurrency])
        if ylog:
            ax.set_yscale("log")
        ax.set_title(tp_title(tp), fontsize=10)
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        ax.set_ylim(bottom=0 if not ylog else None)
        if ref is not None:
            ax.axhline(ref, color="#888888", linewidth=0.9, linestyle=":")
    sim = {r.series for r in done if r.simulated is not None}
    handles = [Line2D([], [], color=st[s].color, linestyle=st[s].linestyle, marker=st[s].marker,
                      markerfacecolor="white" if s in sim else st[s].color,
                      label=f"{s} (simulated acceptance)" if s in sim else s) for s in order]
    legend(fig, handles)
    return save(fig, path, name, title, caption, [(tp_title(tp), ax) for ax, tp in zip(axes, tps)], drawn)


DENSE_POINTS = 30

REPEATS_NOTE = (" Points: the throughput pooled over the repeats (total output tokens / total measured time), as in "
                "the tables. Error bars: its 95% interval on the log scale (the ratio estimator's standard error over "
                "the repeats, Student-t; asymmetric around the point).")


def _has(rows: Sequence[CellRow], attr: str) -> bool:
    return any(getattr(r, attr) is not None for r in rows)


def throughput_plot(rows: Sequence[CellRow], stores: Sequence[str], path: Path) -> Plot | None:
    return _line_figure(rows, stores, path, name="throughput.png", title="Output throughput vs concurrency",
                        caption="Output tokens/s of the whole server, one line per configuration, one panel per TP."
                        + (REPEATS_NOTE if _has(rows, "throughput_ci") else ""),
                        ylabel="output tok/s", value="output_throughput", err="throughput_ci")


def speedup_plot(rows: Sequence[CellRow], stores: Sequence[str], path: Path) -> Plot | None:
    return _line_figure(rows, stores, path, name="speedup_lines.png", title="Speedup over AR vs concurrency",
                        caption="Output throughput over the AR cell at the same TP, concurrency and workload "
                        "(dotted: 1×): the ratio of the pooled throughputs, as in the tables."
                        + (" Error bars: its log-ratio 95% interval (se of the log ratio from both cells' repeats, "
                           "Welch-Satterthwaite df, Student-t; asymmetric around the point); a matrix that repeats "
                           "until decided shows the wider interval its looks call for." if _has(rows, "speedup_ci")
                           else ""),
                        ylabel="speedup ×", value="speedup", err="speedup_ci",
                        keep=lambda r: r.speedup_source != "baseline", ref=1.0)


def ttft_plot(rows: Sequence[CellRow], stores: Sequence[str], path: Path) -> Plot | None:
    return _line_figure(rows, stores, path, name="ttft.png", title="Time to first token vs concurrency",
                        caption="TTFT p50 (line) with the band up to p99; lower is better.",
                        ylabel="TTFT ms (p50, band to p99)", value="ttft_p50", band="ttft_p99")


def e2e_plot(rows: Sequence[CellRow], stores: Sequence[str], path: Path) -> Plot | None:
    return _line_figure(rows, stores, path, name="e2e.png", title="End-to-end latency vs concurrency",
                        caption="Request latency p50 (line) with the band up to p99; lower is better.",
                        ylabel="E2E ms (p50, band to p99)", value="e2e_p50", band="e2e_p99")


def goodput_plot(rows: Sequence[CellRow], stores: Sequence[str], path: Path) -> Plot | None:
    return _line_figure(rows, stores, path, name="goodput.png", title="Goodput vs concurrency",
                        caption="Requests per second that met every SLO of the matrix (slo_ttft_ms, slo_tpot_ms).",
                        ylabel="good requests/s", value="goodput")


def tpot_plot(rows: Sequence[CellRow], stores: Sequence[str], path: Path) -> Plot | None:
    return _line_figure(rows, stores, path, name="tpot.png", title="Time per output token vs concurrency",
                        caption="TPOT p50 (line) with the band up to p99; lower is better.",
                        ylabel="TPOT ms (p50, band to p99)", value="tpot_p50", band="tpot_p99")


def gpu_plots(rows: Sequence[CellRow], stores: Sequence[str], path: Path) -> list[Plot | None]:
    """GPU telemetry per cell (metrics_json.gpu_telemetry, matrix/telemetry.py): peak memory used, mean
    utilization and mean power over the cell's load; none without telemetry (no GPU)."""
    src = " Sampled every second during the cell's load (NVML, else nvidia-smi)."
    return [
        _line_figure(rows, stores, path, name="gpu_memory.png", title="GPU memory used vs concurrency",
                     caption="Peak memory used on the cell's GPUs (MiB, the largest of them)." + src,
                     ylabel="memory used MiB (peak)", value="gpu_memory_max"),
        _line_figure(rows, stores, path, name="gpu_util.png", title="GPU utilization vs concurrency",
                     caption="Mean utilization of the cell's GPUs (%)." + src, ylabel="utilization % (mean)",
                     value="gpu_util_mean"),
        _line_figure(rows, stores, path, name="gpu_power.png", title="GPU power vs concurrency",
                     caption="Mean power drawn by the cell's GPUs together (W)." + src, ylabel="power W (mean)",
                     value="gpu_power_mean"),
    ]
