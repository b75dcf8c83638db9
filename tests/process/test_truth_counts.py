"""Count, don't trust: `specbench run` (a real subprocess, a real store) against the instant server's ground-truth mode
(`--step-ms`, testing/instant_truth.py) lying in each way it can: every lie ends as a failed or partial cell with a
reason naming both counts, and the honest server's cell is `done` with the counts it really sent."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from proc_helpers import free_port
from run_helpers import _matrix_head, cli, make_tokenizer, rows

# slow: a whole `specbench run` or a process fault per test, seconds each: `make test-fast` leaves it out
pytestmark = pytest.mark.slow

LIES = {  # label -> instant-server flags of that server
    "honest": {},
    "usage10x": {"--usage-scale": 10},
    "usage-quarter": {"--usage-scale": 0.25},
    "usage-negative": {"--usage-scale": -1},
    "usage-plus3": {"--usage-offset": 3},
    "early-eos": {"--early-eos": 0.25},
}


@pytest.fixture(scope="module")
def tok(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tokenizer(tmp_path_factory.mktemp("tok"))


def _lies_matrix(path: Path, port: int, tok: Path, cmd_extra: tuple[str, ...] = (), client_extra: str = "",
                 api: str | None = None) -> Path:
    cmd = [sys.executable, "-m", "specbench.testing.instant_server", "--step-ms", "2", *cmd_extra]
    variants = "".join(f"""
[[server.spec]]
label = "{label}"
algorithm = "draft_model"
flags = {json.dumps(flags).replace(":", " =")}
""" for label, flags in LIES.items())
    head = _matrix_head("lies", cmd, port, tok, ready_s=30, stop_s=5)
    if api:
        head = head.replace("tokenizer = ", f'api = "{api}"\ntokenizer = ')
    path.write_text(head + variants + f"""
[client]
concurrency = 2
prompt_tokens = 24
output_tokens = 16
num_requests = 4
warmup_requests = 1
{client_extra}
""")
    return path


def _cells(store: Path) -> dict[str, tuple[str, str | None, dict]]:
    return {label: (status, reason, json.loads(m) if m else {})
            for label, status, reason, m in rows(store, "SELECT label, status, reason, metrics_json FROM cells")}


@pytest.mark.parametrize("api", ["completions", "generate"])
def test_every_lie_fails_or_is_partial_with_both_counts(tmp_path: Path, tok: Path, api: str) -> None:
    m = _lies_matrix(tmp_path / "m.toml", free_port(), tok, api=api)
    store = tmp_path / "r.sqlite"
    r = cli("run", str(m), "--store", str(store), "--no-progress")
    assert r.returncode == 1, r.stderr  # failed / partial cells
    assert "Traceback" not in r.stderr
    cells = _cells(store)
    status, reason, metrics = cells["honest"]
    assert status == "done", reason
    source = "token_ids" if api == "generate" else "tokenizer"
    assert metrics["count_sources"] == {source: 4} and metrics["early_stops"] == 0
    assert metrics["total_output_tokens"] == 4 * 16  # the verified count: what was really streamed
    assert cells["usage10x"][0] == "failed" and "completion_tokens=160" in cells["usage10x"][1]
    assert "max_tokens=16" in cells["usage10x"][1]
    assert cells["usage-quarter"][0] == "failed" and "completion_tokens=4" in cells["usage-quarter"][1]
    assert cells["usage-negative"][0] == "failed" and "completion_tokens=-16" in cells["usage-negative"][1]
    assert "negative" in cells["usage-negative"][1]
    # 3 more than streamed: beyond the tokenizer's tolerance (2 tokens for 16) and the exact ids' (0)
    assert cells["usage-plus3"][0] == "failed" and "completion_tokens=19" in cells["usage-plus3"][1]
    assert "counted 16" in cells["usage-plus3"][1] or "counted 17" in cells["usage-plus3"][1]
    status, reason, metrics = cells["early-eos"]
    assert status == "partial" and "4/4 requests ended before their max_tokens despite ignore_eos" in reason
    assert "asked 16, got 4" in reason and metrics["early_stops"] == 4
    reqs = rows(store, "SELECT r.output_tokens, r.server_output_tokens, r.counted_tokens, r.count_source, "
                       "r.early_stop, r.error FROM requests r JOIN cells c USING(cell_id) WHERE c.label='usage10x'")
    assert {(o, s, c, src) for o, s, c, src, _, _ in reqs} == {(160, 160, 16 if api == "generate" else 16, source)} \
        or all(s == 160 and src == source for _, s, _, src, _, _ in reqs)
    assert all(e and "160" in e for *_, e in reqs)


def test_early_stops_are_done_when_the_matrix_allows_them(tmp_path: Path, tok: Path) -> None:
    m = _lies_matrix(tmp_path / "m.toml", free_port(), tok, client_extra="allow_early_stop = true")
    m.write_text(m.read_text().split("[[server.spec]]\nlabel = \"usage10x\"")[0].replace(
        '[[server.spec]]\nlabel = "honest"', '[[server.spec]]\nlabel = "early-eos"\nalgorithm = "draft_model"\n'
        'flags = { "--early-eos" = 0.25 }\n\n[[server.spec]]\nlabel = "honest"', 1) + """
