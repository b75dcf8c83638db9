"""One redaction rule set at every writer (#23): secrets planted in a matrix (the launch command's --api-key, the
server env, a TOML comment, a DATABASE_URL password, a GitHub PAT, an OpenAI key, an AWS key id) and in an engine log;
then a real `specbench run`, report, export (csv, json, jsonl; to a file and to stdout), run --dry-run (text and json),
plan (text and json) and doctor (text and json) on the run's own boot log and on a planted log. Every file any of them
wrote, and everything they printed, is grepped for every planted value; the store keeps the server's log, command and
env masked. Two plantings, one test: the env and command secrets of an everyday matrix, and every shape the redaction
rules know. Also: a server that enforces its key is served, the matrix's `api_key` is the one sent, a secret never
shapes a cell id, and a store written before redaction reports and exports masked."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from proc_helpers import free_port
from run_helpers import ONE_AR_CELL, _matrix_head, cli, make_tokenizer

# slow: a whole `specbench run` or a process fault per test, seconds each: `make test-fast` leaves it out
pytestmark = pytest.mark.slow

API_KEY = "sbk-" + "a1b2c3d4" * 4  # the launch command's --api-key, which the engine echoes in its log
HF_TOKEN = "hf_AbCdEfGhIjKlMnOpQrStUv"
OPENAI_KEY = "oa-secret-9f8e7d6c5b4a"
DB_PASSWORD = "Pa55-w0rd-xyzzy"
GH_PAT = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0" * 2
GH_FINE = "github_pat_11AAAAAAA0" + "b" * 40
OPENAI = "sk-proj-" + "Qq" * 16
AWS_ID = "AKIA" + "QWERTYUIOPASDFGH"
COMMENT_KEY = "cmt-" + "77" * 10


@dataclass(frozen=True)
class Planting:
    """What a matrix carries besides its launch command's key: lines above its head, its [server.env], the secret
    values to look for, the env key whose stored value must read ***, and a masked form the exports must show."""

    head: str
    env: dict[str, str]
    secrets: tuple[str, ...]
    masked_env: str
    log: str  # an engine log's lines beside its server_args dump (the doctor reads it)
    admin_key: str  # the plan's --admin-api-key
    masked_text: str | None = None


PLANTINGS = {
    "env-and-command": Planting("", {"HF_TOKEN": HF_TOKEN, "OPENAI_API_KEY": OPENAI_KEY},
                                (API_KEY, HF_TOKEN, OPENAI_KEY), "HF_TOKEN",
                                f"env: HF_TOKEN={HF_TOKEN} OPENAI_API_KEY={OPENAI_KEY}\n", OPENAI_KEY),
    "every-shape": Planting(f"# api_key: {COMMENT_KEY}\n# a note from the operator: the PAT is {GH_PAT}\n",
                            {"DATABASE_URL": f"postgres://bench:{DB_PASSWORD}@db.internal:5432/runs", "GH_PAT": GH_PAT,
                             "GITHUB_FINE": GH_FINE, "OPENAI_API_BASE_NOTE": OPENAI, "AWS_ID_NOTE": AWS_ID},
                            (API_KEY, DB_PASSWORD, GH_PAT, GH_FINE, OPENAI, AWS_ID, COMMENT_KEY), "GH_PAT",
                            f"env: DATABASE_URL=postgres://bench:{DB_PASSWORD}@db:5432/x GH_PAT={GH_PAT}\n"
                            f"token {GH_FINE} key {OPENAI} id {AWS_ID}\n", OPENAI, "postgres://bench:***@"),
}


@pytest.fixture(scope="module")
def tok(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tokenizer(tmp_path_factory.mktemp("tok"))


def _matrix(path: Path, tok: Path, planting: Planting = PLANTINGS["env-and-command"], *, extra_cmd: tuple[str, ...] = (),
            ready_s: float = 30) -> Path:
    import sys

    cmd = [sys.executable, "-m", "specbench.testing.instant_server", "--burst", "1", *extra_cmd, "--api-key", API_KEY]
    env = "".join(f"{k} = {json.dumps(v)}\n" for k, v in planting.env.items())
    path.write_text(planting.head + _matrix_head("secrets", cmd, free_port(), tok, ready_s=ready_s, stop_s=5) + f"""
