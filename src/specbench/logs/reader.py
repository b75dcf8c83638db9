"""Bounded reading of an engine log: a regular file only, a size cap, a line cap, and a head + tail window.

- Not a regular file (a FIFO that would block forever, /dev/zero that never ends, a socket, a folder): refused
  before anything is read (`os.stat` + `stat.S_ISREG`), one line.
- Larger than MAX_LOG_BYTES (256 MiB): refused, one line.
- Read line by line with `readline(MAX_LINE_BYTES)`: a line longer than 1 MiB keeps its first 1 MiB and a marker;
  the rest of it is skipped in bounded chunks, never held.
- Kept: the first HEAD_BYTES (the launch's argument dump and start-up) and the last TAIL_BYTES (the end of the last
  boot, where a failure or the ready line is), with one marker line for what lies between. The middle is not
  skipped unread: given `keep` (lower-case words every failure, boot and readiness line contains, from the doctor),
  it is searched in blocks of SEARCH_BLOCK_BYTES (`bytes.find` on the lower-cased block, no per-line Python work)
  and the lines holding one of the words are kept after the marker, up to MAX_KEPT_BYTES; the marker says how much
  was searched and kept. What the doctor and the planner read is bounded by HEAD_BYTES + TAIL_BYTES +
  MAX_KEPT_BYTES + 2 lines whatever the file's size, so peak memory is a small constant times that (measured in
  tests/test_logs_bounded.py), not a multiple of the file.
"""

from __future__ import annotations

import os
import stat
from collections import deque
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

from specbench.errors import UserError

MAX_LOG_BYTES = 256 << 20
MAX_LINE_BYTES = 1 << 20
HEAD_BYTES = 2 << 20
TAIL_BYTES = 4 << 20
MAX_KEPT_BYTES = 2 << 20
SEARCH_BLOCK_BYTES = 8 << 20
LINE_CUT = b" [specbench: line cut at 1 MiB]\n"
MARKER_PREFIX = "[specbench: "


def elided_marker(n_lines: int, n_bytes: int, kept: int | None = None, kept_dropped: int = 0) -> bytes:
    """The line that stands for the middle of the log: how much was there and, when it was searched, how many of its
    lines were kept (the lines after the marker, up to the tail)."""
    if kept is None:
        return f"{MARKER_PREFIX}{n_lines:,} lines ({n_bytes:,} bytes) in the middle of the log not read]\n".encode()
    more = f", {kept_dropped:,} more matching lines dropped over the {MAX_KEPT_BYTES >> 20} MiB cap" \
        if kept_dropped else ""
    return (f"{MARKER_PREFIX}{n_lines:,} lines ({n_bytes:,} bytes) in the middle of the log searched for failure, "
            f"boot and readiness lines; {kept:,} kept below{more}]\n").encode()


class _Middle:
    """The lines between head and tail: searched block by block for `keep` words, the matching lines kept."""

    def __init__(self, keep: Sequence[bytes]) -> None:
        self.keep = tuple(k.lower() for k in keep)
        self.block: list[bytes] = []
        self.block_n = 0
        self.lines = self.bytes = 0
        self.kept: list[bytes] = []
        self.kept_n = 0
        self.dropped = 0

    def add(self, line: bytes) -> None:
        self.lines += 1
        self.bytes += len(line)
        if not self.keep:
            return
        self.block.append(line)
        self.block_n += len(line)
        if self.block_n >= SEARCH_BLOCK_BYTES:
            self.flush()

    def flush(self) -> None:
        if not self.block:
            return
        data = b"".join(self.block)
        self.block, self.block_n = [], 0
        low = data.lower()
        starts: set[int] = set()
        for word in self.keep:
            at = low.find(word)
            while at != -1:
                start = low.rfind(b"\n", 0, at) + 1
                starts.add(start)
                end = low.find(b"\n", at)
                at = low.find(word, end) if end != -1 else -1
        for start in sorted(starts):
            end = data.find(b"\n", start)
            line = data[start: end + 1 if end != -1 else len(data)]
            if self.kept_n + len(line) > MAX_KEPT_BYTES:
                self.dropped += 1
                continue
            self.kept.append(line if line.endswith(b"\n") else line + b"\n")
            self.kept_n += len(line)

    def marker(self) -> list[bytes]:
        self.flush()
        if not self.lines:
            return []
        if not self.keep:
            return [elided_marker(self.lines, self.bytes)]
        return [elided_marker(self.lines, self.bytes, len(self.kept), self.dropped), *self.kept]


def check_log_file(path: str | Path) -> os.stat_result:
    """The file's stat; UserError (one line) for a missing file, a folder, anything not a regular file, too large."""
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise UserError(f"log file not found: {p}") from None
    except OSError as exc:
        raise UserError(f"cannot read {p}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise UserError(f"{p} is a folder, not a log file")
    if not stat.S_ISREG(st.st_mode):
        raise UserError(f"{p} is not a regular file (a FIFO, socket or device is not read)")
    if st.st_size > MAX_LOG_BYTES:
        raise UserError(f"{p} is {st.st_size / 2**20:,.0f} MiB, over the {MAX_LOG_BYTES >> 20} MiB cap of a log "
                        "(pass its tail: tail -c 64M FILE > tail.log)")
    return st


def _lines(fh: BinaryIO) -> Iterator[bytes]:
    """Physical lines, each at most MAX_LINE_BYTES (+ the cut marker)."""
    read = fh.readline
    while True:
        line = read(MAX_LINE_BYTES)
        if not line:
            return
        if len(line) >= MAX_LINE_BYTES and not line.endswith(b"\n"):
            rest = read(MAX_LINE_BYTES)
            while rest and not rest.endswith(b"\n"):
                rest = read(MAX_LINE_BYTES)
            line = line + LINE_CUT
        yield line


def read_log_bounded(path: str | Path, keep: Sequence[bytes] = ()) -> bytes:
    """The head and tail of the log as bytes (the whole log when it is under HEAD_BYTES + TAIL_BYTES), with the
    middle's lines that hold one of the `keep` words after a marker line."""
    p = Path(path)
    check_log_file(p)
    head: list[bytes] = []
    head_n = 0
    tail: deque[bytes] = deque()
    tail_n = 0
    middle = _Middle(keep)
    read_n = 0
    try:
        with open(p, "rb") as fh:
            for line in _lines(fh):
                read_n += len(line)
                if read_n > MAX_LOG_BYTES:  # the file grew while being read
                    raise UserError(f"{p}: over the {MAX_LOG_BYTES >> 20} MiB cap of a log")
                if head_n < HEAD_BYTES and not tail:
                    head.append(line)
                    head_n += len(line)
                    continue
                tail.append(line)
                tail_n += len(line)
                while tail_n > TAIL_BYTES and len(tail) > 1:
                    old = tail.popleft()
                    tail_n -= len(old)
                    middle.add(old)
    except OSError as exc:
        raise UserError(f"cannot read {p}: {exc.strerror or exc}") from None
    mid = middle.marker()
    if head and not head[-1].endswith(b"\n") and (mid or tail):
        head[-1] += b"\n"
    return b"".join(head + mid + list(tail))
