"""The "fastest setup that fits" table as markdown, HTML and rich (decide/fits.py builds the rows; report/fits.py
from stores, commands/predict.py from a matrix). One table per workload, the same columns and words in all three:

TP | config | engine cap | Mamba | KV | matrix c | runs | binds | tok/s | per GPU | per request | from

`Mamba` and `KV` are requests (slots / slots per request; KV tokens / tokens per request); `runs` is the reachable
concurrency, the least of the four limits before it; `tok/s` is measured, or "(at N)" measured at a lower concurrency
(a lower bound), or predicted ("pred."; an uncalibrated prediction is the bare roofline, a ceiling: "<= N"). Under each
table, the fastest per GPU that fits, and the rows within the tie margin of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from specbench.decide.fits import FitRow, Workload, binds_text
from specbench.decide.verdict import TIE_MARGIN

HEADER = ["TP", "config", "engine cap", "Mamba", "KV", "matrix c", "runs", "binds", "tok/s", "per GPU",
          "per request", "from"]
TITLE = "Fastest setup that fits"
INTRO = ("Per workload, each launch at the concurrency it can run: the least of the engine's cap, the Mamba slots "
         "(slots / slots per request) and the KV tokens (/ prompt + output tokens per request) the planner gives "
         "the launch, and the matrix's largest concurrency; `binds` names the one that sets it. Throughput there: "
         "measured; or measured at a lower concurrency, \"(at N)\", a lower bound; or predicted by the step-cost "
         "model (`specbench predict`), \"pred.\", where an uncalibrated prediction is the bare roofline, a ceiling "
         "(\"<=\"). Per GPU: / TP. Per request: / the requests running.")
EMPTY = "No closed-loop workload to rank (rate cells have no reachable concurrency)."


def _n(v: int | None) -> str:
    return "–" if v is None else f"{v:,}"


def _f(v: float | None, digits: int = 1) -> str:
    return "–" if v is None else f"{v:,.{digits}f}"


def _tok(row: FitRow, scale: float = 1.0) -> str:
    t = row.throughput
    if t.tok_s is None:
        return "–"
    v = _f(t.tok_s / scale)
    if t.ceiling:
        return f"<= {v}"
    iv = f" [{_f(t.interval[0] / scale)}, {_f(t.interval[1] / scale)}]" if t.interval else ""
    if t.basis == "measured_below":
        return f"{v}{iv} (at {t.at})"
    if t.basis == "predicted":
        return f"{v}{iv} pred."
    return f"{v}{iv}"


def _from(row: FitRow) -> str:
    t = row.throughput
    warn = "".join(f"; warning: {w}" for w in t.warnings)
    if t.basis == "measured":
        return f"measured {t.source}" + (f" ({t.note})" if t.note else "") + warn
    if t.basis == "measured_below":
        return t.note + warn
    if t.basis == "predicted":
        return f"predicted at {t.at}, {t.calibration}"
    return f"none: {t.note}" if t.note else "none"


def _config(row: FitRow, stores: int) -> str:
    s = row.setup
    name = s.label + (f" ({s.store})" if stores > 1 and s.store else "")
    return name + (" ★" if row.best else "")


def _binds(row: FitRow) -> str:
    return binds_text(row.setup.reach)


def values(row: FitRow, stores: int = 1) -> list[str]:
    """The row's cells, in HEADER's order."""
    r = row.setup.reach
    tp = max(1, row.setup.tp)
    per_req = row.per_request
    return [str(row.setup.tp), _config(row, stores), _n(r.engine_cap), _n(r.mamba), _n(r.kv), _n(r.asked),
            _n(r.reachable), _binds(row), _tok(row), _tok(row, tp), _f(per_req, 2), _from(row)]


def _groups(rows: Sequence[FitRow]) -> list[tuple[Workload, list[FitRow]]]:
    out: dict[Workload, list[FitRow]] = {}
    for r in rows:
        out.setdefault(r.workload, []).append(r)
    return list(out.items())


def verdict_text(rows: Sequence[FitRow]) -> str:
    """'Fastest per GPU that fits: TP 4 · dflash, 512.3 tok/s per GPU at 8 running (measured); within 3 %: TP 8 ·
    ar' for one workload's rows."""
    best = next((r for r in rows if r.best), None)
    if best is None:
        return "Fastest per GPU that fits: none (no launch that fits has a throughput to rank)."
    t = best.throughput
    how = {"measured": "measured", "measured_below": f"measured at {t.at}, below the {best.setup.reach.reachable} "
           "it reaches", "predicted": f"predicted, {t.calibration}"}.get(t.basis, t.basis)
    per = best.per_gpu or 0.0
    text = (f"Fastest per GPU that fits: TP {best.setup.tp} · {best.setup.label}, "
            f"{'<= ' if t.ceiling else ''}{per:,.1f} tok/s per GPU at {best.setup.reach.reachable} running ({how})")
    if t.warnings:
        text += "; warning: " + "; ".join(t.warnings)
    near = [f"TP {r.setup.tp} · {r.setup.label}" for r in rows if r.near_best]
    if near:
        text += f"; within {TIE_MARGIN:.0%} of it (a tie on this number): " + ", ".join(near)
    for r in rows:
        if r.open:
            text += "; open: " + _open_text(r)
    return text + "."


def _open_text(r: FitRow) -> str:
    """Why an open row is not ruled out: measured only below its reach, or predicted with an interval (or a ceiling)
    that reaches the best."""
    tp = max(1, r.setup.tp)
    t = r.throughput
    p = t.predicted_at_reach if t.basis == "measured_below" else None
    name = f"TP {r.setup.tp} · {r.setup.label}"
    if p is not None and p.tok_s is not None:
        iv = (f" [{p.tok_s_lo / tp:,.1f}, {p.tok_s_hi / tp:,.1f}]"
              if p.tok_s_lo is not None and p.tok_s_hi is not None else "")
        return (f"{name} was measured at {t.at} running only; predicted at the {r.setup.reach.reachable} it "
                f"reaches: {p.tok_s / tp:,.1f}{iv} tok/s per GPU ({p.calibration_state}): measure it there to decide")
    value = t.tok_s or 0.0
    if t.ceiling:
        return f"{name}, a ceiling of {value / tp:,.1f} tok/s per GPU, is not ruled out either"
    iv = f" [{t.interval[0] / tp:,.1f}, {t.interval[1] / tp:,.1f}]" if t.interval else ""
    return (f"{name}, predicted {value / tp:,.1f}{iv} tok/s per GPU ({t.calibration}), is within the model's "
            "interval of it: measure both to decide")


def fix_lines(rows: Sequence[FitRow]) -> list[str]:
    """One line per launch the planner's nearest fix replaced (auto_fix): what it changed and why the asked one
    fails."""
    return [f"TP {r.setup.tp} · {r.setup.label}: {r.setup.reach.fix}" for r in rows if r.setup.reach.fix]


def _stores(rows: Sequence[FitRow]) -> int:
    return len({r.setup.store for r in rows})


def _md(text: str) -> str:
    """Markdown text with HTML escaped (GitHub renders raw HTML: a `<script>` label stays text)."""
    return escape(text, quote=False)


def fits_markdown(rows: Sequence[FitRow]) -> list[str]:
    """The section as markdown lines: the heading, what the columns mean, one table per workload and its verdict."""
    lines = [f"## {TITLE}", ""]
    if not rows:
        return lines + [EMPTY, ""]
    lines += [INTRO, ""]
    for w, group in _groups(rows):
        n = _stores(group)
        lines += [f"### {w.text()}", "", "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
        for r in group:
            cells = [_md(c).replace("|", "\\|") for c in values(r, n)]
            if r.best:
                cells[1] = f"**{cells[1]}**"
            lines.append("| " + " | ".join(cells) + " |")
        lines += ["", _md(verdict_text(group)), ""]
        fixes = fix_lines(group)
        lines += [f"- {_md(f)}" for f in fixes] + ([""] if fixes else [])
    return lines


def fits_html(rows: Sequence[FitRow]) -> str:
    """The section as one HTML fragment (the report's table markup: `div.scroll > table`, text columns `.text`)."""
    out = [f'<h2 id="fits">{escape(TITLE)}</h2>']
    if not rows:
        return "".join(out + [f"<p>{escape(EMPTY)}</p>"])
    out.append(f"<p>{escape(INTRO)}</p>")
    text_cols = {1, 7, 11}
    head = "".join(f'<th class="{"text" if i in text_cols else ""}">{escape(h)}</th>' for i, h in enumerate(HEADER))
    for w, group in _groups(rows):
        n = _stores(group)
        body = []
        for r in group:
            tds = "".join(f'<td class="{"text" if i in text_cols else ""}">{escape(c)}</td>'
                          for i, c in enumerate(values(r, n)))
            cls = ' class="best"' if r.best else ""
            body.append(f"<tr{cls}>{tds}</tr>")
        out.append(f"<h3>{escape(w.text())}</h3>")
        out.append(f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody>'
                   "</table></div>")
        out.append(f"<p>{escape(verdict_text(group))}</p>")
        fixes = fix_lines(group)
        if fixes:
            out.append("<ul>" + "".join(f"<li>{escape(f)}</li>" for f in fixes) + "</ul>")
    return "".join(out)


def fits_rich(rows: Sequence[FitRow]) -> list[Any]:
    """One rich Table per workload, then its verdict line (a rich Text): print each with a Console."""
    from rich import box
    from rich.markup import escape as escape_markup
    from rich.table import Table
    from rich.text import Text

    out: list[Any] = []
    for w, group in _groups(rows):
        n = _stores(group)
        t = Table(title=escape_markup(f"{TITLE}: {w.text()}"), box=box.SIMPLE_HEAD, pad_edge=False)
        for i, h in enumerate(HEADER):
            t.add_column(h, justify="left" if i in (1, 7, 11) else "right", no_wrap=i != 11)
        for r in group:  # plain text, never rich markup: a "[plan]" in a reason is the user's words
            t.add_row(*(Text(v) for v in values(r, n)), style="bold" if r.best else None)
        out += [t, Text("  " + verdict_text(group)), *(Text("  " + f) for f in fix_lines(group))]
    return out
