"""Nothing secret written down, nothing foreign deleted: a real `specbench run` whose launch command carries
`--api-key` and whose matrix env carries HF_TOKEN / OPENAI_API_KEY, then report, export, plan --json, doctor --json,
run --dry-run; every file specbench wrote is grepped for the secret values. `report --out` only replaces what its
manifest lists; report.md escapes HTML; a `$...$` label renders; `host` must be an address; report and export read
a store in a read-only folder; a damaged store is one line."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from paths import ROOT
from proc_helpers import free_port
from run_helpers import make_tokenizer

# slow: a whole `specbench run` or a process fault per test, seconds each: `make test-fast` leaves it out
pytestmark = pytest.mark.slow

API_KEY = "sk-live-0123456789abcdef"
HF_TOKEN = "hf_AbCdEfGhIjKlMnOpQrStUv"
OPENAI = "oa-secret-9f8e7d6c5b4a"
SECRETS = (API_KEY, HF_TOKEN, OPENAI)


@pytest.fixture(scope="module")
def tok(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tokenizer(tmp_path_factory.mktemp("tok"))


def _cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specbench", *args], capture_output=True, text=True, timeout=180,
                          cwd=cwd)


def _matrix(path: Path, tok: Path, label: str = "ar", host: str = "127.0.0.1") -> Path:
    cmd = [sys.executable, "-m", "specbench.testing.instant_server", "--burst", "1", "--api-key", API_KEY]
    path.write_text(f"""
name = "secrets"
engine = "openai"
command = {json.dumps(cmd)}
host = "{host}"
port = {free_port()}
tokenizer = "{tok}"

[timeouts]
ready_s = 30
stop_s = 5
port_free_s = 10

[server.env]
HF_TOKEN = "{HF_TOKEN}"
OPENAI_API_KEY = "{OPENAI}"

[[server.spec]]
label = {json.dumps(label)}

