"""The matrix's dataset, workload and sampling keys: file:line errors for bad values, the axes they expand into, cell
ids that follow them and stay unchanged for matrices without them (the committed H200 store's ids), and the request
bodies each API mode sends, recorded by the instant server."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from paths import ROOT
from specbench.errors import UserError
from specbench.load.client import run_load
from specbench.load.prompts import Prompt
from specbench.load.results import LoadSpec
from specbench.matrix.expansion import expand
from specbench.matrix.toml_load import load_matrix, parse_matrix

BASE = """\
engine = "openai"
command = ["python", "-m", "specbench.testing.instant_server"]

[server]
tp = 1

[[server.spec]]
label = "ar"

[[server.spec]]
label = "spec"
algorithm = "draft_model"

[client]
concurrency = [1, 2]
prompt_tokens = 128
output_tokens = 32
"""
CLIENT_LINE = BASE.splitlines().index("[client]") + 1


def _write(tmp_path: Path, extra: str, name: str = "m.toml") -> Path:
    p = tmp_path / name
    p.write_text(BASE + extra)
    return p


def _error(tmp_path: Path, extra: str) -> str:
    p = _write(tmp_path, extra)
    with pytest.raises(UserError) as e:
        load_matrix(p)
    msg = str(e.value)
    assert "\n" not in msg
    return msg


BAD = [
    ("temperature = -0.5", "client.temperature: temperature must be in [0, 2]"),
    ("temperature = nan", "temperature must be a finite number"),
    ("temperature = [0.0, true]", "temperature must be a number, got True"),
    ("top_p = 0", "top_p must be in (0, 1]"),
    ("top_p = [0.9, 1.5]", "top_p must be in (0, 1], got 1.5"),
    ("top_k = 0", "top_k must be -1 (off) or >= 1"),
    ("top_k = 2.5", "top_k must be a whole number"),
    ("seed = -1", "seed must be in [0, 2^63)"),
    ("ignore_eos = 1", "ignore_eos must be true or false"),
    ('stop = [""]', "stop must be a list of non-empty strings"),
    ('stop = [["a"], "b"]', "client.stop"),
    ('prompt_len = "gauss:1,2"', "client.prompt_len: 'gauss:1,2' is not a length distribution"),
    ('output_len = ["fixed", "uniform:9,3"]', "client.output_len: 'uniform:9,3': uniform needs 1 <= LO <= HI"),
    ('category = "poetry"', "dataset 'specbench-mini' has no category 'poetry' (its categories: chat, code, math"),
    ('dataset = "random"\ncategory = "code"', "category needs a dataset with categories"),
    ('dataset = "random"\nprompt_len = "data"', 'prompt_len = "data" needs a dataset with text'),
    ("multi_turn = true", 'multi_turn = true needs prompt_len = "data"'),
    ('dataset = "nowhere.jsonl"', "client.dataset: dataset 'nowhere.jsonl': no such file"),
]


@pytest.mark.parametrize("extra,msg", BAD)
def test_bad_values_name_the_file_line_and_key(tmp_path: Path, extra: str, msg: str) -> None:
    got = _error(tmp_path, extra + "\n")
    key = extra.splitlines()[-1].split("=")[0].strip()
    line = CLIENT_LINE + 3 + len(extra.splitlines())  # the line of the last key written
    assert f"m.toml:{line}: " in got, got
    assert msg in got, got
    assert key in got


def test_a_bad_dataset_file_names_its_own_line_inside_the_matrix_error(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_text('{"prompt": "fine"}\n{"prompt": ["not", "text"]}\n')
    got = _error(tmp_path, 'dataset = "d.jsonl"\n')  # relative: read from the matrix file's folder
    assert f"m.toml:{CLIENT_LINE + 4}: client.dataset: {tmp_path / 'd.jsonl'}:2: `prompt` must be a string" in got


def test_override_client_keys_are_checked_with_their_line(tmp_path: Path) -> None:
    got = _error(tmp_path, '\n[[override]]\nwhen = { spec = "spec" }\nclient = { temperature = 3.0 }\n')
    assert f"m.toml:{CLIENT_LINE + 7}: override[0].client.temperature: " in got and "temperature must be in [0, 2]" in got
    ok = _write(tmp_path, '\n[[override]]\nwhen = { spec = "spec" }\nclient = { category = "code" }\n')
    spec, _ = load_matrix(ok)
    cats = {(c.label, c.client.get("category")) for c in expand(spec)[1]}
    assert cats == {("ar", None), ("spec", "code")}


def test_cell_ids_stay_for_matrices_without_the_new_keys() -> None:
    """The H200 run's store (tests/data) was written before these keys existed: its matrix expands to its ids."""
    run = ROOT / "tests/data/h200-run-sglang-0.5.15.post1/h200.db"
    con = sqlite3.connect(run)
    stored = sorted(r[0] for r in con.execute("select cell_id from cells"))
    con.close()
    spec, _ = load_matrix(ROOT / "examples/h200-sglang-ar-vs-mtp.toml")
    assert sorted(c.cell_id for c in expand(spec)[1]) == stored


def test_sampling_and_workload_values_change_the_identity_defaults_do_not(tmp_path: Path) -> None:
    def ids(extra: str) -> list[str]:
        return [c.cell_id for c in expand(parse_matrix(BASE + extra))[1]]

    plain = ids("")
    assert ids('temperature = 0.0\nignore_eos = true\nprompt_len = "fixed"\nmulti_turn = false\n') == plain
    hot = ids("temperature = 0.7\n")
    assert len(hot) == len(plain) and not set(hot) & set(plain)
    for extra in ("top_p = 0.9\n", "top_k = 20\n", "seed = 1\n", "ignore_eos = false\n", 'stop = ["\\n\\n"]\n',
                  'category = "code"\n', 'prompt_len = "uniform:64,256"\n', 'output_len = "data"\n'):
        assert not set(ids(extra)) & set(plain), extra
    both = expand(parse_matrix(BASE + "temperature = [0.0, 0.7]\n"))[1]
    assert {c.cell_id for c in both} == set(plain) | set(hot)
    assert {c.client["temperature"] for c in both} == {0.0, 0.7}  # recorded with the cell


