"""A store read without its servers' logs (stored/read.py::load_store(logs=False), what the step-cost model's
observations read): the same servers, cells and requests as a whole read, every log None, and a secret the store
holds in its servers' settings masked alike. The real recorded H100 MoE store (tests/data)."""

from __future__ import annotations

import dataclasses
import shutil
import sqlite3
from pathlib import Path

from paths import DATA
from specbench.stored.read import load_store

STORE = DATA / "h100-moe-long-sglang-0.5.15.post1" / "h100-moel.db"


def test_without_logs_only_the_logs_differ(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    shutil.copy(STORE, path)
    path.chmod(0o644)
    con = sqlite3.connect(path)
    con.execute("UPDATE servers SET command_json = replace(command_json, '\"--port\"', "
                "'\"--api-key\", \"sk-proj-abcdefghijklmnopqrstuvwx\", \"--port\"')")
    con.commit()
    con.close()
    whole, lean = load_store(path), load_store(path, logs=False)
    assert any(s.log_text for s in whole.servers)  # the recorded store keeps its servers' logs
    assert all(s.log_text is None for s in lean.servers)
    assert [dataclasses.replace(s, log_text=None) for s in whole.servers] == list(lean.servers)
    assert whole.cells == lean.cells and whole.meta == lean.meta and whole.warnings == lean.warnings
    assert all("--api-key" in s.command for s in lean.servers)  # the secret went in, and came out masked
    assert all("sk-proj-abcdefghijklmnopqrstuvwx" not in " ".join(s.command) for s in lean.servers)
