"""Which matrix a results store belongs to, and the folder its servers' logs go to (`run` checks both before
anything boots: matrix/runner.py).

A store holds one matrix's results: `meta.name`, `meta.engine` and `meta.matrix_text`, whose [plan] table `predict`
and `calibrate` read to place the stored cells (GPU, engine release, model). `run` of another matrix into it is
refused unless asked (`--new-matrix`); the same matrix again, or edited in its axes, resumes.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from specbench.errors import UserError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def other_matrix(meta: dict[str, str], name: str, text: str, engine: str) -> str | None:
    """What makes a matrix another one than the store's (None when it is the same one, or the store holds none
    yet): another `name`, engine or [plan] table. Those are what the store's results are read by (`predict` and
    `calibrate` read the [plan] table of meta.matrix_text), so a run of another matrix must not replace them
    silently. The same matrix edited otherwise (one concurrency more) is the same one: `run` resumes it."""
    stored = meta.get("matrix_text")
    if not stored:
        return None
    if meta.get("name", name) != name:
        return f"matrix {meta.get('name')!r}, not {name!r}"
    if meta.get("engine", engine) != engine:
        return f"engine {meta.get('engine')!r}, not {engine!r}"
    if _plan_table(stored) != _plan_table(text):
        return "another [plan] table (GPU, engine release or model)"
    return None


def _plan_table(text: str) -> Any:
    try:
        return tomllib.loads(text).get("plan")
    except (tomllib.TOMLDecodeError, ValueError, RecursionError):
        return text  # a stored text that no longer reads: only the same text is the same matrix


def check_log_folder(log_dir: Path) -> None:
    """The folder the servers' logs go to (<store>-logs): a file or a link to nothing there is one line before
    anything boots, not a traceback after the first server started."""
    if log_dir.exists() and not log_dir.is_dir():
        raise UserError(f"{log_dir}: exists and is not a folder; the servers' logs of this store go there: move it "
                        "aside or give --store another name")
    if not log_dir.exists() and log_dir.is_symlink():
        raise UserError(f"{log_dir}: a link to nothing; the servers' logs of this store go there: remove it")
