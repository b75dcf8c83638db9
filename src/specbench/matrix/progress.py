"""rich progress bars for a matrix run: one bar for the cells, one for the requests of the current cell."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as RichProgress

from specbench.matrix.cellrun import request_count


class Progress:
    """No-op when disabled (tests, --json, not a terminal)."""

    def __init__(self, enabled: bool, console: Console | None = None, total: int = 0):
        self.enabled = enabled
        self.console = console or Console(stderr=True)
        self._p: RichProgress | None = None
        self._cells: Any = None
        self._reqs: Any = None
        self.total = total

    def __enter__(self) -> Progress:
        if self.enabled:
            self._p = RichProgress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                console=self.console, transient=False,
            )
            self._p.__enter__()
            self._cells = self._p.add_task("cells", total=self.total)
            self._reqs = self._p.add_task("requests", total=1, visible=False)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._p is not None:
            self._p.__exit__(None, None, None)
            self._p = None

    def phase(self, phase: int, tp: int, label: str, verdict: str) -> None:
        if self._p is not None:
            self._p.console.log(f"phase {phase} · tp={tp} · {label} · {verdict}")

    def cell_started(self, cell: Any) -> None:
        if self._p is not None:
            c = cell.client
            self._p.update(self._reqs, total=request_count(c), completed=0, visible=True,
                           description=f"{cell.label} tp={cell.tp} c={c['concurrency']} "
                                       f"{c['prompt_tokens']}+{c['output_tokens']}")

    def request_done(self, result: Any) -> None:
        if self._p is not None:
            self._p.advance(self._reqs)

    def cell_finished(self, status: str) -> None:
        if self._p is not None:
            self._p.advance(self._cells)
            if status != "done":
                self._p.console.log(f"cell {status}")
