"""rich progress bars for a matrix run: one bar for the cells, one per slot (GPU group) for the requests of the
cell running there, named by its GPUs in a packed run (`gpu 0,1: ddtree-b8 tp=2 c=4 256+64 cat=code temp=0.7`: the workload axes of
load/axes.py the cell sets). A cell whose concurrency is above the server's running cap (read once the server is up,
tuple_run.py) says what really runs: `c=64 (runs 47: cap)`; each finished cell logs one line with that label."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as RichProgress

from specbench.matrix.repeat_metrics import request_count


class Progress:
    """No-op when disabled (tests, --json, not a terminal). `slot` names where a call comes from (None: the
    only one of a serial run)."""

    def __init__(self, enabled: bool, console: Console | None = None, total: int = 0):
        self.enabled = enabled
        self.console = console or Console(stderr=True)
        self._p: RichProgress | None = None
        self._cells: Any = None
        self._reqs: dict[str | None, Any] = {}
        self._labels: dict[str | None, str] = {}  # slot -> the label of the cell running there
        self.total = total

    def __enter__(self) -> Progress:
        if self.enabled:
            self._p = RichProgress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                console=self.console, transient=False,
            )
            self._p.__enter__()
            self._cells = self._p.add_task("cells", total=self.total)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._p is not None:
            self._p.__exit__(None, None, None)
            self._p = None

    def _req_task(self, slot: str | None) -> Any:
        assert self._p is not None
        if slot not in self._reqs:
            self._reqs[slot] = self._p.add_task("requests", total=1, visible=False)
        return self._reqs[slot]

    def phase(self, phase: int, tp: int, label: str, verdict: str, slot: str | None = None) -> None:
        if self._p is not None:
            where = f" · {slot}" if slot else ""
            self._p.console.log(f"phase {phase} · tp={tp} · {label} · {verdict}{where}")

    def cell_started(self, cell: Any, slot: str | None = None, cap: int | None = None,
                     cap_source: str | None = None) -> None:
        """`cap`: the server's running cap (None: unknown), its source (`planner...`: predicted)."""
        if self._p is not None:
            label = f"{slot}: " if slot else ""
            self._labels[slot] = label + cell_label(cell, cap, cap_source)
            self._p.update(self._req_task(slot), total=request_count(cell.client), completed=0, visible=True,
                           description=self._labels[slot])

    def note(self, text: str) -> None:
        """One line of the run's own (a wave or a round of repeats and why)."""
        if self._p is not None:
            self._p.console.log(text)

    def more(self, n: int) -> None:
        """n more cell visits to come (a wave or a round of repeats)."""
        if self._p is not None:
            self.total += n
            self._p.update(self._cells, total=self.total)

    def request_done(self, result: Any, slot: str | None = None) -> None:
        if self._p is not None:
            self._p.advance(self._req_task(slot))

    def cell_finished(self, status: str, slot: str | None = None, note: str | None = None) -> None:
        """One line per finished cell: its status, its label (the concurrency that ran) and `note` (its throughput)."""
        if self._p is not None:
            self._p.advance(self._cells)
            label = self._labels.pop(slot, None)
            what = label if label is not None else (f"on {slot}" if slot else "")
            self._p.console.log(f"cell {status}" + (f": {what}" if what else "") + (f" · {note}" if note else ""))


def cell_label(cell: Any, cap: int | None = None, cap_source: str | None = None) -> str:
    """'ddtree-b8 tp=2 c=64 (runs 47: cap) 256+64 cat=code temp=0.7': the cell, the concurrency that really runs
    when the cap is below the one asked (load/integrity.py::concurrency_text), its workload axes (load/axes.py)."""
    from specbench.load.axes import extras_text
    from specbench.load.integrity import concurrency_text

    c = cell.client
    extra = extras_text(c)
    return (f"{cell.label} tp={cell.tp} c={concurrency_text(c['concurrency'], cap, cap_source)} "
            f"{c['prompt_tokens']}+{c['output_tokens']}" + (f" {extra}" if extra else ""))
