"""PNG figures of a report (matplotlib, Agg canvas, no pyplot state).

Each function draws one figure from table rows and returns a `Plot`: the file, a caption and the
pixel box of every panel (so tests and the HTML can point at panels). A figure with nothing to draw
is not written; the function returns None.

Quantities (all from `cells.metrics_json` via tables.CellRow):
- output throughput: `output_throughput` (tok/s);
- TPOT: `tpot_ms_p50` (line) and `tpot_ms_p99` (band top);
- speedup: tables.speedup_of (stored `speedup`, else output_throughput / AR's at the same baseline key);
- tok/s per user: 1000 / `tpot_ms_mean` (decode speed one user sees), else output_throughput / concurrency;
- tok/s per GPU: output_throughput / `cells.tp`;
- accept length: `metrics_json.accept_lengths` per request (else `requests.accept_len`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display, before anything imports pyplot

from matplotlib import colors as mcolors  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from specbench.report.load import label_key, natural_key  # noqa: E402
from specbench.report.tables import DONE, CellRow, MemoryRow  # noqa: E402

DPI = 110
PANEL_W, PANEL_H = 4.3, 3.4
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
           "#7f7f7f", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5")
AR_COLOR = "#222222"
LINESTYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
MEMORY_COLORS = {"weights": "#4C72B0", "draft": "#8172B3", "Mamba": "#DD8452", "KV": "#55A868", "headroom": "#D9D9D9"}


@dataclass(frozen=True)
class Panel:
    title: str
    box: tuple[int, int, int, int]  # left, top, right, bottom in image pixels


@dataclass(frozen=True)
class Plot:
    name: str  # file name, e.g. "throughput.png"
    path: Path
    title: str
    caption: str
    panels: tuple[Panel, ...]


@dataclass(frozen=True)
class Style:
    color: str
    linestyle: str
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


def _new_figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained", facecolor="white")
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Figure, path: Path, name: str, title: str, caption: str, axes: Sequence[tuple[str, object]]) -> Plot:
    """Draw, read each panel's pixel box (the layout is final after draw), save without re-layout."""
    fig.canvas.draw()
    width, height = fig.canvas.get_width_height()
    panels = []
    for panel_title, ax in axes:
        pos = ax.get_position()  # type: ignore[attr-defined]
        panels.append(Panel(panel_title, (round(pos.x0 * width), round((1 - pos.y1) * height),
                                          round(pos.x1 * width), round((1 - pos.y0) * height))))
    fig.set_layout_engine("none")  # freeze the positions just measured
    out = path / name
    fig.savefig(out, dpi=DPI, facecolor="white")
    return Plot(name=name, path=out, title=title, caption=caption, panels=tuple(panels))


def _tps(rows: Sequence[CellRow]) -> list[int | None]:
    return sorted({r.tp for r in rows}, key=lambda t: t or 0)


def _tp_title(tp: int | None) -> str:
    return f"TP{tp}" if tp is not None else "TP ?"


def _concurrency_axis(ax: object, values: Sequence[int]) -> None:
    vals = sorted(set(values))
    if vals and vals[-1] / max(vals[0], 1) >= 8:
        ax.set_xscale("log", base=2)  # type: ignore[attr-defined]
    ax.set_xticks(vals)  # type: ignore[attr-defined]
    ax.set_xticklabels([str(v) for v in vals])  # type: ignore[attr-defined]
    ax.minorticks_off()  # type: ignore[attr-defined]
    ax.set_xlabel("concurrency")  # type: ignore[attr-defined]


