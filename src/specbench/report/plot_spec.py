"""The speculative-decoding figures: the speedup heat map (per TP: configuration x concurrency) and the
accept-length boxes (per TP and configuration: one box of per-request accept lengths per concurrency)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib
from matplotlib import colors as mcolors
from matplotlib.axes import Axes
from matplotlib.patches import Rectangle

from specbench.report.plot_base import (
    Plot,
    PlotPoint,
    new_figure,
    save,
    series_order,
    styles,
    thin_ticks,
    top_series,
    tp_title,
    tps_of,
)

MAX_HEAT_ROWS = 30  # configurations per heat map panel
MAX_HEAT_COLS = 24  # concurrencies per panel that still get their number written in the cell
MAX_FIG_IN = 30.0  # the widest figure (inches): beyond, cells get narrower instead of the image wider
MAX_ACCEPT_CONFIGS = 8  # columns of the accept-length figure and panels of the per-position one
MARKS = {"undecided": "?", "tie": " ≈"}  # the heat map's mark of a cell's verdict against AR (decided: none)
from specbench.report.plot_base import workload_subtitle
from specbench.report.rows import DONE, CellRow


def speedup_heatmap(rows: Sequence[CellRow], path: Path) -> Plot | None:
    """Per TP: rows = speculative configurations (budgets), columns = concurrency, colour = speedup over AR."""
    spec = [r for r in rows if r.speedup_source != "baseline" and r.concurrency is not None]
    if not any(r.speedup is not None for r in spec):
        return None
    spec, left_out = top_series(spec, MAX_HEAT_ROWS)
    tps = [tp for tp in tps_of(spec) if any(r.speedup is not None for r in spec if r.tp == tp)]
    values = [r.speedup for r in spec if r.speedup is not None]
    lo, hi = min(min(values), 0.95), max(max(values), 1.05)
    norm = mcolors.TwoSlopeNorm(vmin=lo, vcenter=1.0, vmax=hi)
    cmap = matplotlib.colormaps["RdYlGn"]
    max_rows = max(len({r.series for r in spec if r.tp == tp}) for tp in tps)
    max_cols = max(len({r.concurrency for r in spec if r.tp == tp}) for tp in tps)
    label_in = 0.075 * max(len(r.series) for r in spec)  # room for the row labels
    annotate = max_cols <= MAX_HEAT_COLS  # a number per cell only while it fits; the colour bar reads the rest
    col_in = 0.75 if annotate else 0.12
    fig = new_figure(min(MAX_FIG_IN, max(6.5, (max(3.0, col_in * max_cols) + label_in) * len(tps) + 1.0)),
                     1.4 + 0.42 * max_rows)
    axes = fig.subplots(1, len(tps), squeeze=False)[0]
    fig.suptitle("Speedup over AR (same TP, concurrency and workload)" + workload_subtitle(spec), fontsize=11,
                 fontweight="bold")
    image = None
    drawn: list[PlotPoint] = []
    for ax, tp in zip(axes, tps):
        here = [r for r in spec if r.tp == tp]
        ys = series_order(here)
        xs = sorted({r.concurrency for r in here if r.concurrency is not None})
        grid = [[math.nan] * len(xs) for _ in ys]
        status = [[""] * len(xs) for _ in ys]
        verdict = [[""] * len(xs) for _ in ys]
        for r in here:
            assert r.concurrency is not None  # spec keeps only the cells that have one
            i, j = ys.index(r.series), xs.index(r.concurrency)
            status[i][j] = r.status
            if r.speedup is not None:
                grid[i][j] = r.speedup
                verdict[i][j] = r.vs_ar.get("throughput", "undecided")
                drawn.append(PlotPoint(tp_title(tp), r.series, float(r.concurrency), r.speedup,
                                       r.speedup_ci[0] if r.speedup_ci else None,
                                       r.speedup_ci[1] if r.speedup_ci else None, verdict[i][j]))
        image = ax.imshow(grid, cmap=cmap, norm=norm, aspect="auto")
        ax.set_facecolor("#eeeeee")
        for i in range(len(ys) if annotate else 0):
            for j in range(len(xs)):
                v = grid[i][j]
                if math.isnan(v):
                    word = {"failed": "failed", "skipped": "skipped"}.get(status[i][j], status[i][j] or "–")
                    ax.text(j, i, word, ha="center", va="center", fontsize=7, color="#b00020" if word == "failed" else "#555555")
                else:
                    dark = abs(norm(v) - 0.5) > 0.35
                    mark = MARKS.get(verdict[i][j], "")
                    ax.text(j, i, f"{v:.2f}×{mark}", ha="center", va="center", fontsize=8,
                            color="white" if dark else "black")
        for i in range(len(ys)):  # an undecided cell is hatched, whether or not its number fits
            for j in range(len(xs)):
                if not math.isnan(grid[i][j]) and verdict[i][j] == "undecided":
                    ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="//", edgecolor="#77777799",
                                           linewidth=0))
        step = 1 if annotate else max(1, len(xs) // 12)
        ax.set_xticks(range(0, len(xs), step), [str(x) for x in xs[::step]])
        ax.set_yticks(range(len(ys)), ys, fontsize=8)
        ax.set_xlabel("concurrency")
        ax.set_title(tp_title(tp), fontsize=10)
        ax.tick_params(length=0)
        for spine in ax.spines.values():
            spine.set_visible(False)
    if image is not None:
        fig.colorbar(image, ax=list(axes), shrink=0.9, label="speedup ×")
    return save(fig, path, "speedup.png", "Speedup heat map",
                 "Output throughput over the AR baseline at the same TP and concurrency (the ratio of the pooled "
                 "throughputs, as in the tables); green is faster. Hatched with '?': undecided (the speedup's 95% "
                 "interval holds 1 and reaches 3% past 1 either way: repeat the cells); '≈': a tie (the whole interval within "
                 "3% either way); no mark: decided faster or slower." + left_out,
                 [(tp_title(tp), ax) for ax, tp in zip(axes, tps)], drawn)


def accept_plot(rows: Sequence[CellRow], accepts: Mapping[str, Sequence[float]], stores: Sequence[str],
                path: Path) -> Plot | None:
    """Rows = TP, columns = speculative configuration; a box of per-request accept lengths per concurrency.

    A cell with no per-request values but an `accept_length_mean` (e.g. from the engine's aggregate
    counters) is drawn as one diamond at that mean."""
    spec = [r for r in rows if r.speedup_source != "baseline" and r.status == DONE
            and (accepts.get(r.cell_id) or r.accept_length is not None)]
    if not spec:
        return None
    spec, left_out = top_series(spec, MAX_ACCEPT_CONFIGS)
    tps = tps_of(spec)
    configs = series_order(spec)
    st = styles(rows, stores)
    fig = new_figure(0.5 + 2.7 * max(len(configs), 2), 0.8 + 2.3 * len(tps))
    grid = fig.subplots(len(tps), len(configs), squeeze=False, sharey=True)
    fig.suptitle("Accept length per request (tokens per verify step)", fontsize=11, fontweight="bold")
    panels = []
    means_only = False
    for i, tp in enumerate(tps):
        for j, series in enumerate(configs):
            ax = grid[i][j]
            cells = sorted((r for r in spec if r.tp == tp and r.series == series), key=lambda r: r.concurrency or 0)
            if _accept_boxes(ax, cells, accepts, st[series].color):
                means_only = True
            if cells:
                ticks = thin_ticks(list(range(len(cells))))
                ax.set_xticks(ticks, [f"c{cells[k].concurrency}" for k in ticks], fontsize=7)
                ax.set_xlim(-0.6, len(cells) - 0.4)
                panels.append((f"{tp_title(tp)} {series}", ax))
            else:
                ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes, color="#888888")
                ax.set_xticks([])
            ax.grid(True, axis="y", alpha=0.3)
            if i == 0:
                sim = next((r.simulated for r in cells if r.simulated is not None), None)
                ax.set_title(series + (f"\n(simulated {sim:g})" if sim is not None else ""), fontsize=9)
            if j == 0:
                ax.set_ylabel(f"{tp_title(tp)}\naccept len")
    top = accept_top(spec, accepts)
    for row in grid:
        for ax in row:
            ax.set_ylim(0, top)  # the whole possible range: 1 (nothing accepted) is low, not the bottom
    caption = ("Per-request mean accepted tokens per verify step, per speculative cell (box = quartiles, "
               f"dots = requests); the axis runs from 0 to draft tokens + 1 ({top:g}).")
    if any(r.simulated is not None for r in spec):
        caption += (" A column marked simulated ran with the engine's simulated acceptance (simulated_accept_len), "
                    "not its drafter's.")
    if means_only:
        caption += " A diamond is a cell mean without per-request values (engine counters)."
    caption += left_out
    return save(fig, path, "accept_length.png", "Accept-length distribution", caption, panels)


def accept_top(rows: Sequence[CellRow], accepts: Mapping[str, Sequence[float]]) -> float:
    """The accept-length axis top: the largest draft tokens + 1 of the cells (the most one verify step can
    accept), and never below a measured value."""
    ks = [r.draft_tokens + 1 for r in rows if r.draft_tokens]
    seen = [v for r in rows for v in (accepts.get(r.cell_id) or ())] + [r.accept_length for r in rows
                                                                        if r.accept_length is not None]
    return float(max(ks + [math.ceil(max(seen, default=1.0) + 0.5)]))


def accept_pos_plot(rows: Sequence[CellRow], stores: Sequence[str], path: Path) -> Plot | None:
    """Small multiples: one panel per (TP, configuration), at most MAX_ACCEPT_CONFIGS configurations (the fastest),
    one line per concurrency (light to dark), each line the share of verify steps that accepted the draft token at
    each position (vLLM's spec_decode_num_accepted_tokens_per_pos / num_drafts). A panel's legend names only its
    concurrencies, so no legend covers another panel's lines."""
    spec = [r for r in rows if r.status == DONE and r.acceptance_per_pos]
    if not spec:
        return None
    spec, left_out = top_series(spec, MAX_ACCEPT_CONFIGS)
    panels = sorted({(r.tp, r.series) for r in spec}, key=lambda k: (k[0] or 0, series_order(spec).index(k[1])))
    ncols = min(4, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig = new_figure(0.6 + 3.3 * ncols, 0.7 + 2.6 * nrows)
    grid = fig.subplots(nrows, ncols, squeeze=False, sharey=True)
    fig.suptitle("Acceptance per draft position", fontsize=11, fontweight="bold")
    cmap = matplotlib.colormaps["viridis"]
    drawn = []
    for k, (tp, series) in enumerate(panels):
        ax = grid[k // ncols][k % ncols]
        cells = sorted((r for r in spec if r.tp == tp and r.series == series), key=lambda r: r.concurrency or 0)
        for i, r in enumerate(cells):
            xs = list(range(1, len(r.acceptance_per_pos) + 1))
            colour = cmap(0.15 + 0.7 * i / max(1, len(cells) - 1))
            ax.plot(xs, list(r.acceptance_per_pos), color=colour, marker="o", markersize=3, linewidth=1.3,
                    label=f"c{r.concurrency}", markerfacecolor="white" if r.simulated is not None else colour)
        ax.set_ylim(0, 1.05)
        ax.set_xlabel("draft position", fontsize=8)
        if k % ncols == 0:
            ax.set_ylabel("accepted share of steps", fontsize=8)
        sim = next((r.simulated for r in cells if r.simulated is not None), None)
        ax.set_title(f"{tp_title(tp)} {series}" + (f" (sim {sim:g})" if sim is not None else ""), fontsize=8)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6, frameon=False, ncols=2 if len(cells) > 4 else 1, loc="lower left")
        drawn.append((f"{tp_title(tp)} {series}", ax))
    for k in range(len(panels), nrows * ncols):
        grid[k // ncols][k % ncols].set_visible(False)
    return save(fig, path, "accept_pos.png", "Acceptance per draft position",
                "Share of verify steps whose draft token at position i was accepted, one panel per TP and "
                "configuration, one line per concurrency (vLLM's per-position counters, read from /metrics before "
                "and after each cell); SGLang's meta_info has no per-position counts." + left_out, drawn)


def _accept_boxes(ax: Axes, cells: Sequence[CellRow], accepts: Mapping[str, Sequence[float]], color: str) -> bool:
    """One box of per-request accept lengths per cell (a diamond at the cell mean without them), drawn in one call
    per panel, every request as a dot while the panel has at most MAX_DOT_BOXES boxes; True if any diamond was
    drawn."""
    boxed = [(k, list(accepts.get(r.cell_id) or ())) for k, r in enumerate(cells)]
    with_values = [(k, v) for k, v in boxed if v]
    if len(with_values) > MAX_DOT_BOXES:  # too many boxes to read: the median line in its quartile band
        import numpy as np

        qs = [np.percentile(v, (25, 50, 75)) for _, v in with_values]
        xs = [k for k, _ in with_values]
        ax.fill_between(xs, [q[0] for q in qs], [q[2] for q in qs], color=color, alpha=0.3, linewidth=0)
        ax.plot(xs, [q[1] for q in qs], color=color, linewidth=1.4)
    elif with_values:
        box = ax.boxplot([v for _, v in with_values], positions=[k for k, _ in with_values], widths=0.6,
                         patch_artist=True, showfliers=False)
        for patch in box["boxes"]:
            patch.set_facecolor(color)
            patch.set_alpha(0.55)
        for median in box["medians"]:
            median.set_color("#222222")
        if len(with_values) <= MAX_DOT_BOXES:
            # every request as a dot, spread sideways: a box of equal values is otherwise a bare line
            dot_xs = [k + ((n * 0.618) % 1.0 - 0.5) * 0.3 for k, v in with_values for n in range(len(v))]
            ax.scatter(dot_xs, [y for _, v in with_values for y in v], s=9, color=color,
                       edgecolors="#333333", linewidths=0.4, alpha=0.8, zorder=4)
    # a cell without per-request values: its mean as a diamond (no mean: NaN, which draws nothing, as None did)
    means = [(k, math.nan if r.accept_length is None else r.accept_length) for (k, v), r in zip(boxed, cells) if not v]
    if means:
        ax.plot([k for k, _ in means], [m for _, m in means], marker="D", markersize=8, color=color,
                linestyle="none")
    return bool(means)


MAX_DOT_BOXES = 24
