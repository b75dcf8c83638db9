"""Bounded reading of an engine log: a regular file only, a size cap, a line cap, a head + tail window, and the middle
searched in blocks for the failure, boot and readiness lines (kept after a marker line).

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
  tests/unit/logs/test_doctor_bounded_read.py), not a multiple of the file.
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
    """The lines between head and tail, given block by block (complete lines): counted, and searched for `keep`
    words with `bytes.find` on the lower-cased block (no per-line Python work), the matching lines kept."""

    def __init__(self, keep: Sequence[bytes]) -> None:
        self.keep = tuple(k.lower() for k in keep)
        self.lines = self.bytes = 0
        self.kept: list[bytes] = []
        self.kept_n = 0
        self.dropped = 0

    def add(self, data: bytes) -> None:
        self.lines += data.count(b"\n")
        self.bytes += len(data)
        if not self.keep:
            return
        low = data.lower()
        starts: set[int] = set()
        for word in self.keep:
            at = low.find(word)
            while at != -1:
                starts.add(low.rfind(b"\n", 0, at) + 1)
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


def _cut_long(data: bytes) -> bytes:
    """Lines of complete-line `data` over MAX_LINE_BYTES keep their first MAX_LINE_BYTES and the cut marker (the
    check is one C-level split; a regex over a 1 MiB repeat would be quadratic)."""
    if len(data) <= MAX_LINE_BYTES:
        return data
    parts = data.split(b"\n")
    if max(map(len, parts)) < MAX_LINE_BYTES:
        return data
    cut = LINE_CUT.rstrip(b"\n")
    return b"\n".join(x[:MAX_LINE_BYTES] + cut if len(x) >= MAX_LINE_BYTES else x for x in parts)


class _Tail:
    """The last TAIL_BYTES of complete lines, fed in blocks; what falls out of the window goes to the middle."""

    def __init__(self, middle: _Middle) -> None:
        self.blocks: deque[bytes] = deque()
        self.n = 0
        self.middle = middle

    def add(self, data: bytes) -> None:
        self.blocks.append(data)
        self.n += len(data)
        while len(self.blocks) > 1 and self.n - len(self.blocks[0]) >= TAIL_BYTES:
            old = self.blocks.popleft()
            self.n -= len(old)
            self.middle.add(old)

    def lines(self) -> list[bytes]:
        """The window: the oldest block cut at a line boundary so that at most TAIL_BYTES remain (or one line)."""
        excess = self.n - TAIL_BYTES
        if excess > 0 and self.blocks:
            first = self.blocks[0]
            cut = first.find(b"\n", excess - 1) + 1
            if 0 < cut < len(first):
                self.middle.add(first[:cut])
                self.blocks[0] = first[cut:]
        return list(self.blocks)


def read_log_bounded(path: str | Path, keep: Sequence[bytes] = ()) -> bytes:
    """The head and tail of the log as bytes (the whole log when it is under HEAD_BYTES + TAIL_BYTES), with the
    middle's lines that hold one of the `keep` words after a marker line. The head is read line by line; the rest
    in blocks of SEARCH_BLOCK_BYTES, so a long log costs no Python work per line."""
    p = Path(path)
    check_log_file(p)
    head: list[bytes] = []
    head_n = 0
    middle = _Middle(keep)
    tail = _Tail(middle)
    try:
        with open(p, "rb") as fh:
            for line in _lines(fh):
                head.append(line)
                head_n += len(line)
                if head_n >= HEAD_BYTES:
                    break
            read_n = head_n + _read_rest(fh, tail, head_n)
    except OSError as exc:
        raise UserError(f"cannot read {p}: {exc.strerror or exc}") from None
    if read_n > MAX_LOG_BYTES:  # the file grew while being read
        raise UserError(f"{p}: over the {MAX_LOG_BYTES >> 20} MiB cap of a log")
    rest = tail.lines()
    mid = middle.marker()
    if head and not head[-1].endswith(b"\n") and (mid or rest):
        head[-1] += b"\n"
    return b"".join(head + mid + rest)


def _read_rest(fh: BinaryIO, tail: _Tail, already: int) -> int:
    """Everything after the head, block by block into the tail window (lines over MAX_LINE_BYTES cut); the bytes
    read. Stops past MAX_LOG_BYTES (the caller refuses the file)."""
    pending = b""
    skipping = False  # inside a line already cut at MAX_LINE_BYTES: drop up to its newline
    read_n = 0
    while True:
        data = fh.read(SEARCH_BLOCK_BYTES)
        if not data:
            break
        read_n += len(data)
        if already + read_n > MAX_LOG_BYTES:
            break
        if skipping:
            nl = data.find(b"\n")
            if nl == -1:
                continue
            data, skipping = data[nl + 1:], False
        buf = pending + data
        cut = buf.rfind(b"\n")
        if cut == -1:
            pending = buf
        else:
            tail.add(_cut_long(buf[: cut + 1]))
            pending = buf[cut + 1:]
        if len(pending) > MAX_LINE_BYTES:
            tail.add(pending[:MAX_LINE_BYTES] + LINE_CUT)
            pending, skipping = b"", True
    if pending:
        tail.add(pending)
    return read_n