def legend_columns(labels: Sequence[str], width_in: float) -> int:
    """As many legend columns as fit the figure width (about 6 px per character at fontsize 8, plus the handle)."""
    entry_px = 6.2 * max((len(t) for t in labels), default=1) + 48
    return max(1, min(len(labels), int(width_in * DPI // entry_px)))


def _legend(fig: Figure, handles: list[object]) -> None:
    """A legend under the panels, wrapped into rows so that it never runs off the image."""
    if handles:
        labels = [h.get_label() for h in handles]  # type: ignore[attr-defined]
        fig.legend(handles=handles, loc="outside lower center", ncols=legend_columns(labels, fig.get_figwidth()),
                   frameon=False, fontsize=8)


def _line_figure(rows: Sequence[CellRow], stores: Sequence[str], path: Path, *, name: str, title: str, caption: str,
                 ylabel: str, value: str, band: str | None = None, ylog: bool = False) -> Plot | None:
    done = [r for r in rows if r.status == DONE and getattr(r, value) is not None and r.concurrency is not None]
    if not done:
        return None
    tps = _tps(done)
    st = styles(rows, stores)
    order = series_order(done)
    width = PANEL_W * len(tps) + 0.4
    rows_of_legend = math.ceil(len(order) / legend_columns(order, width))
    fig = _new_figure(width, PANEL_H + 0.35 + 0.2 * rows_of_legend)
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
        _concurrency_axis(ax, [r.concurrency for r in here if r.concurrency])
        if ylog:
            ax.set_yscale("log")
        ax.set_title(_tp_title(tp), fontsize=10)
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        ax.set_ylim(bottom=0 if not ylog else None)
    handles = [Line2D([], [], color=st[s].color, linestyle=st[s].linestyle, marker=st[s].marker, label=s) for s in order]
    _legend(fig, handles)
    return _save(fig, path, name, title, caption, [(_tp_title(tp), ax) for ax, tp in zip(axes, tps)])


def throughput_plot(rows: Sequence[CellRow], stores: Sequence[str], path: Path) -> Plot | None:
    return _line_figure(rows, stores, path, name="throughput.png", title="Output throughput vs concurrency",
                        caption="Output tokens/s of the whole server, one line per configuration, one panel per TP.",
                        ylabel="output tok/s", value="output_throughput")


def tpot_plot(rows: Sequence[CellRow], stores: Sequence[str], path: Path) -> Plot | None:
    return _line_figure(rows, stores, path, name="tpot.png", title="Time per output token vs concurrency",
                        caption="TPOT p50 (line) with the band up to p99; lower is better.",
                        ylabel="TPOT ms (p50, band to p99)", value="tpot_p50", band="tpot_p99")


def speedup_heatmap(rows: Sequence[CellRow], path: Path) -> Plot | None:
    """Per TP: rows = speculative configurations (budgets), columns = concurrency, colour = speedup over AR."""
    spec = [r for r in rows if r.speedup_source != "baseline" and r.concurrency is not None]
    if not any(r.speedup is not None for r in spec):
        return None
    tps = [tp for tp in _tps(spec) if any(r.speedup is not None for r in spec if r.tp == tp)]
    values = [r.speedup for r in spec if r.speedup is not None]
    lo, hi = min(min(values), 0.95), max(max(values), 1.05)
    norm = mcolors.TwoSlopeNorm(vmin=lo, vcenter=1.0, vmax=hi)
    cmap = matplotlib.colormaps["RdYlGn"]
    max_rows = max(len({r.series for r in spec if r.tp == tp}) for tp in tps)
    max_cols = max(len({r.concurrency for r in spec if r.tp == tp}) for tp in tps)
    label_in = 0.075 * max(len(r.series) for r in spec)  # room for the row labels
    fig = _new_figure(max(6.5, (max(3.0, 0.75 * max_cols) + label_in) * len(tps) + 1.0), 1.4 + 0.42 * max_rows)
    axes = fig.subplots(1, len(tps), squeeze=False)[0]
    fig.suptitle("Speedup over AR (same TP, concurrency and workload)", fontsize=11, fontweight="bold")
    image = None
    for ax, tp in zip(axes, tps):
        here = [r for r in spec if r.tp == tp]
        ys = series_order(here)
        xs = sorted({r.concurrency for r in here if r.concurrency is not None})
        grid = [[math.nan] * len(xs) for _ in ys]
        status = [[""] * len(xs) for _ in ys]
        for r in here:
            i, j = ys.index(r.series), xs.index(r.concurrency)
            status[i][j] = r.status
            if r.speedup is not None:
                grid[i][j] = r.speedup
        image = ax.imshow(grid, cmap=cmap, norm=norm, aspect="auto")
        ax.set_facecolor("#eeeeee")
        for i in range(len(ys)):
            for j in range(len(xs)):
                v = grid[i][j]
                if math.isnan(v):
                    word = {"failed": "failed", "skipped": "skipped"}.get(status[i][j], status[i][j] or "–")
                    ax.text(j, i, word, ha="center", va="center", fontsize=7, color="#b00020" if word == "failed" else "#555555")
                else:
                    dark = abs(norm(v) - 0.5) > 0.35
                    ax.text(j, i, f"{v:.2f}×", ha="center", va="center", fontsize=8, color="white" if dark else "black")
        ax.set_xticks(range(len(xs)), [str(x) for x in xs])
        ax.set_yticks(range(len(ys)), ys, fontsize=8)
        ax.set_xlabel("concurrency")
        ax.set_title(_tp_title(tp), fontsize=10)
        ax.tick_params(length=0)
        for spine in ax.spines.values():
            spine.set_visible(False)
    if image is not None:
        fig.colorbar(image, ax=list(axes), shrink=0.9, label="speedup ×")
    return _save(fig, path, "speedup.png", "Speedup heat map",
                 "Output throughput over the AR baseline at the same TP and concurrency; green is faster.",
                 [(_tp_title(tp), ax) for ax, tp in zip(axes, tps)])


def per_user(r: CellRow) -> float | None:
    """tok/s one user sees: 1000 / tpot_ms_mean, else p50, else output_throughput / concurrency."""
    tpot = r.tpot_mean or r.tpot_p50
    if tpot:
        return 1000.0 / tpot
    if r.output_throughput is not None and r.concurrency:
        return r.output_throughput / r.concurrency
    return None


def per_gpu(r: CellRow) -> float | None:
    """Output tok/s per GPU: output_throughput / tp."""
    if r.output_throughput is None:
        return None
    return r.output_throughput / (r.tp or 1)


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point beats on both axes (both maximised), by descending x."""
    order = sorted(range(len(points)), key=lambda i: (-points[i][0], -points[i][1]))
    front, best_y = [], -math.inf
    for i in order:
        if points[i][1] > best_y:
            front.append(i)
            best_y = points[i][1]
    return front


def pareto_plot(rows: Sequence[CellRow], stores: Sequence[str], path: Path) -> Plot | None:
    pts = [(r, per_user(r), per_gpu(r)) for r in rows if r.status == DONE]
    pts = [(r, x, y) for r, x, y in pts if x is not None and y is not None]
    if not pts:
        return None
    st = styles(rows, stores)
    tps = _tps([r for r, _, _ in pts])
    tp_marker = {tp: MARKERS[i % len(MARKERS)] for i, tp in enumerate(tps)}
    fig = _new_figure(8.6, 5.6)
    ax = fig.subplots()
    fig.suptitle("Pareto: tok/s per user vs tok/s per GPU", fontsize=11, fontweight="bold")
    groups: dict[tuple[str, int | None], list[tuple[float, float]]] = {}
    for r, x, y in pts:
        groups.setdefault((r.series, r.tp), []).append((x, y))
    store_of = {r.series: r.store for r, _, _ in pts}
    for (series, tp), xy in groups.items():
        hollow = len(stores) > 1 and stores.index(store_of[series]) % 2 == 1  # 2nd, 4th store: open markers
        ax.scatter([p[0] for p in xy], [p[1] for p in xy], marker=tp_marker[tp], s=34, alpha=0.85, zorder=3,
                   facecolors="white" if hollow else st[series].color,
                   edgecolors=st[series].color if hollow else "white", linewidths=1.2 if hollow else 0.5)
    front = pareto_front([(x, y) for _, x, y in pts])
    fx = [pts[i][1] for i in front]
    fy = [pts[i][2] for i in front]
    ax.step(fx, fy, where="post", color="#333333", linewidth=1.4, linestyle="--", zorder=2, label="Pareto frontier")
    ax.scatter(fx, fy, s=120, facecolors="none", edgecolors="#333333", linewidths=1.3, zorder=4)
    for k, i in enumerate(front):
        r, x, y = pts[i]
        ax.annotate(f"{r.series} TP{r.tp} c{r.concurrency}", (x, y), textcoords="offset points",
                    xytext=(6, 6) if k % 2 == 0 else (6, -12), fontsize=7, color="#333333")
    ax.set_xlabel("tok/s per user (1000 / TPOT mean)")
    ax.set_ylabel("output tok/s per GPU")
    ax.grid(True, alpha=0.3)
    ax.set_xlim(left=0, right=max(p[1] for p in pts) * 1.2)
    ax.set_ylim(bottom=0, top=max(p[2] for p in pts) * 1.12)
    order = series_order([r for r, _, _ in pts])
    if len(stores) > 1:  # colour = configuration, filled / open = store
        configs = sorted({r.config for r, _, _ in pts}, key=label_key)
        colour = {r.config: st[r.series].color for r, _, _ in pts}
        handles: list[object] = [Patch(color=colour[c], label=c) for c in configs]
        handles += [Patch(facecolor="white" if i % 2 else "#555555", edgecolor="#555555",
                          label=f"{name} ({'open' if i % 2 else 'filled'})") for i, name in enumerate(stores)]
    else:
        handles = [Patch(color=st[s].color, label=s) for s in order]
    handles += [Line2D([], [], color="#555555", marker=tp_marker[tp], linestyle="none", label=_tp_title(tp)) for tp in tps]
    handles.append(Line2D([], [], color="#333333", linestyle="--", label="frontier"))
    ax.legend(handles=handles, loc="upper right", fontsize=7, frameon=True, framealpha=0.9)
    return _save(fig, path, "pareto.png", "Pareto frontier",
                 "Every done cell; up and right is better. The dashed line joins the cells no other cell beats on both.",
                 [("all TP", ax)])


def accept_plot(rows: Sequence[CellRow], accepts: Mapping[str, Sequence[float]], stores: Sequence[str],
                path: Path) -> Plot | None:
    """Rows = TP, columns = speculative configuration; a box of per-request accept lengths per concurrency.

    A cell with no per-request values but an `accept_length_mean` (e.g. from the engine's aggregate
    counters) is drawn as one diamond at that mean."""
    spec = [r for r in rows if r.speedup_source != "baseline" and r.status == DONE
            and (accepts.get(r.cell_id) or r.accept_length is not None)]
    if not spec:
        return None
    tps = _tps(spec)
    configs = series_order(spec)
    st = styles(rows, stores)
    fig = _new_figure(0.5 + 2.7 * max(len(configs), 2), 0.8 + 2.3 * len(tps))
    grid = fig.subplots(len(tps), len(configs), squeeze=False, sharey=True)
    fig.suptitle("Accept length per request (tokens per verify step)", fontsize=11, fontweight="bold")
    panels = []
    means_only = False
    for i, tp in enumerate(tps):
        for j, series in enumerate(configs):
            ax = grid[i][j]
            cells = sorted((r for r in spec if r.tp == tp and r.series == series), key=lambda r: r.concurrency or 0)
            color = st[series].color
            for k, r in enumerate(cells):
                values = list(accepts.get(r.cell_id) or ())
                if values:
                    box = ax.boxplot([values], positions=[k], widths=0.6, patch_artist=True, showfliers=False)
                    box["boxes"][0].set_facecolor(color)
                    box["boxes"][0].set_alpha(0.55)
                    box["medians"][0].set_color("#222222")
                    # every request as a dot, spread sideways: a box of equal values is otherwise a bare line
                    offsets = [((n * 0.618) % 1.0 - 0.5) * 0.3 for n in range(len(values))]
                    ax.scatter([k + o for o in offsets], values, s=9, color=color, edgecolors="#333333",
                               linewidths=0.4, alpha=0.8, zorder=4)
                else:
                    means_only = True
                    ax.plot([k], [r.accept_length], marker="D", markersize=8, color=color, linestyle="none")
            if cells:
                ax.set_xticks(range(len(cells)), [f"c{r.concurrency}" for r in cells], fontsize=7)
                ax.set_xlim(-0.6, len(cells) - 0.4)
                panels.append((f"{_tp_title(tp)} {series}", ax))
            else:
                ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes, color="#888888")
                ax.set_xticks([])
            ax.grid(True, axis="y", alpha=0.3)
            if i == 0:
                ax.set_title(series, fontsize=9)
            if j == 0:
                ax.set_ylabel(f"{_tp_title(tp)}\naccept len")
    caption = ("Per-request mean accepted tokens per verify step, per speculative cell (box = quartiles, "
               "dots = requests).")
    if means_only:
        caption += " A diamond is a cell mean without per-request values (engine counters)."
    return _save(fig, path, "accept_length.png", "Accept-length distribution", caption, panels)


def memory_plot(memory: Sequence[MemoryRow], path: Path) -> Plot | None:
    """Stacked horizontal bar per server tuple: weights / draft / Mamba / KV / headroom, GiB per GPU."""
    rows = [m for m in memory if m.parts]
    if not rows:
        return None
    tps = sorted({m.tp for m in rows}, key=lambda t: t or 0)
    counts = [sum(1 for m in rows if m.tp == tp) for tp in tps]
    fig = _new_figure(9.0, 1.1 + 0.34 * sum(counts) + 0.45 * len(tps))
    axes = fig.subplots(len(tps), 1, squeeze=False, sharex=True, height_ratios=[max(c, 1) for c in counts])[:, 0]
    fig.suptitle("Planned memory per GPU (servers.plan_json)", fontsize=11, fontweight="bold")
    xmax = max(max(m.total or 0, sum(v for _, v in m.parts)) for m in rows) * 1.02
    for ax, tp in zip(axes, tps):
        here = [m for m in rows if m.tp == tp]
        labels = [m.series + (" (fixed)" if m.verdict == "fixed" else "")
                  + (" ✗" if m.plan_status == "fails" or m.status == "failed" else "") for m in here]
        for k, m in enumerate(here):
            left = 0.0
            for name, value in m.parts:
                ax.barh(k, value, left=left, color=MEMORY_COLORS[name], edgecolor="white", linewidth=0.6, height=0.7)
                if value >= xmax * 0.06:
                    ax.text(left + value / 2, k, f"{value:.1f}", ha="center", va="center", fontsize=7,
                            color="#222222" if name == "headroom" else "white")
                left += value
        ax.set_yticks(range(len(here)), labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_title(_tp_title(tp), fontsize=9, loc="left")
        ax.set_xlim(0, xmax)
        ax.grid(True, axis="x", alpha=0.3)
    axes[-1].set_xlabel("GiB per GPU")
    present = [n for n in MEMORY_COLORS if any(n in dict(m.parts) for m in rows)]
    _legend(fig, [Patch(color=MEMORY_COLORS[n], label=n) for n in present])
    return _save(fig, path, "memory.png", "Memory plan",
                 "The planner's split of each GPU: weights, draft weights, Mamba/GDN state, KV cache, headroom "
                 "(GPU total minus the rest); (fixed): launched with the planner's nearest working change; "
                 "✗: the plan fails or the server failed.",
                 [(_tp_title(tp), ax) for ax, tp in zip(axes, tps)])


def all_plots(rows: Sequence[CellRow], accepts: Mapping[str, Sequence[float]], memory: Sequence[MemoryRow],
              stores: Sequence[str], path: Path) -> tuple[Plot, ...]:
    """Every figure that has data, in report order."""
    path.mkdir(parents=True, exist_ok=True)
    made = (throughput_plot(rows, stores, path), tpot_plot(rows, stores, path), speedup_heatmap(rows, path),
            pareto_plot(rows, stores, path), accept_plot(rows, accepts, stores, path), memory_plot(memory, path))
    return tuple(p for p in made if p is not None)
