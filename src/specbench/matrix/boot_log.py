"""A server's boot log on disk: the engine's output (stdout and stderr, one pipe) copied into its log file one line at a
time through the redaction rules (redact.py), so the log never holds a secret; a line without an end (a progress bar
redrawn with CR) is cut where no token or `--api-key VALUE` is split. Run on a thread of its ServerProcess
(lifecycle.py)."""

from __future__ import annotations

import os
from pathlib import Path

from specbench import redact

_LINE_CAP = 1 << 16  # a "line" without an end (a progress bar redrawn with CR) is written out at this size


def _safe_cut(buf: bytes) -> int:
    """Where to cut a line that has no end yet (`buf` holds at least `_LINE_CAP` bytes): before a space whose next
    word is no flag's value, so neither a token nor `--api-key VALUE` is split between two pieces redacted apart;
    the last `_LINE_CAP // 4` bytes always wait for the next read. A buffer twice the cap without such a space is
    cut as it is (no secret is that long)."""
    limit = len(buf) - _LINE_CAP // 4
    pos = buf.rfind(b" ", 0, limit)
    while pos > 0:
        word = buf[buf.rfind(b" ", 0, pos) + 1:pos]
        if not word.startswith(b"-") and not word.endswith(b"="):
            return pos + 1
        pos = buf.rfind(b" ", 0, pos)
    return len(buf) if len(buf) >= 2 * _LINE_CAP else 0


def _pump_redacted(pipe: object, log_path: Path) -> None:
    """Copy the engine's output into its log, one line at a time through the redaction rules (redact.py)."""
    import re

    ends = re.compile(rb"[\r\n]")
    buf = b""
    fd = pipe.fileno()  # type: ignore[attr-defined]
    with open(log_path, "ab", buffering=0) as log:
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                break
            buf += chunk
            cut = max((m.end() for m in ends.finditer(buf)), default=0)
            if cut == 0 and len(buf) >= _LINE_CAP:
                cut = _safe_cut(buf)
            if cut:
                log.write(_redact_bytes(buf[:cut]))
                buf = buf[cut:]
        if buf:
            log.write(_redact_bytes(buf))
    try:
        pipe.close()  # type: ignore[attr-defined]
    except OSError:
        pass


def _redact_bytes(data: bytes) -> bytes:
    return redact.redact_text(data.decode("utf-8", errors="surrogateescape")).encode("utf-8", errors="surrogateescape")
