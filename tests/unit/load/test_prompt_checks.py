"""Random-token prompts with a real drafter (load/prompt_checks.py): which shipped examples warn and which do not,
the warning in `specbench run --dry-run` (text and --json) and before a real run, and on the H200 stores as the report
reads them (each cell's stored client and server settings)."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

from proc_helpers import free_port
from run_helpers import ROOT, _matrix_head, cli, make_tokenizer
from specbench.load.prompt_checks import random_prompts_warning
from specbench.matrix.expansion import expand
from specbench.matrix.toml_load import load_matrix

# example -> the labels whose cells warn: random prompts and a drafter of its own (the simulated-acceptance ones and
# the examples on a real dataset never do)
EXAMPLES = {
    "datasets-sampling.toml": set(),
    "demo-tiny.toml": set(),
    "demo.toml": set(),
    "h100-sglang-qwen3-8b-context.toml": set(),
    "h100-sglang-qwen3-8b-decide.toml": set(),
    "h100-sglang-qwen3-8b-dflash.toml": {"dflash16"},  # dummy weights measure the block draft's step, said
    "h100-sglang-qwen3-8b-dflash8.toml": {"dflash8"},
    "h100-sglang-qwen3-8b-fp8kv.toml": set(),
    "h100-sglang-qwen3-8b-c64.toml": set(),
    "h100-sglang-qwen3-8b-tree8.toml": set(),
    "h100-sglang-qwen3-moe-eagle3.toml": set(),  # simulated acceptance only
    "h100-sglang-qwen3-moe-uniform.toml": set(),  # simulated acceptance only
    "h100-sglang-qwen3-moe-uniform-long.toml": set(),  # simulated acceptance only
    "h100-sglang-qwen3-32b-eagle3.toml": set(),  # simulated acceptance only
    "h100-sglang-qwen36-27b-hybrid.toml": {"dflash16", "dflash8"},
    "h200-sglang-qwen36-27b-hybrid.toml": {"dflash16", "dflash8"},
    "h200-sglang-ar-vs-mtp.toml": {"mtp"},
    "h200-sglang-eagle3.toml": {"eagle3"},
    "h200-sglang-qwen3-8b-eagle3.toml": set(),
    "h200-sglang-qwen3-moe-eagle3.toml": set(),
    "h200-sglang-simulated-acceptance.toml": set(),
    "qwen36-27b-dflash-ddtree.toml": set(),
}


def test_every_shipped_example_is_listed() -> None:
    assert {p.name for p in (ROOT / "examples").glob("*.toml")} == set(EXAMPLES)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_which_shipped_examples_warn(name: str) -> None:
    spec, _ = load_matrix(ROOT / "examples" / name)
    warned: dict[str, set[str | None]] = {}
    for c in expand(spec)[1]:
        warned.setdefault(c.label, set()).add(random_prompts_warning(c.client, c.server))
    assert {label for label, w in warned.items() if w != {None}} == EXAMPLES[name]
    for label in EXAMPLES[name]:  # every cell of a warned server, with the drafter and both ways out named
        (text,) = warned[label]
        assert text is not None and "random" in text and "simulated_accept_len" in text and "real dataset" in text


def test_the_rule() -> None:
    spec_server = {"algorithm": "ngram", "label": "ngram"}
    assert random_prompts_warning({"dataset": "random"}, spec_server) is not None
    assert "ngram" in (random_prompts_warning({"dataset": "random"}, spec_server) or "")
    assert random_prompts_warning({"dataset": "specbench-mini"}, spec_server) is None
    assert random_prompts_warning({"dataset": "prompts.jsonl"}, spec_server) is None
    assert random_prompts_warning({}, spec_server) is None  # no dataset key: the default, specbench-mini
    assert random_prompts_warning({"dataset": "random"}, {"algorithm": "ar"}) is None
    assert random_prompts_warning({"dataset": "random"}, {}) is None
    assert random_prompts_warning({"dataset": "random"}, {**spec_server, "simulated_accept_len": 2.0}) is None
    assert random_prompts_warning({"dataset": "random"}, {**spec_server, "simulated_accept_len": None}) is not None


def test_the_dry_run_says_it_once_per_server_and_in_json() -> None:
    example = str(ROOT / "examples" / "h200-sglang-eagle3.toml")
    r = cli("run", "--dry-run", "--json", example)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    by_label: dict[str, set[str | None]] = {}
    for row in rows:
        by_label.setdefault(row["label"], set()).add(row["prompts_warning"])
    assert by_label["ar"] == by_label["eagle3-sim2.5"] == {None}
    (text,) = by_label["eagle3"]
    assert text is not None and "EAGLE3" in text
    r = cli("run", "--dry-run", example)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count(f"warning: {text}") == 1  # under the server's first cell, not under each of its 4


@pytest.mark.slow  # a whole `specbench run` (make test-fast leaves it out)
def test_a_run_warns_before_anything_boots(tmp_path: Path) -> None:
    """A real run (instant server) of random prompts: the drafting server is named once on stderr, the
    autoregressive one not; the cells still run."""
    tok = make_tokenizer(tmp_path / "tok")
    cmd = [sys.executable, "-m", "specbench.testing.instant_server"]
    m = tmp_path / "m.toml"
    m.write_text(_matrix_head("random", cmd, free_port(), tok, ready_s=30, stop_s=5) + """
[[server.spec]]
label = "ar"

[[server.spec]]
label = "drafted"
algorithm = "draft_model"

[client]
concurrency = [1, 2]
prompt_tokens = 24
output_tokens = 8
num_requests = 2
warmup_requests = 0
dataset = "random"
""")
    r = cli("run", str(m), "--store", str(tmp_path / "r.sqlite"), "--no-progress")
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [line for line in r.stderr.splitlines() if "random tokens" in line]
    assert len(lines) == 1 and "drafted tp=1" in lines[0] and "draft_model" in lines[0]


def _stored(path: Path) -> list[tuple[str, dict, dict]]:
    conn = sqlite3.connect(f"file:{path}?immutable=1", uri=True)  # read only: the fixture's files stay as they are
    try:
        return [(label, json.loads(c), json.loads(s))
                for label, c, s in conn.execute("SELECT label, client_json, server_json FROM cells")]
    finally:
        conn.close()


def test_the_h200_stores_as_the_report_reads_them() -> None:
    data = ROOT / "tests" / "data"
    warned = {}
    for store in sorted(data.glob("h200-*/*.db")):
        for label, client, server in _stored(store):
            warned.setdefault((store.name, label), set()).add(random_prompts_warning(client, server) is not None)
    assert {k for k, v in warned.items() if v == {True}} == {("h200.db", "mtp"), ("h200-eagle3.db", "eagle3")}
    assert all(len(v) == 1 for v in warned.values())
    assert len(warned) == 17  # every configuration of the five stores was looked at
