"""report.html: one self-contained page (inline CSS, PNGs as base64 data URIs, no script, no network).

Pure: `render_html(report, images)` where `images` maps a plot's file name to its PNG bytes.
Logs stay separate files (`logs/<cell>.log`), linked relatively, so a whole log is one click away.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from html import escape

from specbench.report.decision_tables import DecisionTable, answer_tables, ranking_tables
from specbench.report.fits_render import fits_html
from specbench.report.formatting import cell_columns, cell_values, fmt
from specbench.report.integrity_tables import (
    AA_HEADER,
    AA_NOTE,
    INTEGRITY_HEADER,
    INTEGRITY_NOTE,
    aa_rows,
    integrity_rows,
)
from specbench.report.model import Report
from specbench.report.plot_base import MEMORY_COLORS
from specbench.report.predicted import html_lines as predicted_html
from specbench.report.rows import CellRow, MemoryRow

CSS = """
:root { --fg:#1d2126; --muted:#5f6b7a; --line:#dde3ea; --bg:#ffffff; --head:#f4f6f9; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: var(--fg);
       background: var(--bg); margin: 0; padding: 24px 32px 64px; max-width: 1680px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 18px; margin: 32px 0 8px; border-bottom: 1px solid var(--line);
     padding-bottom: 4px; } h3 { font-size: 15px; margin: 20px 0 6px; }
