"""`specbench report` / `specbench export`: results store(s) -> tables, PNG plots, Markdown, HTML, CSV/JSON.

Flow (I/O only in load.py, build.py and the figures' save in plot_base.py):
    load.py      store (SQLite, read-only, tolerant) -> frozen LoadedStore / CellRecord / ServerRecord (records.py)
    compare.py   several stores -> series names ("<store>: <label> [varying settings]")
    tables.py    rows per phase/TP, fastest per point, failures + logs, memory plan rows, summary
                 (row types in rows.py, display strings in formatting.py, decision_tables.py and
                 integrity_tables.py)
    plots.py     matplotlib (Agg) PNGs with the pixel box of every panel
    model.py     the whole report as one frozen value
    markdown.py  report.md          html.py  report.html (self-contained: inline CSS, base64 PNGs)
    export.py    cells as flat CSV / JSON
    build.py     writes the report folder (report.md, report.html, *.png, logs/)
Synthetic stores with the exact schema, for tests and trying the report without a GPU: testing/synthetic.py.
"""
