"""Line figures over concurrency, one panel per TP: output throughput and TPOT (p50 line, band to p99)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from matplotlib.lines import Line2D

from specbench.report.plot_base import (
    PANEL_H,
    PANEL_W,
    Plot,
    concurrency_axis,
    legend,
    legend_columns,
    new_figure,
    save,
    series_order,
    styles,
    tp_title,
    tps_of,
)
from specbench.report.tables import DONE, CellRow


def _line_figure(rows: Sequence[CellRow], stores: Sequence[str], path: Path, *, name: str, title: str, caption: str,
                 ylabel: str, value: str, band: str | None = None, ylog: bool = False) -> Plot | None:
    done = [r for r in rows if r.status == DONE and getattr(r, value) is not None and r.concurrency is not None]
    if not done:
        return None
    tps = tps_of(done)
    st = styles(rows, stores)
    order = series_order(done)
    width = PANEL_W * len(tps) + 0.4
    rows_of_legend = math.ceil(len(order) / legend_columns(order, width))
    fig = new_figure(width, PANEL_H + 0.35 + 0.2 * rows_of_legend)
    axes = fig.subplots(1, len(tps), squeeze=False)[0]
    fig.suptitle(title, fontsize=11, fontweight="bold")
    for ax, tp in zip(axes, tps):
        here = [r for r in done if r.tp == tp]
        for series in order:
            pts = sorted((r for r in here if r.series == series), key=lambda r: r.concurrency or 0)
            if not pts:
                continue
            s = st[series]
            xs = [r.concurrency for r in pts]
            ys = [getattr(r, value) for r in pts]
            lw = 2.4 if pts[0].config.split(" [")[0] == "ar" else 1.8
            ax.plot(xs, ys, color=s.color, linestyle=s.linestyle, marker=s.marker, markersize=4.5, linewidth=lw)
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
    handles = [Line2D([], [], color=st[s].color, linestyle=st[s].linestyle, marker=st[s].marker, label=s) for s in order]
    legend(fig, handles)
    return save(fig, path, name, title, caption, [(tp_title(tp), ax) for ax, tp in zip(axes, tps)])


def throughput_plot(rows: Sequence[CellRow], stores: Sequence[str], path: Path) -> Plot | None:
    return _line_figure(rows, stores, path, name="throughput.png", title="Output throughput vs concurrency",
                        caption="Output tokens/s of the whole server, one line per configuration, one panel per TP.",
                        ylabel="output tok/s", value="output_throughput")


def tpot_plot(rows: Sequence[CellRow], stores: Sequence[str], path: Path) -> Plot | None:
    return _line_figure(rows, stores, path, name="tpot.png", title="Time per output token vs concurrency",
                        caption="TPOT p50 (line) with the band up to p99; lower is better.",
                        ylabel="TPOT ms (p50, band to p99)", value="tpot_p50", band="tpot_p99")