def test_axes_expand_and_stop_is_an_axis_only_as_a_list_of_lists() -> None:
    cells = expand(parse_matrix(BASE + 'category = ["code", "math"]\ntop_k = [-1, 20]\nstop = ["###", "\\n\\n"]\n'))[1]
    assert len(cells) == 2 * 2 * 2 * 2  # spec x concurrency x category x top_k
    assert {tuple(c.client["stop"]) for c in cells} == {("###", "\n\n")}
    cells = expand(parse_matrix(BASE + 'stop = [["###"], ["\\n\\n", "END"]]\n'))[1]
    assert {tuple(c.client["stop"]) for c in cells} == {("###",), ("\n\n", "END")}
    # every category / sampling value has its own autoregressive baseline
    keys = {c.baseline_key for c in expand(parse_matrix(BASE + 'category = ["code", "math"]\n'))[1]}
    assert len(keys) == 2 * 2


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    rec = tmp_path_factory.mktemp("rec") / "bodies.jsonl"
    p = subprocess.Popen([sys.executable, "-m", "specbench.testing.instant_server", "--port", "0", "--record",
                          str(rec)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline() if p.stdout else ""
        assert line.startswith("READY "), line
        yield f"http://127.0.0.1:{int(line.split()[1])}", rec
    finally:
        p.terminate()
        p.wait(timeout=10)


def _sent(rec: Path, path: str) -> list[dict]:  # type: ignore[type-arg]
    return [x["body"] for x in map(json.loads, rec.read_text().splitlines()) if x["path"] == path]


@pytest.mark.parametrize("api,path,prompt", [
    ("completions", "/v1/completions", Prompt(5, text="Hello there, friend.", output_tokens=7)),
    ("chat", "/v1/chat/completions", Prompt(9, messages=({"role": "user", "content": "Hi"},), output_tokens=7)),
    ("generate", "/generate", Prompt(4, token_ids=(5, 6, 7, 8), output_tokens=7)),
])
def test_request_bodies_carry_the_sampling_of_each_api(recording, api: str, path: str, prompt: Prompt) -> None:  # type: ignore[no-untyped-def]
    url, rec = recording
    spec = LoadSpec(base_url=url, api=api, model="instant", output_tokens=99, num_requests=2,  # type: ignore[arg-type]
                    temperature=0.6, top_p=0.95, top_k=20, sampling_seed=1234, ignore_eos=False, stop=("###",))
    run = run_load(spec, [prompt])
    assert all(r.ok and r.output_tokens == 7 for r in run.results)  # the prompt's own length wins
    body = _sent(rec, path)[-1]
    if api == "generate":
        assert body["sampling_params"] == {"max_new_tokens": 7, "temperature": 0.6, "top_p": 0.95, "top_k": 20,
                                           "sampling_seed": 1234, "stop": ["###"]}
        assert body["input_ids"] == [5, 6, 7, 8]
    else:
        got = {k: body[k] for k in ("max_tokens", "temperature", "top_p", "top_k", "seed", "stop")}
        assert got == {"max_tokens": 7, "temperature": 0.6, "top_p": 0.95, "top_k": 20, "seed": 1234,
                       "stop": ["###"]}
        assert "ignore_eos" not in body  # off: left out (both engines' default is false)
    default = LoadSpec(base_url=url, api=api, model="instant", output_tokens=3, num_requests=1)  # type: ignore[arg-type]
    run_load(default, [Prompt(prompt.n_tokens, text=prompt.text, messages=prompt.messages,
                              token_ids=prompt.token_ids)])
    body = _sent(rec, path)[-1]
    sampling = body["sampling_params"] if api == "generate" else body
    assert sampling["temperature"] == 0.0 and sampling["ignore_eos"] is True  # what the client always sent
    assert not {"top_p", "top_k", "seed", "sampling_seed", "stop"} & set(sampling)


def test_load_spec_refuses_impossible_sampling() -> None:
    with pytest.raises(UserError, match="top_p must be in"):
        LoadSpec(base_url="http://127.0.0.1:1", top_p=0.0)
    with pytest.raises(UserError, match="stop must be a list of non-empty strings"):
        LoadSpec(base_url="http://127.0.0.1:1", stop=("",))


def test_an_override_category_is_checked_against_the_cells_dataset_before_anything_boots(tmp_path: Path) -> None:
    """The override sets only `category`, so its table is checked without the dataset (client_checks.SKIP); the
    expanded cell has both, and a category the dataset lacks is refused there: by `run --dry-run`, one line."""
    p = _write(tmp_path, 'dataset = "specbench-mini"\n\n[[override]]\nwhen = { spec = "spec" }\n'
                         'client = { category = "zzz" }\n')
    spec, _ = load_matrix(p)
    with pytest.raises(UserError, match=r"cell 'spec' .*client: dataset 'specbench-mini' has no category 'zzz' "
                                        r"\(its categories: chat, code, math, summarisation\)"):
        expand(spec)
    r = subprocess.run([sys.executable, "-m", "specbench", "run", str(p), "--store", str(tmp_path / "s.db"),
                        "--dry-run"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "has no category 'zzz'" in r.stderr and not (tmp_path / "s.db").exists()
