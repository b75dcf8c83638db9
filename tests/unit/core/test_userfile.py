"""userfile.py, the one reader of a file the user names: what is no regular file is refused at once, a file longer
than its bound is never read whole, text in another encoding is named, and JSON's own limits are one line."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from specbench.errors import UserError
from specbench.userfile import parse_json, read_json, read_text


def test_a_fifo_with_no_writer_is_refused_at_once_not_waited_on(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "f")
    with pytest.raises(UserError, match="is a FIFO"):
        read_text(tmp_path / "f", "matrix file", 1 << 20)
    (tmp_path / "link").symlink_to(tmp_path / "f")
    with pytest.raises(UserError, match="is a FIFO"):
        read_text(tmp_path / "link", "matrix file", 1 << 20)


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom", "/dev/null"])
def test_a_device_is_refused_by_what_it_is(device: str) -> None:
    with pytest.raises(UserError, match="character device"):
        read_text(device, "calibration file", 1 << 20)


def test_a_socket_file_is_refused(tmp_path: Path) -> None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(tmp_path / "s"))
    s.close()
    with pytest.raises(UserError, match="is a socket"):
        read_text(tmp_path / "s", "config.json", 1 << 20)


def test_a_folder_is_the_callers_to_word(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError):
        read_text(tmp_path, "config.json", 1 << 20)


def test_a_file_over_its_bound_is_refused_without_being_read_whole(tmp_path: Path) -> None:
    with open(tmp_path / "sparse", "wb") as f:  # 8 GiB of holes: a whole read would not fit the test's memory
        f.truncate(8 << 30)
    with pytest.raises(UserError, match="more than 1024 bytes"):
        read_text(tmp_path / "sparse", "matrix file", 1024)


@pytest.mark.parametrize("encoding,said", [("utf-16", "UTF-16"), ("utf-32", "UTF-32"),
                                           ("utf-16-le", "NUL bytes"), ("latin-1", "byte 0xe9 at offset 10")])
def test_another_encoding_is_named(tmp_path: Path, encoding: str, said: str) -> None:
    (tmp_path / "f").write_bytes('{"a": "caf\u00e9"}'.encode(encoding))
    with pytest.raises(UserError, match=said):
        read_json(tmp_path / "f", "calibration file", 1 << 20)


def test_utf8_with_a_byte_order_mark_reads(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b'\xef\xbb\xbf{"a": "caf\xc3\xa9"}')
    assert read_json(tmp_path / "f", "calibration file", 1 << 20) == {"a": "caf\u00e9"}


def test_a_store_and_a_gzip_file_are_named(tmp_path: Path) -> None:
    (tmp_path / "s.db").write_bytes(b"SQLite format 3\x00" + b"\x10" * 100)
    with pytest.raises(UserError, match="SQLite database"):
        read_text(tmp_path / "s.db", "calibration file", 1 << 20)
    (tmp_path / "g").write_bytes(b"\x1f\x8b\x08\x00" + b"\x00" * 20)
    with pytest.raises(UserError, match="gzip"):
        read_text(tmp_path / "g", "matrix file", 1 << 20)


@pytest.mark.parametrize("text,said", [('{"a": ' + "9" * 5000 + "}", "4300 digits"),
                                       ("[" * 200_000 + "]" * 200_000, "nested deeper"),
                                       ('{"a": 1', "Expecting")])
def test_json_limits_are_one_line(text: str, said: str) -> None:
    with pytest.raises(UserError, match=said):
        parse_json(text, "cfg.json")
