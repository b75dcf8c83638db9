"""Issue 23 / 27: the doctor reads the whole of a long log for failure lines and says what it read, and a log that
logrotate left with a NUL prefix is a text log.

The long log is made of real lines: the incident's working boot (tests/data/incident/working.log), its own decode
statistics repeated far past the reader's head and tail windows, and in the middle the public ping-pong crash of
tests/data/doctor_corpus/002 (a run-time scheduler failure)."""

from __future__ import annotations

from pathlib import Path

from paths import DATA
from specbench.doctor.doctor import diagnose_file
from specbench.doctor.lastboot import read_log
from specbench.logs import reader

WORKING = (DATA / "incident" / "working.log").read_bytes()
FAILING = (DATA / "incident" / "failing.log").read_bytes()
CRASH = (DATA / "doctor_corpus" / "002-sglang-mamba-ping-pong-assert.log").read_bytes()


def _decode_lines() -> bytes:
    lines = [ln for ln in WORKING.splitlines(keepends=True) if b"Decode batch" in ln]
    assert lines
    return b"".join(lines)


def test_a_failure_in_the_middle_of_a_long_log_is_found_and_the_reading_is_said(tmp_path: Path):
    chunk = _decode_lines()
    filler = chunk * ((reader.HEAD_BYTES + reader.TAIL_BYTES) // len(chunk) + 1)
    log = tmp_path / "long.log"
    log.write_bytes(WORKING + filler + CRASH + filler + filler)
    assert log.stat().st_size > 2 * (reader.HEAD_BYTES + reader.TAIL_BYTES)
    d = diagnose_file(log, with_fixes=False)
    assert d.failure is not None and d.failure.kind == "mamba_ping_pong", d.explanation
    assert not d.failure.boot_failure and "The engine was running but" in d.explanation  # after the ready line
    note = next(n for n in d.notes if n.startswith("Read the first and the last MiB"))
    assert "searched for failure, boot and readiness lines" in note and "kept" in note
    raw = read_log(log)
    assert len(raw) < reader.HEAD_BYTES + reader.TAIL_BYTES + reader.MAX_KEPT_BYTES + 4096


def test_a_log_with_a_logrotate_nul_prefix_is_text(tmp_path: Path):
    """`logrotate copytruncate` truncates a file the engine still writes: the next write lands at the old offset and
    the hole before it reads as NULs."""
    log = tmp_path / "rotated.log"
    log.write_bytes(b"\x00" * 200_000 + FAILING)
    d = diagnose_file(log, with_fixes=False)
    assert d.status == "failed" and d.failure is not None and d.failure.kind == "max_running_requests_zero"
    only_nuls = tmp_path / "nuls.log"
    only_nuls.write_bytes(b"\x00" * 10_000)
    assert "not a text log" in diagnose_file(only_nuls, with_fixes=False).explanation
