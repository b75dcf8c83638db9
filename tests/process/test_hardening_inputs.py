"""Plausible-but-wrong inputs end in one line (#23): NaN/inf and out-of-range plan options and matrix values, a
deeply nested or huge matrix file, an `--engine-version` that is no release (never echoed) or a release line
specbench has no rules for; CSV export neutralises formula-looking cells and quotes bare CRs."""

from __future__ import annotations

import csv
import io
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from run_helpers import ROOT

PLAN = ["--", "python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B"]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specbench", *args], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)


def _one_error_line(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("specbench: error: "), r.stderr
    return lines[0]


@pytest.mark.parametrize("flag", ["--gpu-mem-gib", "--avail-before-load-gib", "--weights-gib", "--draft-weights-gib",
                                  "--non-kv-gib"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1", "1e400"])
def test_every_numeric_plan_option_is_finite_and_in_range(flag: str, value: str) -> None:
    line = _one_error_line(_cli("plan", "--gpu", "H100", flag, value, *PLAN))
    assert flag in line and "finite number of GiB" in line


@pytest.mark.parametrize("version", ["0.5.12; rm -rf /", "$(reboot)", "0.5.12\n--json", "x" * 500, "../../etc"])
def test_an_engine_version_that_is_no_release_is_refused_and_never_echoed(version: str) -> None:
    line = _one_error_line(_cli("plan", "--engine-version", version, "--gpu", "H100", *PLAN))
    assert "not a release number" in line and version not in line


@pytest.mark.parametrize("engine_argv", [PLAN, ["--", "vllm", "serve", "Qwen/Qwen3-8B"]])
def test_an_unknown_release_line_is_refused_with_the_known_rule_sets(engine_argv: list[str]) -> None:
    line = _one_error_line(_cli("plan", "--engine-version", "9.9", "--gpu", "H100", *engine_argv))
    assert "9.9.0" in line and "known" in line and "rule sets" in line


def test_a_newer_patch_is_planned_with_the_nearest_rules_and_a_loud_warning() -> None:
    r = _cli("plan", "--engine-version", "0.5.99", "--gpu", "H100", "--no-fixes", *PLAN)
    assert r.returncode == 0, r.stderr
    assert "warning: SGLang 0.5.99 is newer than the newest rule set" in r.stdout + r.stderr


def _matrix(tmp_path: Path, body: str) -> Path:
    m = tmp_path / "m.toml"
    m.write_text('engine = "vllm"\ncommand = ["vllm", "serve", "x"]\n' + body)
    return m


@pytest.mark.parametrize("body", [
    "a = " + "[" * 3000 + "]" * 3000 + "\n",
    "a = " + "{b = " * 2000 + "1" + "}" * 2000 + "\n",
    ".".join(["k"] * 3000) + " = 1\n",
    "name = \"" + "x" * (5 << 20) + "\"\n",
])
def test_a_deep_or_huge_matrix_is_one_line_before_parsing(tmp_path: Path, body: str) -> None:
    line = _one_error_line(_cli("run", str(_matrix(tmp_path, body)), "--dry-run"))
    assert "nest" in line or "bytes" in line


@pytest.mark.parametrize("body, key", [
    ("[server]\ntp = 100000\n", "server.tp"),
    ("[client]\nconcurrency = 100000000\n", "client.concurrency"),
    ("[client]\noutput_tokens = 10000000000\n", "client.output_tokens"),
    ("port = 70000\n", "port"),
    ("[plan]\ngpu_mem_gib = -3.0\n", "plan.gpu_mem_gib"),
    ("[plan]\ngpu_mem_gib = nan\n", "plan.gpu_mem_gib"),
    ("[timeouts]\nready_s = inf\n", "timeouts.ready_s"),
    ("[client]\nrequest_rate = nan\n", "client.request_rate"),
])
def test_a_matrix_value_out_of_range_names_its_key(tmp_path: Path, body: str, key: str) -> None:
    line = _one_error_line(_cli("run", str(_matrix(tmp_path, body)), "--dry-run"))
    assert f": {key}: " in line


def test_csv_export_neutralises_formulas_and_quotes_bare_carriage_returns(tmp_path: Path) -> None:
    from specbench.testing.synthetic import write_store

    store = write_store(tmp_path / "s.sqlite", tps=(1,), labels=("ar", "dflash"), concurrencies=(1, 2, 4, 8))
    con = sqlite3.connect(store)
    hostile = ["=HYPERLINK(\"http://x\")", "+1+2", "-2+3", "@SUM(A1)", "\tTAB", "\rCR", "split\rrow"]
    ids = [r[0] for r in con.execute("SELECT cell_id FROM cells ORDER BY rowid")]
    for cid, text in zip(ids, hostile):
        con.execute("UPDATE cells SET label=?, reason=? WHERE cell_id=?", (text, "bad\rreason", cid))
    con.commit()
    con.close()
    # bytes, not text: text mode would read a bare CR as a line end before the CSV reader sees it
    r = subprocess.run([sys.executable, "-m", "specbench", "export", str(store), "--format", "csv"],
                       capture_output=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    rows = list(csv.reader(io.StringIO(r.stdout.decode(), newline="")))
    assert len(rows) == 1 + len(ids)  # no row split by a CR
    header = rows[0]
    label = header.index("label")
    for row in rows[1:]:
        assert len(row) == len(header)
        cell = row[label]
        assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), cell
    assert {row[label] for row in rows[1:]} >= {"'" + h for h in hostile[:6]} | {"split\rrow"}
    numbers = [row[i] for row in rows[1:] for i, c in enumerate(header) if c == "tp"]
    assert all(n.lstrip("-").isdigit() for n in numbers)  # numbers stay numbers


def _slow_rate_matrix(tmp_path: Path) -> Path:
    m = tmp_path / "rate.toml"
    m.write_text(f'engine = "openai"\ncommand = [{sys.executable!r}, "-c", "raise SystemExit(3)"]\nport = 45997\n'
                 '[timeouts]\nready_s = 5\nstop_s = 1\nport_free_s = 1\n'
                 '[[server.spec]]\nlabel = "ar"\n[client]\nrequest_rate = [0.001, 5.0]\nnum_requests = 2\n'
                 'warmup_requests = 0\n')
    return m


def test_a_cell_expected_to_run_for_long_is_named_in_the_dry_run(tmp_path: Path) -> None:
    m = _slow_rate_matrix(tmp_path)
    r = _cli("run", str(m), "--dry-run")
    assert r.returncode == 0, r.stderr
    warned = [ln for ln in r.stdout.splitlines() if "warning: request_rate = 0.001" in ln]
    assert len(warned) == 1 and "2,000 s" in warned[0]  # 2 requests at 0.001/s; the 5/s cell is not named
    import json

    rows = json.loads(_cli("run", str(m), "--dry-run", "--json").stdout)
    assert sorted(r["expected_load_s"] for r in rows) == [0.4, 2000.0]


def test_a_cell_expected_to_run_for_long_is_named_at_start(tmp_path: Path) -> None:
    r = _cli("run", str(_slow_rate_matrix(tmp_path)), "--store", str(tmp_path / "r.sqlite"), "--no-progress")
    assert r.returncode == 1, r.stderr  # the server exits at once, as asked: no cell waits out its 2,000 s
    assert r.stderr.startswith("specbench: warning: cell ") and "expected to take ~33 min (2,000 s)" in r.stderr


def test_matrix_paths_resolve_against_the_matrix_folder_and_are_checked_by_the_dry_run(tmp_path: Path) -> None:
    import json

    from run_helpers import make_tokenizer

    here = tmp_path / "bench"
    make_tokenizer(here / "tok")
    (here / "drafts" / "eagle").mkdir(parents=True)
    (here / "prompts.jsonl").write_text('{"prompt": "hello there", "category": "chat"}\n' * 4)
    m = here / "m.toml"
    m.write_text('engine = "openai"\ncommand = ["python3", "-m", "x"]\ntokenizer = "tok"\n[[server.spec]]\n'
                 'label = "ar"\n[[server.spec]]\nlabel = "d"\nalgorithm = "draft_model"\n'
                 'draft_model = "./drafts/eagle"\n[client]\ndataset = "prompts.jsonl"\n')
    r = subprocess.run([sys.executable, "-m", "specbench", "run", "bench/m.toml", "--dry-run", "--json"],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)  # another working folder
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert any(row["server"].get("draft_model") == str(here / "drafts" / "eagle") for row in rows)
    for bad, key in (('tokenizer = "tok"', 'tokenizer = "no-such-tok"'),
                     ('draft_model = "./drafts/eagle"', 'draft_model = "./drafts/missing"'),
                     ('dataset = "prompts.jsonl"', 'dataset = "./missing.jsonl"')):
        m.write_text(m.read_text().replace(bad, key) if bad in m.read_text() else m.read_text())
        line = _one_error_line(_cli("run", str(m), "--dry-run"))
        assert str(m) in line and ("no such" in line or "cannot" in line or "not found" in line), line
        m.write_text(m.read_text().replace(key, bad))