[client]
concurrency = 2
prompt_tokens = 24
output_tokens = 16
num_requests = 4
allow_early_stop = true
""")
    store = tmp_path / "r.sqlite"
    r = cli("run", str(m), "--store", str(store), "--no-progress")
    assert r.returncode == 0, r.stderr
    status, reason, metrics = _cells(store)["early-eos"]
    assert status == "done" and metrics["early_stops"] == 4 and metrics["total_output_tokens"] == 16


def test_a_server_of_another_model_fails_before_the_first_cell(tmp_path: Path, tok: Path) -> None:
    m = _lies_matrix(tmp_path / "m.toml", free_port(), tok, cmd_extra=("--model", "wanted-model",
                                                                      "--models-name", "other-model"))
    store = tmp_path / "r.sqlite"
    r = cli("run", str(m), "--store", str(store), "--no-progress")
    assert r.returncode == 1
    cells = _cells(store)
    assert {s for s, _, _ in cells.values()} == {"failed"}
    for _, reason, _ in cells.values():
        assert "'other-model'" in reason and "'wanted-model'" in reason
    assert rows(store, "SELECT count(*) FROM requests") == [(0,)]  # nothing was measured
    assert {s for (s,) in rows(store, "SELECT status FROM servers")} == {"failed"}


@pytest.mark.parametrize("api", ["chat", "completions", "generate"])
def test_a_server_writing_json_with_whitespace_is_measured_like_a_compact_one(tmp_path: Path, tok: Path,
                                                                              api: str) -> None:
    """The same matrix against three ground-truth servers that differ only in how they spell their stream's JSON
    (`--json-style`: compact as both engines write it, `spaces` as Python's json.dumps does by default and
    FastChat-style servers do, `loose` every other spelling JSON allows): every cell `done`, with the same request
    count, the same verified and client-counted tokens, counted the same way."""
    cmd = [sys.executable, "-m", "specbench.testing.instant_server", "--step-ms", "2"]
    variants = "".join(f"""
[[server.spec]]
label = "{style}"
algorithm = "draft_model"
flags = {{ "--json-style" = "{style}" }}
""" for style in ("compact", "spaces", "loose"))
    head = _matrix_head("spellings", cmd, free_port(), tok, ready_s=30, stop_s=5).replace(
        "tokenizer = ", f'api = "{api}"\ntokenizer = ')
    m = tmp_path / "m.toml"
    m.write_text(head + variants + """
