"""The boot log is written through the redaction rules a line at a time; a line with no end (a progress bar, a
dump on one line) is cut into pieces, and no cut may split a secret, or a flag from its value, between two pieces."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from specbench.matrix import boot_log

SECRET = "Correct7Horse9Battery"  # no token shape: only the `--api-key VALUE` rule can mask it


def _pump(data: bytes, tmp_path: Path) -> str:
    r, w = os.pipe()
    log = tmp_path / "boot.log"
    with os.fdopen(r, "rb") as reader:
        t = threading.Thread(target=boot_log._pump_redacted, args=(reader, log))
        t.start()
        with os.fdopen(w, "wb") as writer:
            for i in range(0, len(data), 4096):  # as an engine writes: many small reads on the runner's side
                writer.write(data[i:i + 4096])
        t.join(timeout=30)
    return log.read_text()


@pytest.mark.parametrize("shift", [-12, -8, -3, 0, 2, 9, 20])
def test_a_key_across_the_cut_of_an_endless_line_is_masked(tmp_path: Path, shift: int):
    cap = boot_log._LINE_CAP
    words = f"--api-key {SECRET} "
    head = b"w " * ((cap + shift - len("--api-key ")) // 2)  # the flag, its value or the gap lands on the cap
    data = head + words.encode() + b"tail " * 5000  # no newline anywhere
    text = _pump(data, tmp_path)
    assert SECRET not in text
    assert "--api-key" in text and len(text) > len(data) - len(SECRET)  # the rest is kept, not dropped


def test_a_line_with_no_space_at_all_is_still_written(tmp_path: Path):
    data = b"x" * (3 * boot_log._LINE_CAP)
    assert len(_pump(data, tmp_path)) == len(data)