[server.env]
{env}""" + ONE_AR_CELL)
    return path


@pytest.mark.parametrize("name", sorted(PLANTINGS))
def test_no_planted_secret_in_any_file_or_output(tmp_path: Path, tok: Path, name: str) -> None:
    planting = PLANTINGS[name]
    work = tmp_path / "w"
    work.mkdir()
    m = _matrix(work / "m.toml", tok, planting)
    store = work / "r.sqlite"
    outputs: dict[str, str] = {}

    def keep(what: str, r: subprocess.CompletedProcess[str], ok: tuple[int, ...] = (0,)) -> None:
        assert r.returncode in ok, (what, r.stderr)
        outputs[what] = r.stdout + r.stderr

    keep("run", cli("run", str(m), "--store", str(store), "--no-progress"))
    for fmt in ("csv", "json", "jsonl"):
        keep(f"export {fmt}", cli("export", str(store), "--format", fmt, "-o", str(work / f"export.{fmt}")))
        keep(f"export {fmt} stdout", cli("export", str(store), "--format", fmt))
    keep("report", cli("report", str(store), "--out", str(work / "report")))
    keep("dry-run", cli("run", str(m), "--dry-run"))
    keep("dry-run json", cli("run", str(m), "--dry-run", "--json"))
    plan = ["--gpu", "H100", "--", "python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B",
            "--api-key", API_KEY, "--admin-api-key", planting.admin_key]
    keep("plan", cli("plan", "--no-fixes", *plan))
    keep("plan json", cli("plan", "--json", *plan))
    # the engine echoes the key (as SGLang prints server_args): the runner writes its boot log redacted, and the
    # doctor repeats neither it nor a planted log's secrets
    boot_logs = list((work / "r-logs").glob("*.log"))
    assert boot_logs and "api_key='***'" in boot_logs[0].read_text()
    keep("doctor boot log", cli("doctor", "--json", str(boot_logs[0])), ok=(0, 1))
    log = work / "engine.log"
    log.write_text(f"server_args=ServerArgs(model_path='x', api_key='{API_KEY}', port=30000)\n{planting.log}"
                   "RuntimeError: boom\n")
    keep("doctor", cli("doctor", str(log)), ok=(0, 1))
    keep("doctor json", cli("doctor", "--json", str(log)), ok=(0, 1))

    con = sqlite3.connect(store)  # the store kept the server's log, its command and its env, masked
    log_text, command, env = con.execute("SELECT log_text, command_json, env_json FROM servers").fetchone()
    con.close()
    assert "api_key='***'" in log_text and "--api-key" in command and json.loads(env)[planting.masked_env] == "***"

    written = [p for p in work.rglob("*") if p.is_file() and p not in (m, log)]  # the boot logs too
    assert any(p.suffix == ".sqlite" for p in written) and any(p.name == "report.html" for p in written)
    for p in written:
        data = p.read_bytes()
        for s in planting.secrets:
            assert s.encode() not in data, f"{s} in {p}"
    for what, text in outputs.items():
        for s in planting.secrets:
            assert s not in text, f"{s} in the output of {what}"
    if planting.masked_text:
        assert planting.masked_text in (work / "export.json").read_text() + outputs["dry-run json"]


def test_a_server_enforcing_its_api_key_passes_readiness_and_serves_the_cells(tmp_path: Path, tok: Path) -> None:
    """The instant server with `--enforce-api-key` answers 401 to any /v1 request without `Authorization: Bearer
    KEY`, as vLLM and SGLang do with --api-key: the runner's probes, read-back and load all carry the key."""
    m = _matrix(tmp_path / "m.toml", tok, extra_cmd=("--enforce-api-key",))
    r, (status, n) = _run_one_cell(m, "(SELECT count(*) FROM requests WHERE error IS NULL)")
    assert r.returncode == 0, r.stderr
    assert status == "done" and n == 2
    assert API_KEY not in r.stdout + r.stderr


def test_the_matrix_api_key_is_the_one_sent(tmp_path: Path, tok: Path) -> None:
    """`api_key` in the matrix wins over the launch command's: a wrong one fails readiness on the 401s."""
    m = _matrix(tmp_path / "m.toml", tok, extra_cmd=("--enforce-api-key",), ready_s=4)
    m.write_text(m.read_text().replace('name = "secrets"', 'name = "secrets"\napi_key = "not-the-key-0000"'))
    r, (status, reason) = _run_one_cell(m, "reason")
    assert r.returncode == 1, r.stderr
    assert status == "failed" and "401" in str(reason)


def _run_one_cell(matrix: Path, column: str) -> tuple[subprocess.CompletedProcess[str], tuple[str, object]]:
    """`specbench run` of a one-cell matrix into a store beside it: the process, and its cell's status and `column`."""
    store = matrix.with_suffix(".sqlite")
    r = cli("run", str(matrix), "--store", str(store), "--no-progress")
    con = sqlite3.connect(store)
    try:
        (row,) = con.execute(f"SELECT status, {column} FROM cells").fetchall()
    finally:
        con.close()
    return r, (row[0], row[1])


def test_same_matrix_with_another_key_is_the_same_cell(tmp_path: Path, tok: Path) -> None:
    from specbench.matrix.expansion import expand
    from specbench.matrix.toml_load import load_matrix

    a, _ = load_matrix(_matrix(tmp_path / "a.toml", tok))
    b_path = tmp_path / "b.toml"
    b_path.write_text((tmp_path / "a.toml").read_text().replace(OPENAI_KEY, "another-secret-value"))
    b, _ = load_matrix(b_path)
    assert [s.server_id for s in expand(a)[0]] == [s.server_id for s in expand(b)[0]]


def test_a_store_written_before_redaction_reports_and_exports_masked(tmp_path: Path) -> None:
    """The env of servers a store recorded unmasked (series names, server.env) comes out as HF_TOKEN=***."""
    from specbench.testing.synthetic import write_store

    store = Path(write_store(tmp_path / "s.sqlite", tps=(1, 4)))
    con = sqlite3.connect(store)
    ids = [r[0] for r in con.execute("SELECT server_id FROM servers WHERE json_extract(settings_json, '$.label')='ar'")]
    for i, sid in enumerate(ids):
        con.execute("UPDATE servers SET settings_json = json_set(settings_json, '$.env', json(?)) WHERE server_id=?",
                    (json.dumps({"HF_TOKEN": f"{HF_TOKEN}{i}", "SGLANG_X": str(i)}), sid))
        con.execute("UPDATE cells SET server_json = json_set(server_json, '$.env', json(?)) WHERE server_id=?",
                    (json.dumps({"HF_TOKEN": f"{HF_TOKEN}{i}", "SGLANG_X": str(i)}), sid))
    con.commit()
    con.close()
    assert cli("report", str(store), "--out", str(tmp_path / "rep")).returncode == 0
    e = cli("export", str(store), "--format", "json")
    md = (tmp_path / "rep" / "report.md").read_text()
    assert HF_TOKEN not in md and HF_TOKEN not in e.stdout and HF_TOKEN not in (tmp_path / "rep" / "report.html").read_text()
    assert {r["server.env"]["HF_TOKEN"] for r in json.loads(e.stdout) if r["label"] == "ar"} == {"***"}