[client]
concurrency = 1
prompt_tokens = 24
output_tokens = 8
num_requests = 2
warmup_requests = 0
""")
    return path


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def test_no_secret_in_anything_specbench_writes(tmp_path: Path, tok: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    m = _matrix(work / "m.toml", tok)
    store = work / "r.sqlite"
    outputs: dict[str, str] = {}
    r = _cli("run", str(m), "--store", str(store), "--no-progress")
    assert r.returncode == 0, r.stderr
    outputs["run"] = r.stdout + r.stderr
    for fmt in ("csv", "json"):
        e = _cli("export", str(store), "--format", fmt, "-o", str(work / f"export.{fmt}"))
        assert e.returncode == 0, e.stderr
    rep = _cli("report", str(store), "--out", str(work / "report"))
    assert rep.returncode == 0, rep.stderr
    for args in (("run", str(m), "--dry-run"), ("run", str(m), "--dry-run", "--json")):
        d = _cli(*args)
        assert d.returncode == 0, d.stderr
        outputs[" ".join(args[2:])] = d.stdout
    plan = _cli("plan", "--json", "--gpu", "H100", "--", "python", "-m", "sglang.launch_server", "--model-path",
                "Qwen/Qwen3-8B", "--api-key", API_KEY, "--admin-api-key", OPENAI)
    outputs["plan"] = plan.stdout + plan.stderr
    # the engine echoes the key (as SGLang prints server_args); the runner writes its boot log redacted (#23), and
    # doctor must not repeat it either
    boot_logs = list((work / "r-logs").glob("*.log"))
    assert boot_logs and "api_key='***'" in boot_logs[0].read_text()
    doc = _cli("doctor", "--json", str(boot_logs[0]))
    outputs["doctor"] = doc.stdout + doc.stderr

    # the store kept the server's log and its command, masked
    import sqlite3

    con = sqlite3.connect(store)
    log_text, command, env = con.execute("SELECT log_text, command_json, env_json FROM servers").fetchone()
    con.close()
    assert "api_key='***'" in log_text and "--api-key" in command and json.loads(env)["HF_TOKEN"] == "***"

    written = [p for p in _files(work) if p != m]  # the boot logs too
    assert any(p.name.endswith(".sqlite") for p in written) and any(p.name == "report.html" for p in written)
    for p in written:
        data = p.read_bytes()
        for s in SECRETS:
            assert s.encode() not in data, f"{s} in {p}"
    for name, text in outputs.items():
        for s in SECRETS:
            assert s not in text, f"{s} in the output of {name}"


def test_same_matrix_with_another_key_is_the_same_cell(tmp_path: Path, tok: Path) -> None:
    from specbench.matrix.expansion import expand
    from specbench.matrix.toml_load import load_matrix

    a, _ = load_matrix(_matrix(tmp_path / "a.toml", tok))
    b_path = tmp_path / "b.toml"
    b_path.write_text((tmp_path / "a.toml").read_text().replace(OPENAI, "another-secret-value"))
    b, _ = load_matrix(b_path)
    assert [s.server_id for s in expand(a)[0]] == [s.server_id for s in expand(b)[0]]


def _store(tmp_path: Path, tps: tuple[int, ...] = (1,)) -> Path:
    from specbench.testing.synthetic import write_store

    return Path(write_store(tmp_path / "s.sqlite", tps=tps))


def test_a_store_written_before_redaction_reports_and_exports_masked(tmp_path: Path) -> None:
    """The env of servers a store recorded unmasked (series names, server.env) comes out as HF_TOKEN=***."""
    import sqlite3

    store = _store(tmp_path, (1, 4))
    con = sqlite3.connect(store)
    ids = [r[0] for r in con.execute("SELECT server_id FROM servers WHERE json_extract(settings_json, '$.label')='ar'")]
    for i, sid in enumerate(ids):
        con.execute("UPDATE servers SET settings_json = json_set(settings_json, '$.env', json(?)) WHERE server_id=?",
                    (json.dumps({"HF_TOKEN": f"{HF_TOKEN}{i}", "SGLANG_X": str(i)}), sid))
        con.execute("UPDATE cells SET server_json = json_set(server_json, '$.env', json(?)) WHERE server_id=?",
                    (json.dumps({"HF_TOKEN": f"{HF_TOKEN}{i}", "SGLANG_X": str(i)}), sid))
    con.commit()
    con.close()
    assert _cli("report", str(store), "--out", str(tmp_path / "rep")).returncode == 0
    e = _cli("export", str(store), "--format", "json")
    md = (tmp_path / "rep" / "report.md").read_text()
    assert HF_TOKEN not in md and HF_TOKEN not in e.stdout and HF_TOKEN not in (tmp_path / "rep" / "report.html").read_text()
    assert {r["server.env"]["HF_TOKEN"] for r in json.loads(e.stdout) if r["label"] == "ar"} == {"***"}


def test_report_out_refuses_a_folder_it_did_not_write_and_replaces_only_its_own(tmp_path: Path) -> None:
    store = _store(tmp_path)
    home = tmp_path / "home"
    (home / "logs").mkdir(parents=True)
    (home / "logs" / "precious.txt").write_text("mine")
    r = _cli("report", str(store), "--out", str(home))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "not a specbench report folder" in r.stderr
    assert (home / "logs" / "precious.txt").read_text() == "mine"

    out = tmp_path / "rep"
    assert _cli("report", str(store), "--out", str(out)).returncode == 0
    manifest = json.loads((out / ".specbench-report.json").read_text())
    assert "report.md" in manifest["files"]
    (out / "logs").mkdir(exist_ok=True)
    (out / "logs" / "notes.txt").write_text("added by hand")
    (out / "mine.txt").write_text("added by hand")
    again = _cli("report", str(store), "--out", str(out))
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
    r = _cli("report", str(store), "--out", str(tmp_path / "rep"))
    assert r.returncode == 0, r.stderr
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "<script>" not in md and "&lt;script&gt;" in md
    assert list((tmp_path / "rep").glob("*.png"))


@pytest.mark.parametrize("host", ["", "0.0.0.0.0", "example.com"])
def test_host_must_be_an_address(tmp_path: Path, tok: Path, host: str) -> None:
    r = _cli("run", str(_matrix(tmp_path / "m.toml", tok, host=host)), "--dry-run")
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
        r = _cli(*args)
        assert r.returncode == 2 and r.stderr.startswith("specbench: error:") and r.stderr.count("\n") == 1, r.stderr
