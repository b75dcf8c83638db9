"""Datasets from real files (ShareGPT JSON, JSONL, CSV, Parquet, a `datasets` folder read offline), the shipped
specbench-mini set, length distributions, and the prompts built from them with a real trained tokenizer: exact
counts per prompt mode, categories carried, seeded draws, context clamps, multi-turn history."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest

from paths import ROOT
from run_helpers import make_tokenizer
from specbench.errors import UserError
from specbench.load.datasets import MINI, items, load_dataset
from specbench.load.lengths import parse_length
from specbench.load.prompts import ChatTokenizer
from specbench.load.workload import WorkloadSpec, build_workload

SHAREGPT = [
    {"id": "a", "category": "travel", "conversations": [
        {"from": "human", "value": "Plan a day in Lisbon for someone who likes old trams and bakeries."},
        {"from": "gpt", "value": "Start with tram 28 from Martim Moniz, then pastries in Belem, then the river."},
        {"from": "human", "value": "And if it rains all afternoon?"},
        {"from": "gpt", "value": "Go to the tile museum and the covered market, then a long lunch."},
        {"from": "human", "value": "Which of those is closest to the tram line?"},
        {"from": "gpt", "value": "The covered market is two stops from the end of the line."}]},
    {"id": "b", "conversations": []},  # ShareGPT dumps hold empty conversations: skipped, counted
    {"id": "c", "category": "code", "conversations": [
        {"from": "system", "value": "You are a careful reviewer."},
        {"from": "human", "value": "Why does `for i in range(len(xs)): xs.pop(i)` skip elements?"},
        {"from": "gpt", "value": "Popping shifts the later elements left, so the next index jumps past one."}]},
]


@pytest.fixture(scope="module")
def tok(tmp_path_factory: pytest.TempPathFactory) -> ChatTokenizer:
    return ChatTokenizer.from_dir(make_tokenizer(tmp_path_factory.mktemp("tok")))


def _sharegpt(tmp_path: Path) -> Path:
    p = tmp_path / "conv.json"
    p.write_text(json.dumps(SHAREGPT, indent=2))
    return p


def test_sharegpt_json_records_turns_categories_and_skips(tmp_path: Path) -> None:
    ds = load_dataset(str(_sharegpt(tmp_path)))
    assert len(ds.records) == 2 and ds.skipped == 1
    assert ds.categories == ("code", "travel")
    first = ds.records[0]
    assert [r for r, _ in first.turns] == ["user", "assistant"] * 3 and first.where.endswith("conv.json:2")
    assert ds.records[1].turns[0] == ("system", "You are a careful reviewer.")
    single = items(ds)
    assert [len(i.messages) for i in single] == [1, 2]  # first user turn (after the system turn)
    assert single[0].reply.startswith("Start with tram 28")
    multi = items(ds, multi_turn=True)
    assert [(i.conversation, i.turn, len(i.messages)) for i in multi] == [(0, 0, 1), (0, 1, 3), (0, 2, 5), (1, 0, 2)]
    assert multi[2].messages[-2][1].startswith("Go to the tile museum")
    assert [i.category for i in items(ds, category="code")] == ["code"]
    with pytest.raises(UserError, match="no record of category 'math'; its categories: code, travel"):
        items(ds, category="math")


def test_jsonl_prompt_and_messages_and_csv(tmp_path: Path) -> None:
    j = tmp_path / "d.jsonl"
    j.write_text(json.dumps({"prompt": "Add 2 and 3.", "category": "math", "max_tokens": 12}) + "\n\n"
                 + json.dumps({"messages": [{"role": "user", "content": "Say hi."}], "output_tokens": 5}) + "\n"
                 + json.dumps({"question": "Why is the sky blue?", "answer": "Rayleigh scattering."}) + "\n")
    ds = load_dataset(str(j))
    assert [(r.turns, r.category, r.output_tokens) for r in ds.records] == [
        ((("user", "Add 2 and 3."),), "math", 12), ((("user", "Say hi."),), None, 5),
        ((("user", "Why is the sky blue?"), ("assistant", "Rayleigh scattering.")), None, None)]
    assert ds.records[2].where.endswith("d.jsonl:4")  # blank lines keep the file's numbering
    c = tmp_path / "d.csv"
    with c.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["prompt", "category", "output_tokens"])
        w.writerow(["Write a haiku\nabout rain.", "chat", "40"])  # a quoted field over two lines
        w.writerow(["Sort [3, 1, 2].", "code", ""])
    ds = load_dataset(str(c))
    assert [(r.turns[0][1], r.category, r.output_tokens, r.where.rsplit(":", 1)[1]) for r in ds.records] == [
        ("Write a haiku\nabout rain.", "chat", 40, "2"), ("Sort [3, 1, 2].", "code", None, "4")]


@pytest.mark.parametrize("name,text,where,msg", [
    ("bad.jsonl", '{"prompt": "ok"}\n{"prompt": 3}\n', ":2", "`prompt` must be a string"),
    ("bad.jsonl", '{"prompt": "ok"}\n{"prompt": "x"\n', ":2", "not JSON"),
    ("bad.jsonl", '{"prompt": "ok", "output_tokens": -4}\n', ":1", "whole number >= 1"),
    ("bad.jsonl", '{"text_field": "ok"}\n', ":1", "no prompt"),
    ("bad.json", '[\n  {"conversations": [{"from": "human", "value": "a"}]},\n  {"conversations": '
                 '[{"from": "robot", "value": "b"}]}\n]', ":3", "role 'robot'"),
    ("bad.csv", "question,category\nhi,chat\n", None, None),  # `question` is a prompt column: fine
    ("bad.csv", "text,category\nhi,chat\n", ":1", "header row needs a `prompt` column"),
])
def test_bad_records_name_file_and_line(tmp_path: Path, name: str, text: str, where: str | None,
                                        msg: str | None) -> None:
    p = tmp_path / name
    p.write_text(text)
    if msg is None:
        assert load_dataset(str(p)).records[0].turns == (("user", "hi"),)
        return
    with pytest.raises(UserError) as e:
        load_dataset(str(p))
    assert f"{p}{where}" in str(e.value) and msg in str(e.value) and "\n" not in str(e.value)


def test_specbench_mini_is_shipped_with_four_categories() -> None:
    ds = load_dataset(MINI)
    assert len(ds.records) == 48
    assert {c: sum(r.category == c for r in ds.records) for c in ds.categories} == {
        "chat": 12, "code": 12, "math": 12, "summarisation": 12}
    assert all(r.output_tokens for r in ds.records)
    readme = ROOT / "src/specbench/data/prompts/README.md"
    assert "Apache-2.0" in readme.read_text() and "written for" in readme.read_text()


def test_parquet_through_pyarrow(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    p = tmp_path / "d.parquet"
    pq.write_table(pa.table({"prompt": ["Name three rivers.", "Factor 91."], "category": ["chat", "math"],
                             "output_tokens": [20, 30]}), p)
    ds = load_dataset(str(p))
    assert [(r.turns[0][1], r.category, r.output_tokens) for r in ds.records] == [
        ("Name three rivers.", "chat", 20), ("Factor 91.", "math", 30)]


def test_parquet_and_hf_without_their_packages_are_one_line_errors(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "d.parquet"
    p.write_bytes(b"PAR1")
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow now raises ImportError
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(UserError, match=r"reading Parquet needs pyarrow: pip install 'specbench-llm\[datasets\]'"):
        load_dataset(str(p))
    with pytest.raises(UserError, match=r"needs the `datasets` package: pip install"):
        load_dataset("hf:someone/some-set")


def test_hf_dataset_is_read_offline_from_a_local_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("datasets")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    folder = tmp_path / "local-set"
    folder.mkdir()
    (folder / "train.jsonl").write_text("".join(json.dumps({"prompt": f"Count to {i}.", "category": "math"}) + "\n"
                                                for i in range(3, 6)))
    ds = load_dataset(f"hf:{folder}")
    assert [r.turns[0][1] for r in ds.records] == ["Count to 3.", "Count to 4.", "Count to 5."]
    assert ds.records[0].where == f"hf:{folder}: row 1"
    import os

    assert os.environ["HF_DATASETS_OFFLINE"] == "1" and os.environ["HF_HUB_OFFLINE"] == "1"
    with pytest.raises(UserError, match="not readable from the local cache, offline"):
        load_dataset("hf:specbench-test/surely-not-cached-anywhere")


@pytest.mark.parametrize("text,msg", [("uniform:10", "two numbers"), ("uniform:5,2", "1 <= LO <= HI"),
                                      ("uniform:1.5,4", "whole numbers"), ("normal:0,3", "MEAN >= 1"),
                                      ("normal:10,inf", "finite"), ("gauss:1,2", "not a length distribution")])
def test_length_distribution_errors(text: str, msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        parse_length(text)


@pytest.mark.parametrize("mode", ["chat", "text", "ids"])
def test_fixed_and_drawn_lengths_are_exact_as_the_engine_counts(tok: ChatTokenizer, mode: str) -> None:
    def count(p):  # type: ignore[no-untyped-def]
        if mode == "chat":
            return tok.chat_count(list(p.messages))
        if mode == "text":
            return tok.count(p.text, add_special_tokens=True)
        return len(p.token_ids)

    fixed = build_workload(WorkloadSpec(prompt_tokens=160), n=12, tokenizer=tok, mode=mode,  # type: ignore[arg-type]
                           context_len=4096, margin=0, min_prompt=12)
    assert [count(p) for p in fixed.prompts] == [160] * 12 == [p.n_tokens for p in fixed.prompts]
    assert {p.category for p in fixed.prompts} <= {"chat", "code", "math", "summarisation"}
    ws = WorkloadSpec(prompt_len=parse_length("uniform:30,400"), output_len=parse_length("normal:100,20"), seed=5)
    drawn = build_workload(ws, n=16, tokenizer=tok, mode=mode, context_len=4096, margin=0,  # type: ignore[arg-type]
                           min_prompt=12)
    assert [count(p) for p in drawn.prompts] == [p.n_tokens for p in drawn.prompts]
    assert all(30 <= p.n_tokens <= 400 for p in drawn.prompts) and len({p.n_tokens for p in drawn.prompts}) > 8
    again = build_workload(ws, n=16, tokenizer=tok, mode=mode, context_len=4096, margin=0,  # type: ignore[arg-type]
                           min_prompt=12)
    assert again.prompts == drawn.prompts  # seeded: the same cell sends the same requests on every run
    other = build_workload(WorkloadSpec(prompt_len=ws.prompt_len, output_len=ws.output_len, seed=6), n=16,
                           tokenizer=tok, mode=mode, context_len=4096, margin=0, min_prompt=12)  # type: ignore[arg-type]
    assert other.prompts != drawn.prompts
    assert drawn.clamp_summary()["requests"] == 16 and drawn.clamp_summary()["prompt_tokens_min"] >= 30


def test_data_lengths_category_and_context_clamp(tok: ChatTokenizer) -> None:
    mini = load_dataset(MINI)
    ws = WorkloadSpec(prompt_len=parse_length("data"), output_len=parse_length("data"), category="summarisation")
    w = build_workload(ws, n=12, tokenizer=tok, mode="chat", context_len=4096, margin=0, min_prompt=12)
    assert {p.category for p in w.prompts} == {"summarisation"}
    written = {r.turns[0][1] for r in mini.records if r.category == "summarisation"}
    assert {p.messages[-1]["content"] for p in w.prompts} == written  # sent as written, all 12 once
    assert sorted(p.output_tokens for p in w.prompts) == sorted(
        r.output_tokens for r in mini.records if r.category == "summarisation")
    assert not w.clamp_summary()["clamped"]
    # a 200-token context with 64 output tokens: every prompt is cut to 136 tokens at most
    small = build_workload(WorkloadSpec(prompt_len=parse_length("data"), category="summarisation"), n=12,
                           tokenizer=tok, mode="chat", context_len=200, margin=1, min_prompt=12)
    assert all(tok.chat_count(list(p.messages)) == p.n_tokens <= 135 for p in small.prompts)
    s = small.clamp_summary()
    assert s["clamped"] and s["requests_clamped"] == 12 and s["output_tokens"] == 64
    with pytest.raises(UserError, match='"data" needs a dataset with text'):
        build_workload(WorkloadSpec(dataset="random", prompt_len=parse_length("data")), n=2, tokenizer=tok,
                       mode="chat", context_len=None, margin=0, min_prompt=12)
    with pytest.raises(UserError, match="needs the model's tokenizer"):
        build_workload(WorkloadSpec(), n=2, tokenizer=None, mode="ids", context_len=None, margin=0, min_prompt=1)


def test_multi_turn_replays_history_in_order_and_drops_oldest_turns(tok: ChatTokenizer, tmp_path: Path) -> None:
    ws = WorkloadSpec(dataset=str(_sharegpt(tmp_path)), prompt_len=parse_length("data"), multi_turn=True,
                      output_len=parse_length("data"))
    w = build_workload(ws, n=4, tokenizer=tok, mode="chat", context_len=4096, margin=0, min_prompt=12)
    turns = [[m["role"] for m in p.messages] for p in w.prompts]
    # the travel conversation's three turns follow each other; the code one has its system turn
    travel = [t for t in turns if t[0] == "user"]
    assert travel == [["user"], ["user", "assistant", "user"], ["user", "assistant", "user", "assistant", "user"]]
    assert turns.index(travel[0]) + 2 == turns.index(travel[2])
    assert all(p.output_tokens == tok.count(_reply(p), add_special_tokens=False) for p in w.prompts)
    # too long a history for the context loses its oldest turns first; the newest question stays whole
    last = max(w.prompts, key=lambda p: len(p.messages))
    ctx = last.n_tokens + (last.output_tokens or 0) - 20  # 20 tokens short of the whole history
    tight = build_workload(ws, n=4, tokenizer=tok, mode="chat", context_len=ctx, margin=0, min_prompt=12)
    cut = next(p for p in tight.prompts if p.messages[-1]["content"] == last.messages[-1]["content"])
    assert len(cut.messages) < len(last.messages) and cut.messages[0]["role"] == "user"
    assert tok.chat_count(list(cut.messages)) == cut.n_tokens <= last.n_tokens - 20


REPLIES = {c["conversations"][i]["value"]: c["conversations"][i + 1]["value"] for c in SHAREGPT
           for i in range(len(c["conversations"]) - 1) if c["conversations"][i]["from"] == "human"}


def _reply(p) -> str:  # type: ignore[no-untyped-def]
    return REPLIES[p.messages[-1]["content"]]
