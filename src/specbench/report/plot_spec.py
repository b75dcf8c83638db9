"""The speculative-decoding figures: the speedup heat map (per TP: configuration x concurrency) and the
accept-length boxes (per TP and configuration: one box of per-request accept lengths per concurrency)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib
from matplotlib import colors as mcolors

from specbench.report.plot_base import (
    Plot,
    new_figure,
    save,
    series_order,
    styles,
    tp_title,
    tps_of,
)
from specbench.report.tables import DONE, CellRow


def speedup_heatmap(rows: Sequence[CellRow], path: Path) -> Plot | None:
    """Per TP: rows = speculative configurations (budgets), columns = concurrency, colour = speedup over AR."""
    spec = [r for r in rows if r.speedup_source != "baseline" and r.concurrency is not None]
    if not any(r.speedup is not None for r in spec):
        return None
    tps = [tp for tp in tps_of(spec) if any(r.speedup is not None for r in spec if r.tp == tp)]
    values = [r.speedup for r in spec if r.speedup is not None]
    lo, hi = min(min(values), 0.95), max(max(values), 1.05)
    norm = mcolors.TwoSlopeNorm(vmin=lo, vcenter=1.0, vmax=hi)
    cmap = matplotlib.colormaps["RdYlGn"]
    max_rows = max(len({r.series for r in spec if r.tp == tp}) for tp in tps)
    max_cols = max(len({r.concurrency for r in spec if r.tp == tp}) for tp in tps)
    label_in = 0.075 * max(len(r.series) for r in spec)  # room for the row labels
    fig = new_figure(max(6.5, (max(3.0, 0.75 * max_cols) + label_in) * len(tps) + 1.0), 1.4 + 0.42 * max_rows)
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
        ax.set_title(tp_title(tp), fontsize=10)
        ax.tick_params(length=0)
        for spine in ax.spines.values():
            spine.set_visible(False)
    if image is not None:
        fig.colorbar(image, ax=list(axes), shrink=0.9, label="speedup ×")
    return save(fig, path, "speedup.png", "Speedup heat map",
                 "Output throughput over the AR baseline at the same TP and concurrency; green is faster.",
                 [(tp_title(tp), ax) for ax, tp in zip(axes, tps)])


def accept_plot(rows: Sequence[CellRow], accepts: Mapping[str, Sequence[float]], stores: Sequence[str],
                path: Path) -> Plot | None:
    """Rows = TP, columns = speculative configuration; a box of per-request accept lengths per concurrency.

    A cell with no per-request values but an `accept_length_mean` (e.g. from the engine's aggregate
    counters) is drawn as one diamond at that mean."""
    spec = [r for r in rows if r.speedup_source != "baseline" and r.status == DONE
            and (accepts.get(r.cell_id) or r.accept_length is not None)]
    if not spec:
        return None
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
                ax.set_xticks(range(len(cells)), [f"c{r.concurrency}" for r in cells], fontsize=7)
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
    return save(fig, path, "accept_length.png", "Accept-length distribution", caption, panels)


def accept_top(rows: Sequence[CellRow], accepts: Mapping[str, Sequence[float]]) -> float:
    """The accept-length axis top: the largest draft tokens + 1 of the cells (the most one verify step can
    accept), and never below a measured value."""
    ks = [r.draft_tokens + 1 for r in rows if r.draft_tokens]
    seen = [v for r in rows for v in (accepts.get(r.cell_id) or ())] + [r.accept_length for r in rows
                                                                        if r.accept_length is not None]
    return float(max(ks + [math.ceil(max(seen, default=1.0) + 0.5)]))


def accept_pos_plot(rows: Sequence[CellRow], stores: Sequence[str], path: Path) -> Plot | None:
    """Per TP: the share of verify steps that accepted the draft token at each position (vLLM's
    spec_decode_num_accepted_tokens_per_pos / num_drafts), one line per configuration and concurrency."""
    spec = [r for r in rows if r.status == DONE and r.acceptance_per_pos]
    if not spec:
        return None
    tps = tps_of(spec)
    st = styles(rows, stores)
    fig = new_figure(0.6 + 4.3 * len(tps), 3.6)
    axes = fig.subplots(1, len(tps), squeeze=False)[0]
    fig.suptitle("Acceptance per draft position", fontsize=11, fontweight="bold")
    for ax, tp in zip(axes, tps):
        for r in sorted((r for r in spec if r.tp == tp), key=lambda r: (r.series, r.concurrency or 0)):
            xs = list(range(1, len(r.acceptance_per_pos) + 1))
            ax.plot(xs, list(r.acceptance_per_pos), color=st[r.series].color, marker="o", markersize=4,
                    label=f"{r.series} c{r.concurrency}", markerfacecolor="white" if r.simulated is not None else None)
        ax.set_ylim(0, 1.05)
        ax.set_xlabel("draft position")
        ax.set_ylabel("accepted share of steps")
        ax.set_title(tp_title(tp), fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, frameon=False)
    return save(fig, path, "accept_pos.png", "Acceptance per draft position",
                "Share of verify steps whose draft token at position i was accepted (vLLM's per-position counters, "
                "read from /metrics before and after each cell); SGLang's meta_info has no per-position counts.",
                [(tp_title(tp), ax) for ax, tp in zip(axes, tps)])


def _accept_boxes(ax: object, cells: Sequence[CellRow], accepts: Mapping[str, Sequence[float]], color: str) -> bool:
    """One box of per-request accept lengths per cell (a diamond at the cell mean without them); True if any
    diamond was drawn."""
    means_only = False
    for k, r in enumerate(cells):
        values = list(accepts.get(r.cell_id) or ())
        if values:
            box = ax.boxplot([values], positions=[k], widths=0.6, patch_artist=True, showfliers=False)  # type: ignore[attr-defined]
            box["boxes"][0].set_facecolor(color)
            box["boxes"][0].set_alpha(0.55)
            box["medians"][0].set_color("#222222")
            # every request as a dot, spread sideways: a box of equal values is otherwise a bare line
            offsets = [((n * 0.618) % 1.0 - 0.5) * 0.3 for n in range(len(values))]
            ax.scatter([k + o for o in offsets], values, s=9, color=color, edgecolors="#333333",  # type: ignore[attr-defined]
                       linewidths=0.4, alpha=0.8, zorder=4)
        else:
            means_only = True
            ax.plot([k], [r.accept_length], marker="D", markersize=8, color=color, linestyle="none")  # type: ignore[attr-defined]
    return means_only
