"""The memory figure: the planner's split of each GPU per server tuple, one stacked bar each."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from matplotlib.patches import Patch

from specbench.report.plot_base import (
    MEMORY_COLORS,
    Plot,
    legend,
    new_figure,
    save,
    tp_title,
)
from specbench.report.rows import MemoryRow

MAX_TUPLES = 48  # bars per figure: beyond, the figure is a wall of labels (the table has them all)


def memory_plot(memory: Sequence[MemoryRow], path: Path) -> Plot | None:
    """Stacked horizontal bar per server tuple: weights / draft / Mamba / KV / headroom, GiB per GPU."""
    rows = [m for m in memory if m.parts]
    if not rows:
        return None
    shown = rows[:MAX_TUPLES]
    left_out = (f" The first {len(shown)} of {len(rows)} server tuples; every one is in the memory table."
                if len(rows) > len(shown) else "")
    rows = shown
    tps = sorted({m.tp for m in rows}, key=lambda t: t or 0)
    counts = [sum(1 for m in rows if m.tp == tp) for tp in tps]
    fig = new_figure(9.0, 1.1 + 0.34 * sum(counts) + 0.45 * len(tps))
    axes = fig.subplots(len(tps), 1, squeeze=False, sharex=True, height_ratios=[max(c, 1) for c in counts])[:, 0]
    fig.suptitle("Planned memory per GPU (servers.plan_json)", fontsize=11, fontweight="bold")
    xmax = max(max(m.total or 0, sum(v for _, v in m.parts)) for m in rows) * 1.02
    for ax, tp in zip(axes, tps):
        here = [m for m in rows if m.tp == tp]
        labels = [m.series + (" (fixed)" if m.verdict == "fixed" else "")
                  + (" ✗" if m.plan_status == "fails" or m.status == "failed" else "") for m in here]
        lefts = [0.0] * len(here)
        for name in MEMORY_COLORS:  # one bar call per part for every tuple (a 200-tuple store drew 1,000 calls)
            ks = [k for k, m in enumerate(here) if dict(m.parts).get(name)]
            if not ks:
                continue
            vals = [dict(here[k].parts)[name] for k in ks]
            ax.barh(ks, vals, left=[lefts[k] for k in ks], color=MEMORY_COLORS[name], edgecolor="white",
                    linewidth=0.6, height=0.7)
            for k, value in zip(ks, vals):
                if value >= xmax * 0.06 and len(here) <= 60:
                    ax.text(lefts[k] + value / 2, k, f"{value:.1f}", ha="center", va="center", fontsize=7,
                            color="#222222" if name == "headroom" else "white")
                lefts[k] += value
        ax.set_yticks(range(len(here)), labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_title(tp_title(tp), fontsize=9, loc="left")
        ax.set_xlim(0, xmax)
        ax.grid(True, axis="x", alpha=0.3)
    axes[-1].set_xlabel("GiB per GPU")
    present = [n for n in MEMORY_COLORS if any(n in dict(m.parts) for m in rows)]
    legend(fig, [Patch(color=MEMORY_COLORS[n], label=n) for n in present])
    return save(fig, path, "memory.png", "Memory plan",
                 "The planner's split of each GPU: weights, draft weights, Mamba/GDN state, KV cache, headroom "
                 "(GPU total minus the rest); (fixed): launched with the planner's nearest working change; "
                 "✗: the plan fails or the server failed." + left_out,
                 [(tp_title(tp), ax) for ax, tp in zip(axes, tps)])
