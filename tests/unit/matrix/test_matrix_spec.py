"""The matrix schema: errors that name file, line and key; expansion into tuples and cells; stable ids."""

from __future__ import annotations

from pathlib import Path

import pytest

from paths import ROOT
from specbench.errors import UserError
from specbench.matrix.adapters import adapter_for
from specbench.matrix.expansion import expand
from specbench.matrix.toml_load import key_lines, load_matrix, parse_matrix

EXAMPLES = ROOT / "examples"

BASE = """\
engine = "sglang"
command = ["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3.6-27B"]

[server]
tp = [1, 4]
max_running_requests = 8
env = { SGLANG_ENABLE_SPEC_V2 = "1" }

[[server.spec]]
label = "ar"

[[server.spec]]
algorithm = "DDTREE"
draft_model = "z-lab/draft"
ddtree_budget = [8, 16]

[client]
concurrency = [1, 2]
prompt_tokens = 128
output_tokens = 32

[[override]]
when = { tp = 1 }
server = { max_running_requests = 4 }
"""


def _error(text: str, source: str = "m.toml") -> str:
    with pytest.raises(UserError) as exc:
        parse_matrix(text, source)
    return str(exc.value)


def test_error_names_file_line_and_key_in_an_array_of_tables() -> None:
    text = BASE.replace('ddtree_budget = [8, 16]', 'ddtree_budget = [8, 16]\nbudgett = 3')
    msg = _error(text)
    # line 16 holds `budgett`, inside the second [[server.spec]]
    assert "m.toml:16: server.spec[1].budgett: Extra inputs are not permitted" in msg


def test_error_for_a_bad_value_points_at_its_line() -> None:
    msg = _error(BASE.replace("tp = [1, 4]", "tp = [1, 0]"))
    assert msg.startswith("m.toml:5: server.tp")
    assert "tp must be >= 1, got 0" in msg


def test_error_in_a_client_table_and_several_errors_at_once() -> None:
    text = BASE.replace("concurrency = [1, 2]", "concurrency = -3").replace("output_tokens = 32", 'output_tokens = "x"')
    msg = _error(text)
    assert "m.toml:18: client.concurrency: must be >= 1, got -3" in msg
    assert "m.toml:20: client.output_tokens" in msg


def test_toml_syntax_error_names_the_line() -> None:
    msg = _error(BASE.replace("tp = [1, 4]", "tp = [1, 4"))
    assert msg.startswith("m.toml: not valid TOML")
    assert "line" in msg


def test_missing_file_and_missing_command_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such matrix file"):
        load_matrix(tmp_path / "absent.toml")
    msg = _error('engine = "vllm"\n')
    assert "needs `command`" in msg


def test_spec_v2_on_an_autoregressive_variant_is_refused() -> None:
    text = BASE.replace('label = "ar"', 'label = "ar"\nenv = { SGLANG_ENABLE_SPEC_V2 = "1" }')
    assert "must not be set for an autoregressive variant" in _error(text)


def test_unknown_override_key_is_refused() -> None:
    text = BASE.replace("server = { max_running_requests = 4 }", "server = { max_running_request = 4 }")
    msg = _error(text)
    assert "m.toml:24: override[0].server: unknown `server` key 'max_running_request'" in msg


def test_key_lines_follow_tables_arrays_and_inline_tables() -> None:
    lines = key_lines(BASE)
    assert lines[("engine",)] == 1
    assert lines[("server", "tp")] == 5
    assert lines[("server", "env")] == 7
    assert lines[("server", "spec", 0, "label")] == 10
    assert lines[("server", "spec", 1, "ddtree_budget")] == 15
    assert lines[("override", 0, "when")] == 23


def test_expansion_phases_overrides_and_labels() -> None:
    spec = parse_matrix(BASE)
    tuples, cells = expand(spec)
    assert [(t.phase, t.tp, t.label) for t in tuples] == [
        (1, 1, "ar"), (1, 1, "ddtree-b8"), (1, 1, "ddtree-b16"),
        (2, 4, "ar"), (2, 4, "ddtree-b8"), (2, 4, "ddtree-b16"),
    ]
    assert [t.settings["max_running_requests"] for t in tuples] == [4, 4, 4, 8, 8, 8]
    assert len(cells) == 6 * 2
    assert {c.client["concurrency"] for c in cells} == {1, 2}
    # the operator's global SPEC_V2 never reaches an autoregressive server
    for t in tuples:
        assert ("SGLANG_ENABLE_SPEC_V2" in t.settings["env"]) == (not t.is_ar)


def test_ids_are_stable_and_follow_the_settings() -> None:
    a = expand(parse_matrix(BASE))
    b = expand(parse_matrix("# a comment moves every line\n" + BASE))
    assert [c.cell_id for c in a[1]] == [c.cell_id for c in b[1]]
    assert [t.server_id for t in a[0]] == [t.server_id for t in b[0]]
    changed = expand(parse_matrix(BASE.replace("output_tokens = 32", "output_tokens = 64")))
    assert [t.server_id for t in changed[0]] == [t.server_id for t in a[0]]  # server side unchanged
    assert not set(c.cell_id for c in changed[1]) & set(c.cell_id for c in a[1])
    assert len({c.cell_id for c in a[1]}) == len(a[1])


