"""The API key leaves the engine's argv (`ps` shows argv to every user) where the engine reads it elsewhere (#23):
vLLM from VLLM_API_KEY (entrypoints/serve/middleware/register.py@0.32.0), SGLang from a `--config` YAML file
(server_args.py::prepare_server_args@0.5.15.post1), written 0600 in a private folder; an OpenAI-compatible server of
unknown kind keeps its flag. The client's key: the matrix's `api_key`, else the launch command's."""

from __future__ import annotations

import stat
from pathlib import Path

from specbench.engines import server_auth
from specbench.engines.openai.server import OpenAIServer
from specbench.engines.sglang.launch import SglangServer
from specbench.engines.vllm.launch import VllmServer


def test_vllm_reads_the_key_from_its_environment(tmp_path: Path) -> None:
    argv, env = VllmServer().private_launch(["vllm", "serve", "m", "--api-key", "k-123456"], {"X": "1"}, tmp_path)
    assert argv == ["vllm", "serve", "m"] and env == {"X": "1", "VLLM_API_KEY": "k-123456"}
    two = ["vllm", "serve", "m", "--api-key", "a-1234", "--api-key=b-5678"]
    assert VllmServer().private_launch(two, {}, tmp_path) == (two, {})  # the variable holds one key


def test_sglang_reads_the_key_from_a_private_config_file(tmp_path: Path) -> None:
    argv, env = SglangServer().private_launch(["python", "-m", "sglang.launch_server", "--model-path", "m",
                                               "--api-key", "k-123456", "--admin-api-key=adm-9876"], {}, tmp_path)
    assert "k-123456" not in " ".join(argv) and "adm-9876" not in " ".join(argv)
    cfg = Path(argv[argv.index("--config") + 1])
    assert cfg.parent == tmp_path and stat.S_IMODE(cfg.stat().st_mode) == 0o600
    assert cfg.read_text() == 'api-key: "k-123456"\nadmin-api-key: "adm-9876"\n'
    own = ["python", "-m", "sglang.launch_server", "--config", "mine.yaml", "--api-key", "k-1"]
    assert SglangServer().private_launch(own, {}, tmp_path) == (own, {})  # one --config only


def test_an_unknown_server_keeps_its_flag(tmp_path: Path) -> None:
    argv = ["my-server", "--api-key", "k-123456"]
    assert OpenAIServer().private_launch(argv, {}, tmp_path) == (argv, {})


def test_the_launch_key_and_the_header() -> None:
    assert server_auth.launch_key(["x", "--api-key", "a-1", "--api-key=b-2"]) == "b-2"
    assert server_auth.launch_key(["x"]) is None
    assert server_auth.headers() == {}
    with server_auth.using("k-1"):
        assert server_auth.headers() == {"Authorization": "Bearer k-1"}
    assert server_auth.headers() == {}