[client]
concurrency = [1, 3]
prompt_tokens = 24
output_tokens = 16
num_requests = 6
warmup_requests = 1
""")
    store = tmp_path / "r.sqlite"
    r = cli("run", str(m), "--store", str(store), "--no-progress")
    assert r.returncode == 0, r.stdout + r.stderr
    cells = rows(store, "SELECT label, json_extract(client_json, '$.concurrency'), status, metrics_json, "
                        "(SELECT count(*) FROM requests q WHERE q.cell_id = c.cell_id) FROM cells c")
    assert len(cells) == 6 and {status for _, _, status, _, _ in cells} == {"done"}
    seen = {}
    for label, conc, _, metrics, n in cells:
        mt = json.loads(metrics)
        seen[label, conc] = (n, mt["total_output_tokens"], mt["count_sources"], mt["early_stops"])
    source = "token_ids" if api == "generate" else "tokenizer"
    for conc in (1, 3):
        assert seen["compact", conc] == (6, 6 * 16, {source: 6}, 0)
        assert seen["spaces", conc] == seen["loose", conc] == seen["compact", conc]
    reqs = rows(store, "SELECT c.label, json_extract(c.client_json, '$.concurrency'), r.idx, r.output_tokens, "
                       "r.server_output_tokens, r.counted_tokens, r.count_source, r.error FROM requests r "
                       "JOIN cells c USING(cell_id)")
    by = {label: sorted(x[1:] for x in reqs if x[0] == label) for label in ("compact", "spaces", "loose")}
    assert len(by["compact"]) == 12 and by["spaces"] == by["compact"] and by["loose"] == by["compact"]


def _model_matrix(path: Path, tok: Path, model_line: str, cmd_extra: tuple[str, ...]) -> Path:
    cmd = [sys.executable, "-m", "specbench.testing.instant_server", "--step-ms", "2", *cmd_extra]
    head = _matrix_head("model", cmd, free_port(), tok, ready_s=30, stop_s=5)
    path.write_text(head.replace("tokenizer = ", f"{model_line}\ntokenizer = ") + """
[[server.spec]]
label = "ar"

[[server.spec]]
label = "spec"
algorithm = "draft_model"

[client]
concurrency = 2
prompt_tokens = 24
output_tokens = 16
num_requests = 4
warmup_requests = 1
""")
    return path


def test_model_on_an_openai_server_names_the_model_it_must_serve(tmp_path: Path, tok: Path) -> None:
    """`model = "X"` with engine = "openai" is what `vllm bench serve --model X` is: the requests name X and the server
    must list X on /v1/models. A server that does (its launch command says nothing of X: `--model instant`) is
    measured, every request naming X; one that serves another model fails every cell before anything is measured,
    with both names; `served_model_name` naming another model beside it is refused at load, in one line."""
    record = tmp_path / "bodies.jsonl"
    m = _model_matrix(tmp_path / "ok.toml", tok, 'model = "wanted-model"',
                      ("--model", "instant", "--models-name", "wanted-model", "--record", str(record)))
    store = tmp_path / "ok.sqlite"
    r = cli("run", str(m), "--store", str(store), "--no-progress")
    assert r.returncode == 0, r.stdout + r.stderr
    assert {s for (s,) in rows(store, "SELECT status FROM cells")} == {"done"}
    assert rows(store, "SELECT count(*) FROM requests") == [(8,)]
    sent = [json.loads(line)["body"] for line in record.read_text().splitlines()]
    assert len(sent) >= 8 and {b.get("model") for b in sent} == {"wanted-model"}

    m = _model_matrix(tmp_path / "wrong.toml", tok, 'model = "wanted-model"', ("--models-name", "other-model"))
    store = tmp_path / "wrong.sqlite"
    r = cli("run", str(m), "--store", str(store), "--no-progress")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    cells = rows(store, "SELECT status, reason FROM cells")
    assert len(cells) == 2 and {s for s, _ in cells} == {"failed"}
    for _, reason in cells:
        assert "'other-model'" in reason and "'wanted-model'" in reason and "nothing was measured" in reason
    assert rows(store, "SELECT count(*) FROM requests") == [(0,)]

    both = m.read_text().replace('model = "wanted-model"', 'model = "wanted-model"\nserved_model_name = "other-model"')
    m.write_text(both)
    r = cli("run", str(m), "--store", str(tmp_path / "both.sqlite"), "--no-progress")
    assert r.returncode != 0 and "Traceback" not in r.stderr
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "served_model_name" in err[0] and "'wanted-model'" in err[0] and "'other-model'" in err[0]
    assert not (tmp_path / "both.sqlite").exists()  # refused before anything ran