def test_matrix_values_stay_single_argv_words() -> None:
    text = BASE.replace('draft_model = "z-lab/draft"', 'draft_model = "z lab/draft; rm -rf /tmp/x"')
    spec = parse_matrix(text)
    tuples, _ = expand(spec)
    launch = adapter_for(spec).launch(spec.target(), tuples[1].settings)
    i = launch.argv.index("--speculative-draft-model-path")
    assert launch.argv[i + 1] == "z lab/draft; rm -rf /tmp/x"
    assert launch.argv[launch.argv.index("--host") + 1] == "127.0.0.1"


def test_sglang_argv_replaces_flags_of_the_base_command() -> None:
    text = BASE.replace('"Qwen/Qwen3.6-27B"]', '"Qwen/Qwen3.6-27B", "--tp", "2", "--port=1234"]')
    spec = parse_matrix(text)
    tuples, _ = expand(spec)
    argv = adapter_for(spec).launch(spec.target(), tuples[3].settings).argv
    assert "--tp" not in argv and "--port=1234" not in argv
    assert argv[argv.index("--tp-size") + 1] == "4"
    assert argv[argv.index("--port") + 1] == "30000"
    assert not any(w.startswith("--speculative") for w in argv)  # tuples[3] is AR


def test_examples_parse() -> None:
    for name in ("demo.toml", "demo-tiny.toml", "qwen36-27b-dflash-ddtree.toml"):
        spec, _ = load_matrix(EXAMPLES / name)
        tuples, cells = expand(spec)
        assert tuples and cells
    spec, _ = load_matrix(EXAMPLES / "qwen36-27b-dflash-ddtree.toml")
    tuples, cells = expand(spec)
    tp1 = [t for t in tuples if t.tp == 1]
    assert all(t.settings["max_running_requests"] == 8 for t in tp1)  # the operator's original value
    assert sorted({t.tp for t in tuples}) == [1, 4, 8]
    assert {c.client["concurrency"] for c in cells} == {1, 2, 4, 8}


VLLM = """\
engine = "vllm"
command = ["vllm", "serve", "Qwen/Qwen3-8B", "-tp", "2", "--max-num-seqs", "256"]
host = "0.0.0.0"
port = 8123

[server]
tp = [1, 2]
mem_fraction_static = 0.9
max_running_requests = 64
context_length = 8192
env = { VLLM_LOGGING_LEVEL = ["INFO", "DEBUG"] }

[[server.spec]]
label = "ar"

[[server.spec]]
label = "eagle3-k{num_draft_tokens}"
algorithm = "eagle3"
draft_model = "org/eagle3-draft"
num_draft_tokens = [2, 4]
"""


def test_vllm_argv_and_env_axes() -> None:
    spec = parse_matrix(VLLM)
    tuples, cells = expand(spec)
    assert len(tuples) == 2 * 3 * 2  # tp x (ar + 2 draft counts) x env values
    assert [t.label for t in tuples[:6]] == ["ar", "ar", "eagle3-k2", "eagle3-k2", "eagle3-k4", "eagle3-k4"]
    adapter = adapter_for(spec)
    spec_tuple = next(t for t in tuples if t.label == "eagle3-k4" and t.tp == 2)
    launch = adapter.launch(spec.target(), spec_tuple.settings)
    argv = launch.argv
    assert "-tp" not in argv and argv[argv.index("--tensor-parallel-size") + 1] == "2"
    assert argv.count("--max-num-seqs") == 1 and argv[argv.index("--max-num-seqs") + 1] == "64"
    assert argv[argv.index("--gpu-memory-utilization") + 1] == "0.9"
    assert argv[argv.index("--max-model-len") + 1] == "8192"
    import json

    cfg = json.loads(argv[argv.index("--speculative-config") + 1])
    assert cfg == {"method": "eagle3", "model": "org/eagle3-draft", "num_speculative_tokens": 4}
    assert argv[argv.index("--host") + 1] == "0.0.0.0"
    assert launch.env["VLLM_LOGGING_LEVEL"] in ("INFO", "DEBUG")
    ar = adapter.launch(spec.target(), tuples[0].settings).argv
    assert "--speculative-config" not in ar



def test_unknown_dataset_is_refused_not_ignored() -> None:
    msg = _error(BASE.replace("prompt_tokens = 128", 'prompt_tokens = 128\ndataset = ["random", "sharegpt"]'))
    assert "m.toml:20: client.dataset: unknown dataset 'sharegpt'" in msg


def test_the_tokenizer_is_found_from_the_launch_command(tmp_path: Path) -> None:
    from specbench.matrix.adapters import command_model, local_tokenizer_dir

    assert command_model(["python", "-m", "sglang.launch_server", "--model-path", "a/b"]) == "a/b"
    assert command_model(["vllm", "serve", "org/m", "--port", "1"]) == "org/m"
    assert command_model(["x", "--model=/m"]) == "/m"
    (tmp_path / "tokenizer.json").write_text("{}")
    spec = parse_matrix(BASE.replace('"Qwen/Qwen3.6-27B"]', f'"{tmp_path}"]'))
    assert local_tokenizer_dir(spec) == str(tmp_path)
    assert local_tokenizer_dir(parse_matrix(BASE.replace('"Qwen/Qwen3.6-27B"]', '"/no/such/model"]'))) is None
