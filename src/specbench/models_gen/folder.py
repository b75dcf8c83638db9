"""Write one model folder atomically (the tiny models' and smollm2's): a temporary folder renamed into place.

A half-written model never looks complete: the files go into a temporary folder next to the target, renamed into
place only once all are written."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def staged_folder(target: Path) -> Iterator[Path]:
    """A new temporary folder in `target.parent` for the caller to write into; on leaving the block it is made
    readable (mkdtemp makes 0700 folders and safetensors 0600 files: 0755 / 0644 here) and renamed to `target`,
    replacing an existing one. On any error (KeyboardInterrupt included) it is removed and `target` left as it was."""
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        yield tmp
        tmp.chmod(0o755)
        for f in tmp.iterdir():
            f.chmod(0o644)
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
