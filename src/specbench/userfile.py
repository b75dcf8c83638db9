"""Reading a file the user named (a matrix, a calibration, a model's config.json): the one owner of the checks every
such read needs, so that each reader ends a bad file in one line instead of a traceback or a hang.

- Only a regular file is read. A FIFO waits for a writer forever, /dev/zero never ends, a socket or a folder holds no
  text: each is refused at once, by what it is. The open itself cannot wait (O_NONBLOCK: opening a FIFO for reading
  with no writer returns at once) and the kind is read from the open descriptor (no race with a rename).
- At most `max_bytes` are read; a longer file is refused, never read whole.
- Text is UTF-8 (TOML and JSON both say so; a leading byte-order mark is allowed). Another encoding is named where it
  can be told: UTF-16 / UTF-32 by their byte-order mark or NUL bytes, a SQLite database or a gzip file by their
  magic, else the first byte that is no UTF-8 (Latin-1 and the like).
- JSON: an integer of more digits than Python converts (4,300) and nesting deeper than its stack are one line too.

Missing files and permissions are the caller's to word (`OSError` passes through; a folder as `IsADirectoryError`).
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import Any

from specbench.errors import UserError

__all__ = ["parse_json", "read_bytes", "read_json", "read_text"]

_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
_BOMS = ((b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe\x00\x00", "UTF-32"), (b"\xfe\xff", "UTF-16"),
         (b"\xff\xfe", "UTF-16"))
_MAGICS = ((b"SQLite format 3\x00", "a SQLite database (a results store?)"), (b"\x1f\x8b", "a gzip-compressed file"),
           (b"PK\x03\x04", "a zip archive"))


def read_bytes(path: str | Path, what: str, max_bytes: int) -> bytes:
    """The bytes of a regular file of at most `max_bytes`; a FIFO, a device, a socket is a UserError at once."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a socket file (or a device with no driver): opened by no one
            _refuse_kind(path, what, os.stat(path).st_mode)
        raise
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        _refuse_kind(path, what, mode)
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(max_bytes + 1)
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise UserError(f"{path}: the {what} is more than {max_bytes} bytes; a {what} is at most {max_bytes} bytes")
    return data


def _refuse_kind(path: str | Path, what: str, mode: int) -> None:
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "no regular file")
        raise UserError(f"{path}: is {kind}, not a regular file: give the {what} itself")


def decode(data: bytes, where: str, what: str) -> str:
    """UTF-8 text (a leading byte-order mark dropped), else a UserError that names what the bytes are."""
    for magic, name in _MAGICS:
        if data.startswith(magic):
            raise UserError(f"{where}: is {name}, not a {what}")
    for bom, name in _BOMS:
        if data.startswith(bom):
            raise UserError(f"{where}: the {what} is {name} text; save it as UTF-8")
    if b"\x00" in data:
        raise UserError(f"{where}: the {what} holds NUL bytes (UTF-16 text without a byte-order mark, or a binary "
                        "file); save it as UTF-8 text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{where}: the {what} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}: "
                        "Latin-1 or another 8-bit encoding?); save it as UTF-8") from None
    return text[1:] if text.startswith("\ufeff") else text


def read_text(path: str | Path, what: str, max_bytes: int) -> str:
    """A regular file of at most `max_bytes` as UTF-8 text (read_bytes, then decode)."""
    return decode(read_bytes(path, what, max_bytes), str(path), what)


def parse_json(text: str | bytes, where: str, says: str = "not valid JSON") -> Any:
    """json.loads with every way it can fail on a user's file as one UserError: `{where}: {says} (why)`."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{where}: {says} ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise UserError(f"{where}: {says} (nested deeper than this reader follows)") from None
    except ValueError as exc:  # an integer of more than sys.get_int_max_str_digits() digits
        raise UserError(f"{where}: {says} ({str(exc).split(';')[0]})") from None


def read_json(path: str | Path, what: str, max_bytes: int) -> Any:
    """read_text, then parse_json."""
    return parse_json(read_text(path, what, max_bytes), str(path))
