"""Files specbench writes are safe to write and to read: `report --out` only replaces what its manifest lists, never a
folder it did not write; report.md escapes HTML and a `$...$` label renders; `host` must be an address; report and
export read a store in a read-only folder; a damaged store is one line. (The secrets at every writer:
test_secrets.py.)"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from paths import ROOT
from proc_helpers import free_port
from run_helpers import ONE_AR_CELL, _matrix_head, cli, make_tokenizer

# slow: a whole `specbench run` or a process fault per test, seconds each: `make test-fast` leaves it out
pytestmark = pytest.mark.slow



@pytest.fixture(scope="module")
def tok(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tokenizer(tmp_path_factory.mktemp("tok"))


def _matrix(path: Path, tok: Path, host: str) -> Path:
    cmd = [sys.executable, "-m", "specbench.testing.instant_server", "--burst", "1"]
    path.write_text(_matrix_head("hosts", cmd, free_port(), tok, ready_s=30, stop_s=5, host=host) + ONE_AR_CELL)
    return path


def _store(tmp_path: Path, tps: tuple[int, ...] = (1,)) -> Path:
    from specbench.testing.synthetic import write_store

    return Path(write_store(tmp_path / "s.sqlite", tps=tps))


def test_report_out_refuses_a_folder_it_did_not_write_and_replaces_only_its_own(tmp_path: Path) -> None:
    store = _store(tmp_path)
    home = tmp_path / "home"
    (home / "logs").mkdir(parents=True)
    (home / "logs" / "precious.txt").write_text("mine")
    r = cli("report", str(store), "--out", str(home))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "not a specbench report folder" in r.stderr
    assert (home / "logs" / "precious.txt").read_text() == "mine"

    out = tmp_path / "rep"
    assert cli("report", str(store), "--out", str(out)).returncode == 0
    manifest = json.loads((out / ".specbench-report.json").read_text())
    assert "report.md" in manifest["files"]
    (out / "logs").mkdir(exist_ok=True)
    (out / "logs" / "notes.txt").write_text("added by hand")
    (out / "mine.txt").write_text("added by hand")
    again = cli("report", str(store), "--out", str(out))
    assert again.returncode == 0, again.stderr
    assert (out / "logs" / "notes.txt").read_text() == "added by hand" and (out / "mine.txt").exists()
    assert (out / "report.md").exists()


def test_report_md_escapes_html_and_dollar_labels_render(tmp_path: Path, tok: Path) -> None:
    import sqlite3

    store = _store(tmp_path)
    con = sqlite3.connect(store)
    con.execute("UPDATE cells SET label = '<script>alert(1)</script> $x^2$'")
    con.execute("UPDATE servers SET settings_json = json_set(settings_json, '$.label', '<script>alert(1)</script> $x^2$')")
    con.commit()
    con.close()
    r = cli("report", str(store), "--out", str(tmp_path / "rep"))
    assert r.returncode == 0, r.stderr
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "<script>" not in md and "&lt;script&gt;" in md
    assert list((tmp_path / "rep").glob("*.png"))


@pytest.mark.parametrize("host", ["", "0.0.0.0.0", "example.com"])
def test_host_must_be_an_address(tmp_path: Path, tok: Path, host: str) -> None:
    r = cli("run", str(_matrix(tmp_path / "m.toml", tok, host)), "--dry-run")
    assert r.returncode == 2 and "host must be an IP address" in r.stderr and "Traceback" not in r.stderr


def test_report_and_export_read_a_store_in_a_read_only_folder(tmp_path: Path) -> None:
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-rm", "true"]).returncode != 0:
        pytest.skip("no user+mount namespaces here to make a read-only folder")
    ro = tmp_path / "ro"
    ro.mkdir()
    store = _store(ro)
    out = tmp_path / "rep"
    script = (f"mount --bind -o ro {ro} {ro} && {sys.executable} -m specbench report {store} --out {out} && "
              f"{sys.executable} -m specbench export {store} --format csv > {tmp_path / 'e.csv'} && "
              f"touch {ro}/probe 2>/dev/null; test ! -e {ro}/probe")
    r = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert (out / "report.md").exists() and (tmp_path / "e.csv").read_text().startswith("store,cell_id")
    assert not list(ro.glob("*-shm")) and not list(ro.glob("*-wal"))


def test_a_damaged_store_is_one_line(tmp_path: Path) -> None:
    store = _store(tmp_path)
    data = bytearray(store.read_bytes())
    data[100:4000] = b"\xff" * 3900  # the header stays, the schema page does not
    store.write_bytes(bytes(data))
    for args in (("report", str(store), "--out", str(tmp_path / "rep")), ("export", str(store), "--format", "json")):
        r = cli(*args)
        assert r.returncode == 2 and r.stderr.startswith("specbench: error:") and r.stderr.count("\n") == 1, r.stderr
