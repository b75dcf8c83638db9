"""`specbench run` end to end with a dataset file, a category axis, length distributions and sampling settings,
against the instant server (a real subprocess that records every body it receives) into a real SQLite store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proc_helpers import free_port
from run_helpers import ROOT, cli, instant_matrix, make_tokenizer, rows

# slow: a whole `specbench run` or a process fault per test, seconds each: `make test-fast` leaves it out
pytestmark = pytest.mark.slow

RECORDS = [
    {"prompt": "Write a Python function that returns the n-th Fibonacci number iteratively.", "category": "code",
     "output_tokens": 12},
    {"prompt": "Fix this: `def add(a, b): return a - b`", "category": "code", "output_tokens": 9},
    {"prompt": "Reverse a linked list in C and explain the pointer moves.", "category": "code", "output_tokens": 14},
    {"prompt": "What is 17 times 23? Show the steps.", "category": "math", "output_tokens": 10},
    {"prompt": "Is 221 prime?", "category": "math", "output_tokens": 8},
    {"prompt": "Solve 2x + 6 = 20.", "category": "math", "output_tokens": 11},
    {"prompt": "Tell me a fact about otters.", "category": "chat", "output_tokens": 13},
]


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tokenizer(tmp_path_factory.mktemp("tok"))


def test_dataset_categories_and_sampling_end_to_end(tmp_path: Path, tokenizer_dir: Path) -> None:
    (tmp_path / "prompts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    rec = tmp_path / "bodies.jsonl"
    m = instant_matrix(tmp_path / "m.toml", free_port(), tokenizer_dir, name="datasets",
                       extra_cmd=("--record", str(rec)), client="""dataset = "prompts.jsonl"
category = ["code", "math"]
prompt_len = "uniform:40,120"
output_len = "data"
concurrency = 1
num_requests = 5
warmup_requests = 1
temperature = 0.5
top_p = 0.9
top_k = 10
seed = 7
ignore_eos = false
stop = ["###"]""")
    store = tmp_path / "r.sqlite"
    r = cli("run", str(m), "--store", str(store), "--no-progress", "--json")
    assert r.returncode == 0, r.stderr
    cells = rows(store, "select cell_id, label, status, client_json, clamp_json, metrics_json from cells")
    assert sorted((c[1], json.loads(c[3])["category"], c[2]) for c in cells) == [
        ("ar", "code", "done"), ("ar", "math", "done"), ("spec3", "code", "done"), ("spec3", "math", "done")]
    wanted_out = {r["prompt"]: r["output_tokens"] for r in RECORDS}
    for cid, label, _, client_json, clamp_json, metrics_json in cells:
        client = json.loads(client_json)
        assert {k: client[k] for k in ("temperature", "top_p", "top_k", "seed", "ignore_eos", "stop")} == {
            "temperature": 0.5, "top_p": 0.9, "top_k": 10, "seed": 7, "ignore_eos": False, "stop": ["###"]}
        reqs = rows(store, f"select category, prompt_tokens, output_tokens from requests where cell_id='{cid}'")
        assert len(reqs) == 5 and {q[0] for q in reqs} == {client["category"]}  # every request row: its category
        outs = {v for p, v in wanted_out.items() if RECORDS[[x["prompt"] for x in RECORDS].index(p)]["category"]
                == client["category"]}
        assert {q[2] for q in reqs} <= outs  # output_len = "data": the record's own length
        clamp = json.loads(clamp_json)
        assert 40 <= clamp["prompt_tokens_min"] <= clamp["prompt_tokens"] <= 120 and not clamp["clamped"]
        if label == "spec3":
            assert json.loads(metrics_json)["speedup"] is not None  # against the AR cell of its own category
    bodies = [json.loads(x)["body"] for x in rec.read_text().splitlines()]
    chat = [b for b in bodies if "messages" in b]
    assert len(chat) == 4 * (5 + 1)  # every measured and warm-up request of the 4 cells
    for b in chat:
        assert (b["temperature"], b["top_p"], b["top_k"], b["seed"], b["stop"]) == (0.5, 0.9, 10, 7, ["###"])
        assert "ignore_eos" not in b
        first_line = b["messages"][-1]["content"]
        assert any(first_line.startswith(p[:30]) for p in wanted_out)  # real dataset text, cut or continued
    # the autoregressive and the speculative server got the same requests (the workload seed ignores the server)
    half = len(chat) // 2
    assert [b["messages"] for b in chat[:half]] == [b["messages"] for b in chat[half:]]


def test_a_store_from_before_the_category_column_loads_and_resumes(tmp_path: Path) -> None:
    """The committed H200 store has no `requests.category`: the report reads it, and `specbench run` opening it
    again adds the column (NULL for the old rows) so that new requests can carry their category."""
    import shutil

    from specbench.matrix.store import RequestRow, Store
    from specbench.stored.read import load_store

    old = tmp_path / "h200.db"
    shutil.copy(ROOT / "tests/data/h200-run-sglang-0.5.15.post1/h200.db", old)
    assert "category" not in {r[1] for r in rows(old, "pragma table_info(requests)")}
    loaded = load_store(old)
    assert len(loaded.cells) == 4 and all(c.status == "done" for c in loaded.cells)
    with Store(old) as s:
        cid = s.cells()[0]["cell_id"]
        s.start_cell(cid)
        s.finish_cell(cid, "done", requests=[RequestRow(0, 10, 5, 0.1, 0.2, [], None, category="code")])
        assert s.requests(cid)[0].category == "code"
    assert rows(old, "select count(*), count(category) from requests")[0] == (25, 1)
