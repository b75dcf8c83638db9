"""The warm-up a cell gets (matrix/warmup.py): the asked `warmup_requests`, raised to one full wave the first time a
boot runs a concurrency in a closed loop; a real `specbench run` against the instant server, which records every
request it receives (`--record`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from proc_helpers import free_port
from run_helpers import _matrix_head, make_tokenizer
from run_helpers import cli as _cli
from specbench.matrix.warmup import warmup_count, warmup_prompts


def test_a_full_wave_once_per_concurrency_per_boot():
    warmed: set[int] = set()
    c16 = {"concurrency": 16, "warmup_requests": 2, "request_rate": "inf"}
    assert warmup_prompts(c16) == 16
    assert warmup_count(c16, warmed) == 16 and warmed == {16}
    assert warmup_count(c16, warmed) == 2  # the next cell at 16 on this boot: warm already
    assert warmup_count({**c16, "concurrency": 32}, warmed) == 32
    assert warmup_count({**c16, "warmup_requests": 40}, set()) == 40  # more asked: kept
    # none asked: none; a rate cell: its batch is not the concurrency, the asked count stands
    assert warmup_count({**c16, "warmup_requests": 0}, set()) == 0 == warmup_prompts({**c16, "warmup_requests": 0})
    assert warmup_count({**c16, "request_rate": 4.0}, set()) == 2 == warmup_prompts({**c16, "request_rate": 4.0})
    assert warmup_count({"concurrency": 8, "warmup_requests": 1}, set()) == 8  # request_rate unset: closed loop
    assert warmup_count({**c16, "request_rate": float("inf")}, set()) == 16  # infinity as a number: closed loop
    assert warmup_count({**c16, "request_rate": " INF "}, set()) == 16


@pytest.mark.slow  # a whole `specbench run` (make test-fast leaves it out)
def test_the_runner_warms_the_first_cell_of_each_concurrency_with_a_full_wave(tmp_path: Path):
    tok = make_tokenizer(tmp_path / "tok")
    record = tmp_path / "posts.jsonl"
    cmd = [sys.executable, "-m", "specbench.testing.instant_server", "--burst", "1", "--record", str(record)]
    m = tmp_path / "m.toml"
    m.write_text(_matrix_head("w", cmd, free_port(), tok, ready_s=30, stop_s=5) + """
[server]
tp = 1

[[server.spec]]
label = "ar"

[client]
concurrency = [4]
prompt_tokens = [24, 32]
output_tokens = 8
num_requests = 4
warmup_requests = 1
""")
    store = tmp_path / "r.sqlite"
    r = _cli("run", str(m), "--store", str(store), "--no-progress", "--json")
    assert r.returncode == 0, r.stderr
    assert [x["status"] for x in json.loads(r.stdout)] == ["done", "done"]
    posts = [json.loads(line)["body"] for line in record.read_text().splitlines() if line.strip()]
    posts = [p for p in posts if p.get("max_tokens") == 8]  # the cells' (the readiness probe asks for 2)
    # the first cell at c = 4: a wave of 4 before its 4 measured; the second at c = 4 on the same boot: the asked 1
    assert len(posts) == (4 + 4) + (1 + 4)
    # the warm-up prompts are not the measured ones (a prefix cache holds none of them)
    def prompt(p: dict) -> str:
        return json.dumps(p.get("prompt") or p.get("messages"), sort_keys=True)
    first = [prompt(p) for p in posts[:8]]
    assert len(set(first[:4]) & set(first[4:])) == 0


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