.muted { color: var(--muted); } code { font: 12px ui-monospace, "DejaVu Sans Mono", monospace; }
.state { display: inline-block; padding: 8px 12px; border-radius: 6px; font-weight: 600; margin: 8px 0; }
.state.complete { background:#e6f4ea; color:#1e6b34; } .state.partial { background:#fff4e0; color:#8a5300; }
.state.empty, .state.all-failed { background:#fde8e8; color:#9b1c1c; }
table { border-collapse: collapse; margin: 6px 0 12px; font-size: 13px; }
th, td { border: 1px solid var(--line); padding: 4px 8px; text-align: right; white-space: nowrap; }
th { background: var(--head); position: sticky; top: 0; }
td.text, th.text { text-align: left; } td.wrap { white-space: normal; min-width: 320px; max-width: 640px; text-align: left; }
tr.ar td { background: #fafbfc; font-weight: 500; }
tr.best td { background: #eef7ee; font-weight: 600; }
.st { display:inline-block; padding: 0 6px; border-radius: 4px; font-size: 12px; }
.st-done { background:#e6f4ea; color:#1e6b34; } .st-failed { background:#fde8e8; color:#9b1c1c; }
.st-skipped { background:#eef0f3; color:#5f6b7a; } .st-pending, .st-running { background:#fff4e0; color:#8a5300; }
.sp-good { color:#1e6b34; font-weight:600; } .sp-bad { color:#9b1c1c; font-weight:600; }
figure { display: inline-block; vertical-align: top; margin: 12px 24px 24px 0; max-width: 100%; } figure img { max-width: 100%; height: auto; border: 1px solid var(--line); }
figcaption { color: var(--muted); font-size: 13px; }
.bar { display: flex; width: 360px; height: 16px; border-radius: 3px; overflow: hidden; background: #f0f0f0; }
.bar span { display: block; height: 100%; }
.legend span { display: inline-block; width: 10px; height: 10px; margin: 0 4px 0 12px; border-radius: 2px; }
nav a { margin-right: 12px; }
.scroll { overflow-x: auto; max-width: 100%; }
.fails { color:#9b1c1c; font-weight:600; }
"""


def _status(status: str) -> str:
    return f'<span class="st st-{escape(status)}">{escape(status)}</span>'


def _speedup_class(row: CellRow) -> str:
    if row.speedup is None:
        return ""
    return "sp-good" if row.speedup >= 1.0 else "sp-bad"


def _cell_table(rows: tuple[CellRow, ...]) -> str:
    columns = cell_columns()
    head = "".join(f'<th class="{"text" if h in ("config", "status", "cell", "note") else ""}">{escape(h)}</th>'
                   for h, _ in columns)
    body = []
    for r in rows:
        tds = []
        for (_h, attr), text in zip(columns, cell_values(r)):
            if attr == "status":
                tds.append(f'<td class="text">{_status(r.status)}</td>')
            elif attr == "cell_id":
                code = f'<code id="{escape(r.store)}--{escape(r.cell_id)}">{escape(text)}</code>'
                if r.log_file:
                    code = f'<a href="{escape(r.log_file)}" title="the cell\'s whole log">{code}</a>'
                tds.append(f'<td class="text">{code}</td>')
            elif attr == "speedup":
                tds.append(f'<td class="{_speedup_class(r)}">{escape(text)}</td>')
            elif attr in ("series", "note"):
                tds.append(f'<td class="text{" wrap" if attr == "note" and text else ""}">{escape(text)}</td>')
            else:
                tds.append(f"<td>{escape(text)}</td>")
        cls = ' class="ar"' if r.speedup_source == "baseline" else ""
        body.append(f"<tr{cls}>{''.join(tds)}</tr>")
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def _bar(m: MemoryRow, scale: float) -> str:
    spans = "".join(
        f'<span style="width:{100 * v / scale:.2f}%;background:{MEMORY_COLORS[name]}" '
        f'title="{escape(name)} {v:.2f} GiB"></span>' for name, v in m.parts) if scale else ""
    return f'<div class="bar">{spans}</div>'


def _simple_table(header: list[str], rows: list[list[str]], text_cols: AbstractSet[int],
                  wrap_cols: AbstractSet[int] = frozenset(), drop_cols: AbstractSet[int] = frozenset()) -> str:
    """A table of pre-escaped cells; text columns align left, wrap columns may break lines, drop columns vanish."""
    def cls(i: int) -> str:
        return " ".join(c for c, on in (("text", i in text_cols), ("wrap", i in wrap_cols)) if on)

    head = "".join(f'<th class="{cls(i)}">{escape(h)}</th>' for i, h in enumerate(header) if i not in drop_cols)
    body = "".join("<tr>" + "".join(f'<td class="{cls(i)}">{c}</td>' for i, c in enumerate(row) if i not in drop_cols)
                   + "</tr>" for row in rows)
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _head(report: Report) -> list[str]:
    """Doctype, title, style, the navigation bar and the state banner."""
    t = report.tables
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{escape(report.title)}</title><style>{CSS}</style></head><body>",
           f"<h1>{escape(report.title)}</h1>", f'<div class="muted">Generated {escape(report.generated_at)}</div>']
    nav = [("stores", "Stores"), ("best", "Which setup"), ("figures", "Figures")]
    nav += [(f"phase-{i}", p.title) for i, p in enumerate(t.phases)]
    nav += [("fits", "Fits")] if report.fits else []
    nav += [("ranking", "Ranking"), ("integrity", "Integrity")] if t.questions else []
    nav += [("predicted", "Predicted"), ("failures", "Failures"), ("memory", "Memory")]
    out.append("<nav>" + "".join(f'<a href="#{a}">{escape(n)}</a>' for a, n in nav) + "</nav>")
    out.append(f'<div class="state {escape(t.summary.state)}" id="state">{escape(t.summary.headline)}</div>')
    return out


def _stores(report: Report) -> list[str]:
    return ['<h2 id="stores">Stores</h2>', _simple_table(
        ["store", "file", "engine", "version", "model", "servers", "cells", "meta"],
        [[escape(s.label), f"<code>{escape(s.path)}</code>", escape(s.engine or "–"), escape(s.engine_version or "–"),
          escape(s.model or "–"), str(s.n_servers), str(s.n_cells),
          escape("; ".join(f"{k}={v}" for k, v in s.meta))] for s in report.stores],
        {0, 1, 2, 3, 4, 7})]


def _section(anchor: str, title: str, body: list[str], empty: str) -> list[str]:
    """An <h2> section: its body, or the `empty` paragraph when there is nothing to show."""
    return [f'<h2 id="{anchor}">{escape(title)}</h2>', *(body or [empty])]


def _store_table(report: Report, header: list[str], rows: list[list[str]], text_cols: AbstractSet[int],
                 wrap_cols: AbstractSet[int] = frozenset()) -> str:
    """A table whose first column is the store: shown only when the report reads several stores."""
    return _simple_table(header, rows, text_cols, wrap_cols=wrap_cols, drop_cols=frozenset() if report.multi else {0})


def _decision_tables(tables: list[DecisionTable]) -> list[str]:
    out = []
    for dt in tables:
        out.append(f"<h3>{escape(dt.title)}</h3>")
        out.append(f'<p class="muted">{escape(dt.note)}</p>')
        out.append(_simple_table(list(dt.header), [[escape(c) for c in r] for r in dt.rows], set(dt.text_cols),
                                 wrap_cols=set(dt.text_cols) - {0}))
    return out


def _best(report: Report) -> list[str]:
    t = report.tables
    out = []
    if t.questions and t.sections:
        out.append(f'<p class="muted">Sections: {escape("; ".join(t.sections))} (one per model and GPU: tables, '
                   'rankings and figures never mix them).</p>')
    out += _decision_tables(answer_tables(t.questions))
    aa = aa_rows(t.questions)
    if aa:
        out += ['<h3 id="aa">A/A check</h3>', f'<p class="muted">{escape(AA_NOTE)}.</p>',
                _simple_table(list(AA_HEADER), [[escape(c) for c in r] for r in aa], {1, 3, 5, 6})]
    return _section("best", "Which setup to run", out, '<p class="muted">No cell finished with measurements.</p>')


def _rankings(report: Report) -> list[str]:
    tables = ranking_tables(report.tables.questions)
    rows = integrity_rows([r for p in report.tables.phases for r in p.rows])
    out = []
    if tables:
        out += ['<h2 id="ranking">Ranking per question</h2>', *_decision_tables(tables)]
    if rows:
        out += ['<h2 id="integrity">Integrity of each measured cell</h2>',
                f'<p class="muted">{escape(INTEGRITY_NOTE)}.</p>',
                _simple_table(list(INTEGRITY_HEADER), [[escape(c) for c in r] for r in rows], {0, 2, 10, 11},
                              wrap_cols={11})]
    return out


def _figures(report: Report, images: Mapping[str, bytes]) -> list[str]:
    out = ['<h2 id="figures">Figures</h2>']
    if not report.plots:
        out.append('<p class="muted">No figures: nothing was measured.</p>')
    for p in report.plots:
        data = images.get(p.name)
        if data is None:
            continue
        uri = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
        out.append(f'<figure id="fig-{escape(p.name.rsplit(".", 1)[0])}">'
                   f'<img alt="{escape(p.title)}" src="{uri}"><figcaption>{escape(p.caption)}</figcaption></figure>')
    return out


def _phases(report: Report) -> list[str]:
    out = []
    for i, table in enumerate(report.tables.phases):
        out.append(f'<h2 id="phase-{i}">{escape(table.title)}</h2>')
        out.append(_cell_table(table.rows))
    if not report.tables.phases:
        out.append('<p class="muted">No cells in the store.</p>')
    from specbench.report.markdown import _categories, _notes

    notes = [x for x in _notes(report) if x]
    out += [f'<p class="muted">{escape(x)}</p>' for x in notes]
    cats = _categories(report)
    if cats:
        rows = [ln for ln in cats if ln.startswith("| ")]
        cells = [[c.strip() for c in ln.strip("|").split(" | ")] for ln in rows]
        out += ['<h2 id="categories">Per category</h2>', f"<p>{escape(cats[2])}</p>",
                _simple_table(cells[0], [[escape(c) for c in r] for r in cells[1:]], {0, 1, 2})]
    return out


def _failures(report: Report) -> list[str]:
    fails = report.tables.failures
    body = [_store_table(
        report, ["store", "what", "id", "config", "TP", "c", "status", "diagnosis", "log"],
        [[escape(f.store), f.kind, f"<code>{escape(f.ident)}</code>", escape(f.series), fmt(f.tp),
          fmt(f.concurrency), _status(f.status), escape(f.diagnosis),
          f'<a href="{escape(f.log_file)}">{escape(f.log_file)}</a>' if f.log_file else "–"] for f in fails],
        {0, 1, 2, 3, 6, 7, 8}, wrap_cols={7})] if fails else []
    return _section("failures", "Failures", body, "<p>None.</p>")


def _memory(report: Report) -> list[str]:
    memory = report.tables.memory
    return _section("memory", "Memory plan per server tuple", _memory_body(report) if memory else [],
                    '<p class="muted">No server in the store has a memory plan.</p>')


def _memory_body(report: Report) -> list[str]:
    memory = report.tables.memory
    scale = max((m.total or sum(v for _, v in m.parts)) for m in memory) or 0.0
    legend = "".join(f'<span style="background:{c}"></span>{escape(n)}' for n, c in MEMORY_COLORS.items())
    return [f'<p class="legend muted">GiB per GPU from the planner (servers.plan_json):{legend}</p>', _store_table(
        report, ["store", "server", "config", "TP", "plan", "weights", "draft", "Mamba", "KV", "headroom",
                 "GPU total", "KV tokens", "max running", "mem frac", "split"],
        [[escape(m.store), f"<code>{escape(m.server_id)}</code>", escape(m.series), fmt(m.tp),
          f'<span class="fails">{escape(m.plan_text)}</span>' if m.plan_status == "fails"
          else escape(m.plan_text), fmt(m.weights, 2), fmt(m.draft, 2), fmt(m.mamba, 2), fmt(m.kv, 2),
          fmt(m.headroom, 2), fmt(m.total, 2), fmt(m.kv_tokens), fmt(m.max_running_requests),
          fmt(m.mem_fraction_static, 2), _bar(m, scale)] for m in memory],
        {0, 1, 2, 4, 14})]


def _warnings(report: Report) -> list[str]:
    if not report.tables.warnings:
        return []
    return ['<h2 id="warnings">Store warnings</h2><ul>' +
            "".join(f"<li>{escape(w)}</li>" for w in report.tables.warnings) + "</ul>"]


def render_html(report: Report, images: Mapping[str, bytes]) -> str:
    """The page, section by section in the order of its navigation bar."""
    out = [*_head(report), *_stores(report), *_best(report), *_figures(report, images), *_phases(report),
           *([fits_html(report.fits)] if report.fits else []), *_rankings(report),
           *predicted_html(report.predicted), *_failures(report), *_memory(report), *_warnings(report),
           "</body></html>"]
    return "\n".join(out) + "\n"
