"""The Pareto figure: tok/s per user against tok/s per GPU for every done cell, with the frontier."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from matplotlib.artist import Artist
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from specbench.report.plot_base import (
    MARKERS,
    Plot,
    new_figure,
    save,
    series_order,
    styles,
    tp_title,
    tps_of,
)
from specbench.report.rows import DONE, CellRow
from specbench.stored.records import label_key


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


MAX_LABELS = 12  # frontier points labelled (the rest of the frontier is drawn, unlabelled)


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
    pts: list[tuple[CellRow, float, float]] = []  # the done cells that have both coordinates
    for r in rows:
        x, y = (per_user(r), per_gpu(r)) if r.status == DONE else (None, None)
        if x is not None and y is not None:
            pts.append((r, x, y))
    if not pts:
        return None
    st = styles(rows, stores)
    tps = tps_of([r for r, _, _ in pts])
    tp_marker = {tp: MARKERS[i % len(MARKERS)] for i, tp in enumerate(tps)}
    fig = new_figure(8.6, 5.6)
    ax = fig.subplots()
    fig.suptitle("Pareto: tok/s per user vs tok/s per GPU", fontsize=11, fontweight="bold")
    # one scatter call per (TP marker, filled / open): colours per point (a 20,000-cell store made 200 calls)
    groups: dict[tuple[int | None, bool], list[tuple[float, float, str]]] = {}
    for r, x, y in pts:
        hollow = len(stores) > 1 and r.store in stores and stores.index(r.store) % 2 == 1  # 2nd, 4th store: open
        groups.setdefault((r.tp, hollow), []).append((x, y, st[r.series].color))
    for (tp, hollow), xyc in groups.items():
        colours = [p[2] for p in xyc]
        ax.scatter([p[0] for p in xyc], [p[1] for p in xyc], marker=tp_marker[tp], s=34, alpha=0.85, zorder=3,
                   facecolors="white" if hollow else colours, edgecolors=colours if hollow else "white",
                   linewidths=1.2 if hollow else 0.5)
    front = pareto_front([(x, y) for _, x, y in pts])
    fx = [pts[i][1] for i in front]
    fy = [pts[i][2] for i in front]
    ax.step(fx, fy, where="post", color="#333333", linewidth=1.4, linestyle="--", zorder=2, label="Pareto frontier")
    ax.scatter(fx, fy, s=120, facecolors="none", edgecolors="#333333", linewidths=1.3, zorder=4)
    for k, i in enumerate(front[:MAX_LABELS]):
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
        handles: list[Artist] = [Patch(color=colour[c], label=c) for c in configs]
        handles += [Patch(facecolor="white" if i % 2 else "#555555", edgecolor="#555555",
                          label=f"{name} ({'open' if i % 2 else 'filled'})") for i, name in enumerate(stores)]
    else:
        handles = [Patch(color=st[s].color, label=s) for s in order]
    handles += [Line2D([], [], color="#555555", marker=tp_marker[tp], linestyle="none", label=tp_title(tp)) for tp in tps]
    handles.append(Line2D([], [], color="#333333", linestyle="--", label="frontier"))
    ax.legend(handles=handles, loc="upper right", fontsize=7, frameon=True, framealpha=0.9)
    return save(fig, path, "pareto.png", "Pareto frontier",
                 "Every done cell; up and right is better. The dashed line joins the cells no other cell beats on both.",
                 [("all TP", ax)])
