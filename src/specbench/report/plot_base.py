"""What every report figure shares: the Agg canvas, the palette and series styles, the TP panels, the legend and
`save`, which writes the PNG and measures each panel's pixel box (see `plots.py` for the figures)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import matplotlib

matplotlib.use("Agg")  # no display, before anything imports pyplot
# labels, titles and legends are plain text: a `$...$` in a matrix label is not mathtext (it crashed the parser)
matplotlib.rcParams["text.parse_math"] = False

import numpy as np  # noqa: E402
from matplotlib import image as mimage  # noqa: E402
from matplotlib.artist import Artist  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from specbench.report.rows import CellRow  # noqa: E402
from specbench.stored.records import label_key, natural_key  # noqa: E402

DPI = 110
PANEL_W, PANEL_H = 4.3, 3.4
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
           "#7f7f7f", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5")
AR_COLOR = "#222222"
LineStyle = Literal["-", "--", ":", "-."]  # the line styles a series may get (matplotlib's own names)
LINESTYLES: tuple[LineStyle, ...] = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
MEMORY_COLORS = {"weights": "#4C72B0", "draft": "#8172B3", "Mamba": "#DD8452", "KV": "#55A868", "headroom": "#D9D9D9"}


@dataclass(frozen=True)
class Panel:
    title: str
    box: tuple[int, int, int, int]  # left, top, right, bottom in image pixels


@dataclass(frozen=True)
class PlotPoint:
    """One value a figure drew, as drawn: the panel, the series, x (concurrency), the value and its interval (the
    error bar's ends) and, in the heat map, the verdict it marks. Tests hold these against the tables."""

    panel: str
    series: str
    x: float
    y: float
    lo: float | None = None
    hi: float | None = None
    verdict: str | None = None


@dataclass(frozen=True)
class Plot:
    name: str  # file name, e.g. "throughput.png"
    path: Path
    title: str
    caption: str
    panels: tuple[Panel, ...]
    points: tuple[PlotPoint, ...] = ()  # what the line figures and the heat map drew (not every figure records)


@dataclass(frozen=True)
class Style:
    color: str
    linestyle: LineStyle
    marker: str


def styles(rows: Sequence[CellRow], stores: Sequence[str]) -> dict[str, Style]:
    """Series -> style: colour by configuration (same config, same colour across stores), line style by store."""
    configs = sorted({r.config for r in rows}, key=label_key)
    spec_configs = [c for c in configs if not c.split(" [")[0] == "ar"]
    color = {c: PALETTE[i % len(PALETTE)] for i, c in enumerate(spec_configs)}
    out = {}
    for r in rows:
        idx = stores.index(r.store) if r.store in stores else 0
        out[r.series] = Style(color=color.get(r.config, AR_COLOR), linestyle=LINESTYLES[idx % len(LINESTYLES)],
                              marker=MARKERS[idx % len(MARKERS)])
    return out


def series_order(rows: Iterable[CellRow]) -> list[str]:
    seen: dict[str, CellRow] = {}
    for r in rows:
        seen.setdefault(r.series, r)
    return sorted(seen, key=lambda s: (label_key(seen[s].config), natural_key(seen[s].store)))


def new_figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained", facecolor="white")
    FigureCanvasAgg(fig)
    return fig


def save(fig: Figure, path: Path, name: str, title: str, caption: str, axes: Sequence[tuple[str, Axes]],
         points: Sequence[PlotPoint] = ()) -> Plot:
    """Draw, read each panel's pixel box (the layout is final after draw), save without re-layout."""
    fig.canvas.draw()
    width, height = fig.canvas.get_width_height()
    panels = []
    for panel_title, ax in axes:
        pos = ax.get_position()
        panels.append(Panel(panel_title, (round(pos.x0 * width), round((1 - pos.y1) * height),
                                          round(pos.x1 * width), round((1 - pos.y0) * height))))
    fig.set_layout_engine("none")  # freeze the positions just measured
    out = path / name
    # the pixels just drawn, written as they are: savefig would lay out and draw the whole figure once more (a third
    # of a 20,000-cell report's time went to that second draw: benchmarks/report_scale.py)
    canvas = fig.canvas
    assert isinstance(canvas, FigureCanvasAgg)  # new_figure's canvas
    mimage.imsave(out, np.asarray(canvas.buffer_rgba()), format="png", dpi=DPI)
    return Plot(name=name, path=out, title=title, caption=caption, panels=tuple(panels), points=tuple(points))


def tps_of(rows: Sequence[CellRow]) -> list[int | None]:
    return sorted({r.tp for r in rows}, key=lambda t: t or 0)


def tp_title(tp: int | None) -> str:
    return f"TP{tp}" if tp is not None else "TP ?"


def concurrency_axis(ax: Axes, values: Sequence[int]) -> None:
    vals = sorted(set(values))
    if vals and vals[-1] / max(vals[0], 1) >= 8:
        ax.set_xscale("log", base=2)
    shown = thin_ticks(vals)
    ax.set_xticks(shown)
    ax.set_xticklabels([str(v) for v in shown])
    ax.minorticks_off()
    ax.set_xlabel("concurrency")


MAX_TICKS = 12


def thin_ticks(values: Sequence[int], n: int = MAX_TICKS) -> list[int]:
    """At most about n tick values, the first and the last kept (100 concurrencies: every 9th)."""
    vals = list(values)
    if len(vals) <= n:
        return vals
    step = -(-len(vals) // n)
    out = vals[::step]
    return out if out[-1] == vals[-1] else [*out, vals[-1]]


def legend_columns(labels: Sequence[str], width_in: float) -> int:
    """As many legend columns as fit the figure width (about 6 px per character at fontsize 8, plus the handle)."""
    entry_px = 6.2 * max((len(t) for t in labels), default=1) + 48
    return max(1, min(len(labels), int(width_in * DPI // entry_px)))


def legend(fig: Figure, handles: Sequence[Artist]) -> None:
    """A legend under the panels, wrapped into rows so that it never runs off the image."""
    if handles:
        labels = [str(h.get_label()) for h in handles]
        fig.legend(handles=handles, loc="outside lower center", ncols=legend_columns(labels, fig.get_figwidth()),
                   frameon=False, fontsize=8)


MAX_SERIES = 12  # lines per figure beyond which a legend is unreadable: the fastest configurations are drawn


def top_series(rows: Sequence[CellRow], n: int = MAX_SERIES) -> tuple[list[CellRow], str]:
    """The rows of at most `n` series: every AR series, then the speculative ones with the highest output
    throughput of any of their cells; and a caption note naming what was left out ('' when nothing was)."""
    best: dict[str, float] = {}
    ar: set[str] = set()
    for r in rows:
        best[r.series] = max(best.get(r.series, 0.0), r.output_throughput or 0.0)
        if r.config.split(" [")[0] == "ar":
            ar.add(r.series)
    if len(best) <= n:
        return list(rows), ""
    spec = sorted((s for s in best if s not in ar), key=lambda s: -best[s])
    keep = set(sorted(ar)[:n]) | set(spec[:max(0, n - len(ar))])
    return [r for r in rows if r.series in keep], (f" Showing the {len(keep)} fastest of {len(best)} series "
                                                  "(AR first); every cell is in the tables.")


def workload_subtitle(rows: Sequence[CellRow]) -> str:
    """'\n(in=256 out=64 cat=code temp=0.7)': the workload axes every drawn cell shares (load/axes.py), so a figure
    says what it measured; the axes that differ are in the series names (report/compare.py)."""
    texts = {r.workload_full for r in rows}
    if len(texts) == 1 and next(iter(texts)):
        return f"\n({next(iter(texts))})"
    common = set.intersection(*(set(t.split()) for t in texts)) if texts else set()
    order = [w for w in next(iter(texts), "").split() if w in common]
    return f"\n({' '.join(order)}; the rest in the series names)" if order else ""
