"""One redaction rule set at every writer (#23): secrets of every shape planted in a matrix (a TOML comment, a
DATABASE_URL password, a GitHub PAT, an OpenAI key, an AWS key id, the launch command's --api-key) and in an engine
log; then run, report, export (csv, json, jsonl), run --dry-run (text and json), plan (text and json) and doctor
(text and json). Every file any of them wrote, and everything they printed, is grepped for every planted value."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from proc_helpers import free_port
from run_helpers import ROOT, make_tokenizer

# slow: a whole `specbench run` or a process fault per test, seconds each: `make test-fast` leaves it out
pytestmark = pytest.mark.slow

API_KEY = "sbk-" + "a1b2c3d4" * 4
DB_PASSWORD = "Pa55-w0rd-xyzzy"
GH_PAT = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0" * 2
GH_FINE = "github_pat_11AAAAAAA0" + "b" * 40
OPENAI = "sk-proj-" + "Qq" * 16
AWS_ID = "AKIA" + "QWERTYUIOPASDFGH"
COMMENT_KEY = "cmt-" + "77" * 10
SECRETS = (API_KEY, DB_PASSWORD, GH_PAT, GH_FINE, OPENAI, AWS_ID, COMMENT_KEY)


@pytest.fixture(scope="module")
def tok(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tokenizer(tmp_path_factory.mktemp("tok"))


def _cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specbench", *args], capture_output=True, text=True, timeout=180,
                          cwd=cwd)


def _matrix(path: Path, tok: Path) -> Path:
    cmd = [sys.executable, "-m", "specbench.testing.instant_server", "--burst", "1", "--api-key", API_KEY]
    path.write_text(f"""
# api_key: {COMMENT_KEY}
# a note from the operator: the PAT is {GH_PAT}
name = "secrets"
engine = "openai"
command = {json.dumps(cmd)}
port = {free_port()}
tokenizer = "{tok}"

[timeouts]
ready_s = 30
stop_s = 5
port_free_s = 10

[server.env]
DATABASE_URL = "postgres://bench:{DB_PASSWORD}@db.internal:5432/runs"
GH_PAT = "{GH_PAT}"
GITHUB_FINE = "{GH_FINE}"
OPENAI_API_BASE_NOTE = "{OPENAI}"
AWS_ID_NOTE = "{AWS_ID}"

[[server.spec]]
label = "ar"

[client]
concurrency = 1
prompt_tokens = 24
output_tokens = 8
num_requests = 2
warmup_requests = 0
""")
    return path


def test_no_planted_secret_in_any_file_or_output(tmp_path: Path, tok: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    m = _matrix(work / "m.toml", tok)
    store = work / "r.sqlite"
    outputs: dict[str, str] = {}

    def keep(name: str, r: subprocess.CompletedProcess[str], ok: tuple[int, ...] = (0,)) -> None:
        assert r.returncode in ok, (name, r.stderr)
        outputs[name] = r.stdout + r.stderr

    keep("run", _cli("run", str(m), "--store", str(store), "--no-progress"))
    for fmt in ("csv", "json", "jsonl"):
        keep(f"export {fmt}", _cli("export", str(store), "--format", fmt, "-o", str(work / f"export.{fmt}")))
        keep(f"export {fmt} stdout", _cli("export", str(store), "--format", fmt))
    keep("report", _cli("report", str(store), "--out", str(work / "report")))
    keep("dry-run", _cli("run", str(m), "--dry-run"))
    keep("dry-run json", _cli("run", str(m), "--dry-run", "--json"))
    plan = ["--gpu", "H100", "--no-fixes", "--", "python", "-m", "sglang.launch_server", "--model-path",
            "Qwen/Qwen3-8B", "--api-key", API_KEY, "--admin-api-key", OPENAI]
    keep("plan", _cli("plan", *plan))
    keep("plan json", _cli("plan", "--json", *plan))
    log = work / "engine.log"  # an engine log that echoes what it was given, as SGLang's server_args dump does
    log.write_text(f"server_args=ServerArgs(model_path='x', api_key='{API_KEY}', port=30000)\n"
                   f"env: DATABASE_URL=postgres://bench:{DB_PASSWORD}@db:5432/x GH_PAT={GH_PAT}\n"
                   f"token {GH_FINE} key {OPENAI} id {AWS_ID}\nRuntimeError: boom\n")
    keep("doctor", _cli("doctor", str(log)), ok=(0, 1))
    keep("doctor json", _cli("doctor", "--json", str(log)), ok=(0, 1))

    boot_logs = list((work / "r-logs").glob("*.log"))
    assert boot_logs, "the run wrote no boot log"
    written = [p for p in work.rglob("*") if p.is_file() and p not in (m, log)]
    assert any(p.suffix == ".sqlite" for p in written) and any(p.name == "report.html" for p in written)
    for p in written:
        data = p.read_bytes()
        for s in SECRETS:
            assert s.encode() not in data, f"{s} in {p}"
    for name, text in outputs.items():
        for s in SECRETS:
            assert s not in text, f"{s} in the output of {name}"
    assert "postgres://bench:***@" in (work / "export.json").read_text() + outputs["dry-run json"]


def test_a_server_enforcing_its_api_key_passes_readiness_and_serves_the_cells(tmp_path: Path, tok: Path) -> None:
    """The instant server with `--enforce-api-key` answers 401 to any /v1 request without `Authorization: Bearer
    KEY`, as vLLM and SGLang do with --api-key: the runner's probes, read-back and load all carry the key."""
    import sqlite3

    m = _matrix(tmp_path / "m.toml", tok)
    m.write_text(m.read_text().replace('"--api-key"', '"--enforce-api-key", "--api-key"'))
    store = tmp_path / "r.sqlite"
    r = _cli("run", str(m), "--store", str(store), "--no-progress")
    assert r.returncode == 0, r.stderr
    con = sqlite3.connect(store)
    (status, n), = con.execute("SELECT status, (SELECT count(*) FROM requests WHERE error IS NULL) FROM cells")
    con.close()
    assert status == "done" and n == 2
    assert API_KEY not in r.stdout + r.stderr


def test_the_matrix_api_key_is_the_one_sent(tmp_path: Path, tok: Path) -> None:
    """`api_key` in the matrix wins over the launch command's: a wrong one fails readiness on the 401s."""
    import sqlite3

    m = _matrix(tmp_path / "m.toml", tok)
    text = m.read_text().replace('"--api-key"', '"--enforce-api-key", "--api-key"')
    m.write_text(text.replace('name = "secrets"', 'name = "secrets"\napi_key = "not-the-key-0000"')
                 .replace("ready_s = 30", "ready_s = 4"))
    store = tmp_path / "r.sqlite"
    r = _cli("run", str(m), "--store", str(store), "--no-progress")
    assert r.returncode == 1, r.stderr
    con = sqlite3.connect(store)
    (status, reason), = con.execute("SELECT status, reason FROM cells")
    con.close()
    assert status == "failed" and "401" in reason
