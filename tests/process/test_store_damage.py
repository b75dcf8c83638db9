"""Damaged and read-only stores (#23): `run` on a damaged store is one line naming the file and the damage, never a
traceback; a killed runner's store read from a read-only folder without its -shm file shows what the WAL holds;
`run` on a store in a read-only folder is one line."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from run_helpers import ROOT

SRC = str(ROOT / "src")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specbench", *args], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": SRC})


def _matrix(tmp_path: Path) -> Path:
    m = tmp_path / "m.toml"
    m.write_text(f'engine = "openai"\ncommand = [{sys.executable!r}, "-c", "raise SystemExit(3)"]\n'
                 'port = 45998\n[timeouts]\nready_s = 5\nstop_s = 1\nport_free_s = 1\n'
                 '[[server.spec]]\nlabel = "ar"\n[client]\nconcurrency = 1\nnum_requests = 1\nwarmup_requests = 0\n')
    return m


def _good(tmp_path: Path) -> bytes:
    from specbench.testing.synthetic import write_store

    return write_store(tmp_path / "good.db", tps=(1,), concurrencies=(1, 2)).read_bytes()


def _damage(kind: str, good: bytes, path: Path) -> None:
    if kind == "foreign":
        con = sqlite3.connect(path)
        con.execute("create table cells (x int)")
        con.commit()
        con.close()
        return
    if kind in ("bad-json", "bad-utf8"):
        path.write_bytes(good)
        con = sqlite3.connect(path)
        if kind == "bad-json":
            con.execute("UPDATE cells SET clamp_json = '{\"cut'")
        else:
            con.execute("UPDATE meta SET value = CAST(x'fffe41' AS TEXT) WHERE key = 'engine'")
        con.commit()
        con.close()
        return
    rng = random.Random(kind)
    data = {"truncated": good[: len(good) // 3], "header": good[:100] + b"\0" * 4096,
            "random": bytes(rng.randrange(256) for _ in range(3000))}.get(kind)
    if data is None:  # "flipped": bytes changed inside the pages
        b = bytearray(good)
        for _ in range(48):
            b[rng.randrange(100, len(b))] = rng.randrange(256)
        data = bytes(b)
    path.write_bytes(data)


@pytest.mark.parametrize("kind", ["truncated", "header", "random", "flipped", "foreign", "bad-json", "bad-utf8"])
def test_run_on_a_damaged_store_is_one_line_naming_the_file(tmp_path: Path, kind: str) -> None:
    store = tmp_path / "s.db"
    _damage(kind, _good(tmp_path), store)
    r = _cli("run", str(_matrix(tmp_path)), "--store", str(store), "--no-progress")
    assert "Traceback" not in r.stderr
    if r.returncode == 2:
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"specbench: error: {store}: "), r.stderr
        assert any(w in lines[0] for w in ("damaged", "not a specbench results store", "not a database"))
    else:  # SQLite found nothing wrong with these pages: the run went on, its server failing as asked
        assert r.returncode == 1, r.stderr


def test_bad_json_and_bad_text_are_named_as_damage(tmp_path: Path) -> None:
    for kind in ("bad-json", "foreign"):
        store = tmp_path / f"{kind}.db"
        _damage(kind, _good(tmp_path), store)
        r = _cli("run", str(_matrix(tmp_path)), "--store", str(store), "--no-progress")
        assert r.returncode == 2, r.stderr
        assert ("damaged" if kind == "bad-json" else "has no column") in r.stderr


def _killed_runner_store(folder: Path, src: Path) -> Path:
    """A store whose writer was SIGKILLed after writing everything to its WAL (no checkpoint)."""
    store = folder / "r.sqlite"
    pid = os.fork()
    if pid == 0:
        try:
            con = sqlite3.connect(store, isolation_level=None)
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA wal_autocheckpoint=0")
            con.execute("ATTACH ? AS s", (str(src),))
            for t in ("meta", "servers", "cells", "requests"):
                con.execute(f"CREATE TABLE {t} AS SELECT * FROM s.{t}")
        finally:
            os.kill(os.getpid(), signal.SIGKILL)
    os.waitpid(pid, 0)
    return store


@pytest.fixture
def read_only_view(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A read-only bind mount of a folder (root ignores file modes, so chmod would prove nothing)."""
    d, ro = tmp_path / "d", tmp_path / "ro"
    d.mkdir()
    ro.mkdir()
    ok = subprocess.run(["mount", "--bind", str(d), str(ro)], capture_output=True).returncode == 0 and \
        subprocess.run(["mount", "-o", "remount,ro,bind", str(ro)], capture_output=True).returncode == 0
    if not ok:
        subprocess.run(["umount", str(ro)], capture_output=True)
        pytest.skip("no bind mounts here (needs root in a mount namespace)")
    try:
        yield d, ro
    finally:
        subprocess.run(["umount", str(ro)], capture_output=True)


def test_a_killed_runners_store_in_a_read_only_folder_shows_its_wal(tmp_path: Path, read_only_view) -> None:  # type: ignore[no-untyped-def]
    from specbench.testing.synthetic import write_store

    d, ro = read_only_view
    src = write_store(tmp_path / "src.db", tps=(1,), concurrencies=(1, 2))
    _killed_runner_store(d, src)
    (d / "r.sqlite-shm").unlink()
    assert (d / "r.sqlite-wal").stat().st_size > 0
    n = sqlite3.connect(src).execute("SELECT count(*) FROM cells").fetchone()[0]
    r = _cli("export", str(ro / "r.sqlite"), "--format", "json")
    assert r.returncode == 0, r.stderr
    import json

    assert len(json.loads(r.stdout)) == n > 0  # the cells the WAL holds, not "Empty: nothing was measured"
    rep = _cli("report", str(ro / "r.sqlite"), "--out", str(tmp_path / "rep"))
    assert rep.returncode == 0, rep.stderr
    assert "nothing was measured" not in (tmp_path / "rep" / "report.md").read_text()


def test_run_on_a_store_in_a_read_only_folder_is_one_line(tmp_path: Path, read_only_view) -> None:  # type: ignore[no-untyped-def]
    d, ro = read_only_view
    (d / "r.sqlite").write_bytes(_good(tmp_path))  # an existing store there, and a new one
    for name in ("new.sqlite", "r.sqlite"):
        r = _cli("run", str(_matrix(tmp_path)), "--store", str(ro / name), "--no-progress")
        assert r.returncode == 2, r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"specbench: error: {ro / name}: "), r.stderr
