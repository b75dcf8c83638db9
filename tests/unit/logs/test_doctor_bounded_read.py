"""Bounded log reading (logs/reader.py): non-regular files refused before reading, a size cap, cut long lines, and
peak memory for a 50 MB log bounded by a small multiple of the kept window + the largest line, not the file."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

import pytest

from paths import DATA
from specbench.doctor.doctor import diagnose_file
from specbench.doctor.lastboot import read_log
from specbench.errors import UserError
from specbench.logs import reader

# slow: a whole `specbench run` or a process fault per test, seconds each: `make test-fast` leaves it out
pytestmark = pytest.mark.slow

REAL = DATA / "logs"


def _big_log(path: Path, total: int, long_line: int) -> None:
    """A real SGLang boot log's head, then decode-batch records up to `total` bytes, one `long_line`-byte line."""
    heads = sorted(REAL.glob("*sglang*.log")) or sorted(REAL.glob("*.log"))
    head = heads[0].read_bytes() if heads else b""
    rec = b"[2026-02-01 00:05:02 TP0] Decode batch. #running-req: 8, #token: 4096, token usage: 0.01, gen throughput (token/s): 900.00, #queue-req: 0\n"
    with open(path, "wb") as fh:
        fh.write(head)
        fh.write(b"x" * long_line + b"\n")
        n = (total - len(head)) // len(rec)
        for _ in range(n // 1000):
            fh.write(rec * 1000)


def test_peak_memory_is_bounded_by_the_window_not_the_file(tmp_path: Path) -> None:
    log = tmp_path / "big.log"
    largest = 4 << 20  # over the 1 MiB line cap: kept as 1 MiB + a marker
    _big_log(log, 50 << 20, largest)
    assert os.path.getsize(log) > 50 << 20
    tracemalloc.start()
    try:
        d = diagnose_file(log, with_fixes=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    window = reader.HEAD_BYTES + reader.TAIL_BYTES + reader.MAX_LINE_BYTES
    assert peak < 16 * window, (peak, window)
    assert peak < os.path.getsize(log), peak  # the old reader peaked at 6-11x the file
    assert d.facts.lines > 0


def test_long_line_is_cut_with_a_marker(tmp_path: Path) -> None:
    log = tmp_path / "long.log"
    log.write_bytes(b"start\n" + b"y" * (3 * reader.MAX_LINE_BYTES) + b"\nend\n")
    raw = read_log(log)
    assert reader.LINE_CUT in raw and raw.endswith(b"end\n")
    assert len(raw) < 2 * reader.MAX_LINE_BYTES


def test_middle_of_a_long_log_is_marked_not_read(tmp_path: Path) -> None:
    """The middle is marked; since issue 23 it is searched for failure lines (none here), not skipped unread."""
    log = tmp_path / "mid.log"
    line = b"z" * 99 + b"\n"
    log.write_bytes(b"FIRST\n" + line * ((reader.HEAD_BYTES + 2 * reader.TAIL_BYTES) // 100) + b"LAST\n")
    raw = read_log(log)
    assert raw.startswith(b"FIRST\n") and raw.endswith(b"LAST\n")
    assert b"in the middle of the log searched for failure, boot and readiness lines; 0 kept below" in raw
    assert len(raw) <= reader.HEAD_BYTES + reader.TAIL_BYTES + 200


def test_fifo_device_and_folder_are_refused_before_reading(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # opening it for reading would block forever
    for p, what in ((fifo, "not a regular file"), (Path("/dev/zero"), "not a regular file"), (tmp_path, "folder")):
        with pytest.raises(UserError, match=what):
            read_log(p)


def test_over_the_size_cap_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "huge.log"
    with open(log, "wb") as fh:  # sparse: no disk used
        fh.truncate(reader.MAX_LOG_BYTES + 1)
    with pytest.raises(UserError, match="MiB cap") as exc:
        read_log(log)
    assert "\n" not in str(exc.value)
