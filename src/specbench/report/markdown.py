"""report.md: the report as GitHub-flavoured Markdown (pure: Report -> str). Images and logs are relative links."""

from __future__ import annotations

import html

from specbench.report.decision_tables import DecisionTable, answer_tables, ranking_tables
from specbench.report.fits_render import fits_markdown
from specbench.report.formatting import DECISION_NOTE, SIMULATED_NOTE, cell_columns, cell_values, fmt, fmt_ci
from specbench.report.integrity_tables import (
    AA_HEADER,
    AA_NOTE,
    INTEGRITY_HEADER,
    INTEGRITY_NOTE,
    aa_rows,
    integrity_rows,
)
from specbench.report.model import Report
from specbench.report.predicted import markdown_lines as predicted_md
from specbench.report.rows import MemoryRow

BAR_WIDTH = 40
BAR_CHARS = {"weights": "█", "draft": "▓", "Mamba": "▒", "KV": "░", "headroom": "·"}


def _esc(text: object) -> str:
    """A table cell: HTML escaped (GitHub renders raw HTML in Markdown: a `<script>` label stays text), one line."""
    return html.escape(str(text), quote=False).replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: list[list[str]], drop_first: bool = False) -> list[str]:
    if drop_first:  # the "store" column of a single-store report
        header, rows = header[1:], [r[1:] for r in rows]
    out = ["| " + " | ".join(_esc(h) for h in header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(_esc(c) for c in row) + " |" for row in rows]
    return out


def text_bar(m: MemoryRow, scale: float) -> str:
    """A stacked bar in characters: █ weights ▓ draft ▒ Mamba ░ KV · headroom, BAR_WIDTH chars = scale GiB."""
    return "".join(BAR_CHARS[name] * round(value / scale * BAR_WIDTH) for name, value in m.parts) if scale else ""


def _notes(report: Report) -> list[str]:
    rows = [r for p in report.tables.phases for r in p.rows]
    out = []
    if any(r.simulated is not None for r in rows):
        out.append(f"Accept len {SIMULATED_NOTE}")
    if any(r.repeats for r in rows):
        out.append(REPEATS_NOTE)
    if any(r.speedup_source != "baseline" and r.speedup_lead == "tpot" for r in rows):
        out.append("Rate cells (request_rate set) lead with the TPOT speedup (AR TPOT mean / TPOT mean): their "
                   "throughput ratio is about 1 by construction below saturation.")
    if rows:
        out.append(DECISION_NOTE)
    return [*out, ""] if out else []


REPEATS_NOTE = ("With repeats (n): out tok/s is pooled over the repeats (total output tokens / total measured time) "
                "with its 95% interval on the log scale in brackets; the speedups are ratios of pooled values with "
                "their log-ratio 95% intervals (the delta-method standard error of the log ratio, Welch-"
                "Satterthwaite df from the relative variances, exact Student-t quantiles; never below 0).")


def _decision_table(dt: DecisionTable) -> list[str]:
    return [f"## {_esc(dt.title)}", "", _esc(dt.note), "", *_table(list(dt.header), [list(r) for r in dt.rows]), ""]


def _integrity(report: Report) -> list[str]:
    rows = integrity_rows([r for p in report.tables.phases for r in p.rows])
    if not rows:
        return []
    return ["## Integrity of each measured cell", "", _esc(INTEGRITY_NOTE) + ".", "",
            *_table(list(INTEGRITY_HEADER), [list(r) for r in rows]), ""]


def _categories(report: Report) -> list[str]:
    cats = report.tables.categories
    if not cats:
        return []
    lines = ["## Per category", "",
             "Speculative cells on the requests of each dataset category: accept length, mean per-request output "
             "rate (tok/s per request) and its speedup over the AR cell on the same category (95% interval over the "
             "repeats in brackets).", ""]
    lines += _table(["store", "config", "TP", "c", "category", "requests", "accept len", "tok/s per req",
                     "AR tok/s per req", "speedup vs AR"],
                    [[c.store, c.series, fmt(c.tp), fmt(c.concurrency), c.category, str(c.requests),
                      fmt(c.accept_length, 2) + (f" (sim {c.simulated:g})" if c.simulated is not None else ""),
                      fmt(c.rate), fmt(c.ar_rate), fmt_ci(c.speedup, c.speedup_ci, unit="×")] for c in cats],
                    drop_first=not report.multi)
    return [*lines, ""]


def render_markdown(report: Report) -> str:
    t = report.tables
    lines = [f"# {_esc(report.title)}", "", f"Generated {report.generated_at}.", ""]
    lines += ["## Stores", ""]
    lines += _table(["store", "file", "engine", "version", "model", "servers", "cells"],
                    [[s.label, f"`{s.path}`", s.engine or "–", s.engine_version or "–", s.model or "–",
                      str(s.n_servers), str(s.n_cells)] for s in report.stores])
    lines += ["", f"**{_esc(t.summary.headline)}**", ""]

    if t.sections:
        lines += ["Sections: " + "; ".join(_esc(s) for s in t.sections) + " (one per model and GPU: tables, "
                  "rankings and figures never mix them).", ""]
    for dt in answer_tables(t.questions):
        lines += _decision_table(dt)
    aa = aa_rows(t.questions)
    if aa:
        lines += ["## A/A check", "", _esc(AA_NOTE) + ".", "", *_table(list(AA_HEADER), [list(r) for r in aa]), ""]

    if report.plots:
        lines += ["## Figures", ""]
        for p in report.plots:
            lines += [f"### {_esc(p.title)}", "", f"![{_esc(p.title)}]({p.name})", "", _esc(p.caption), ""]
    elif t.summary.n_cells:
        lines += ["No figures: no cell finished with measurements.", ""]

    for table in t.phases:
        lines += [f"## {_esc(table.title)}", ""]
        lines += _table([h for h, _ in cell_columns()], [cell_values(r) for r in table.rows])
        lines.append("")
    lines += fits_markdown(report.fits) if report.fits else []
    lines += _notes(report)
    for dt in ranking_tables(t.questions):
        lines += _decision_table(dt)
    lines += _integrity(report)
    lines += _categories(report)
    lines += predicted_md(report.predicted)

    lines += ["## Failures", ""]
    if t.failures:
        lines += _table(["store", "what", "id", "config", "TP", "c", "status", "diagnosis", "log"],
                        [[f.store, f.kind, f"`{f.ident}`", f.series, fmt(f.tp), fmt(f.concurrency), f.status,
                          f.diagnosis, f"[log]({f.log_file})" if f.log_file else "–"] for f in t.failures],
                        drop_first=not report.multi)
    else:
        lines.append("None.")
    lines.append("")

    lines += ["## Memory plan per server tuple (GiB per GPU, from the planner)", ""]
    if t.memory:
        scale = max((m.total or sum(v for _, v in m.parts)) for m in t.memory) or 0.0
        lines += _table(["store", "server", "config", "TP", "plan", "weights", "draft", "Mamba", "KV", "headroom",
                         "GPU total", "KV tokens", "max running", "mem frac", "bar"],
                        [[m.store, f"`{m.server_id}`", m.series, fmt(m.tp), m.plan_text, fmt(m.weights, 2),
                          fmt(m.draft, 2), fmt(m.mamba, 2), fmt(m.kv, 2), fmt(m.headroom, 2), fmt(m.total, 2),
                          fmt(m.kv_tokens), fmt(m.max_running_requests), fmt(m.mem_fraction_static, 2),
                          f"`{text_bar(m, scale)}`"] for m in t.memory], drop_first=not report.multi)
        lines += ["", "Bar: █ weights ▓ draft ▒ Mamba ░ KV · headroom.", ""]
    else:
        lines += ["No server in the store has a memory plan.", ""]

    if t.warnings:
        lines += ["## Store warnings", ""] + [f"- {_esc(w)}" for w in t.warnings] + [""]
    return "\n".join(lines).rstrip() + "\n"
