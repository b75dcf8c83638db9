"""Models resolved by name as the engines do (local folder -> HF cache -> Hub -> bundled), against a stand-in Hub on
127.0.0.1 (tests/hub_server.py) that serves config files and real safetensors files written here with the
`safetensors` library; the plans are real `specbench plan` processes with HF_ENDPOINT / HF_HOME / HF_HUB_OFFLINE
set as a user would (huggingface_hub reads them at import)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from safetensors.numpy import save

from hub_server import FakeHub, HubServer
from paths import ROOT

GIB = 2**30
# a small Qwen3 (real field names; shapes small enough to write real tensors)
CFG = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 64, "intermediate_size": 128,
       "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
       "vocab_size": 1000, "max_position_embeddings": 4096, "torch_dtype": "bfloat16", "tie_word_embeddings": False,
       "rms_norm_eps": 1e-6, "rope_theta": 1000000}


def qwen3_tensors(cfg: dict, dtype=np.float16) -> dict[str, np.ndarray]:
    h, i, nq, nkv, hd, v = (cfg[k] for k in ("hidden_size", "intermediate_size", "num_attention_heads",
                                             "num_key_value_heads", "head_dim", "vocab_size"))
    t = {"model.embed_tokens.weight": (v, h), "lm_head.weight": (v, h), "model.norm.weight": (h,)}
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        t |= {p + "self_attn.q_proj.weight": (nq * hd, h), p + "self_attn.k_proj.weight": (nkv * hd, h),
              p + "self_attn.v_proj.weight": (nkv * hd, h), p + "self_attn.o_proj.weight": (h, nq * hd),
              p + "self_attn.q_norm.weight": (hd,), p + "self_attn.k_norm.weight": (hd,),
              p + "mlp.gate_proj.weight": (i, h), p + "mlp.up_proj.weight": (i, h), p + "mlp.down_proj.weight": (h, i),
              p + "input_layernorm.weight": (h,), p + "post_attention_layernorm.weight": (h,)}
    return {k: np.zeros(s, dtype=dtype) for k, s in t.items()}


def expected_bytes(cfg: dict, tp: int) -> int:
    """By hand from the sharding rules: column/row linears 1/tp, KV heads replicated below tp, vocab padded to 64."""
    h, i, nq, nkv, hd, v = (cfg[k] for k in ("hidden_size", "intermediate_size", "num_attention_heads",
                                             "num_key_value_heads", "head_dim", "vocab_size"))
    pad_v = -(-v // 64) * 64
    kv_heads = max(1, nkv // tp)
    per_layer = (nq * hd * h // tp + 2 * kv_heads * hd * h + h * nq * hd // tp + 3 * i * h // tp + 2 * hd + 2 * h)
    return 2 * (2 * (pad_v // tp) * h + h + cfg["num_hidden_layers"] * per_layer)


@pytest.fixture
def hub():
    h = FakeHub()
    with HubServer(h) as srv:
        yield h, srv


@pytest.fixture
def env(tmp_path, hub):
    _h, srv = hub
    e = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    e |= {"HF_ENDPOINT": srv.url, "HF_HOME": str(tmp_path / "hf"), "SPECBENCH_CACHE_DIR": str(tmp_path / "sb"),
          "PYTHONPATH": str(ROOT / "src"), "HF_HUB_DISABLE_TELEMETRY": "1"}
    return e


def plan(env: dict, *command: str, extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "specbench", "plan", "--json", "--no-fixes", *extra, "--", *command],
                          env=env, capture_output=True, text=True, cwd=ROOT, timeout=120)


def _st(cfg: dict) -> bytes:
    return save(qwen3_tensors(cfg))


def test_a_model_not_bundled_resolves_through_the_hub_then_offline_from_the_cache(hub, env):
    h, _srv = hub
    h.add("someorg/NotBundled-8B", {"config.json": json.dumps(CFG).encode(), "model.safetensors": _st(CFG)})
    cmd = ("python", "-m", "sglang.launch_server", "--model-path", "someorg/NotBundled-8B", "--tp", "2")
    p = plan(env, *cmd)
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["model_source"] == "hub" and d["weights_source"] == "safetensors headers"
    assert d["weights_gib"] == round(expected_bytes(CFG, 2) / GIB, 3)
    assert ("GET", "/someorg/NotBundled-8B/resolve/" + h.repos["someorg/NotBundled-8B"].refs["main"]
            + "/model.safetensors", "bytes=0-100000") in h.log  # the header only, by a range request
    assert not any(m == "GET" and f.endswith(".safetensors") and r is None for m, f, r in h.log)
    n = len(h.log)
    p2 = plan(env | {"HF_HUB_OFFLINE": "1"}, *cmd)
    assert p2.returncode == 0, p2.stderr
    d2 = json.loads(p2.stdout)
    assert d2["model_source"] == "hf cache" and d2["weights_source"] == "safetensors headers"
    assert d2["weights_gib"] == d["weights_gib"] and d2["kv_tokens"] == d["kv_tokens"]
    assert len(h.log) == n  # offline: not one request


def test_offline_and_not_bundled_is_one_line_naming_what_was_tried(env):
    p = plan(env | {"HF_HUB_OFFLINE": "1"}, "python", "-m", "sglang.launch_server", "--model-path",
             "someorg/NotBundled-8B")
    assert p.returncode == 2
    line = p.stderr.strip()
    assert "\n" not in line and line.startswith("specbench: error: cannot find a config for 'someorg/NotBundled-8B'")
    if "--json" in p.args:  # a JSON reader gets the same line as JSON on stdout (issue 36)
        assert json.loads(p.stdout) == {"status": "error", "error": line.removeprefix("specbench: error: ")}
    else:
        assert p.stdout == ""
    for tried in ("not in the HF cache", "HF_HUB_OFFLINE is set", "not a bundled name"):
        assert tried in line


def test_a_repo_the_hub_does_not_have_says_so(env):
    p = plan(env, "vllm", "serve", "someorg/Missing-1B")
    assert p.returncode == 2 and "\n" not in p.stderr.strip()
    assert "the Hub (" in p.stderr and "answered" in p.stderr


def test_the_commands_revision_picks_the_commit(hub, env):
    h, _srv = hub
    v2 = CFG | {"num_hidden_layers": 3}
    h.add("someorg/Rev-1B", {"config.json": json.dumps(CFG).encode(), "model.safetensors": _st(CFG)})
    h.add("someorg/Rev-1B", {"config.json": json.dumps(v2).encode(), "model.safetensors": _st(v2)}, ref="v2")
    main = json.loads(plan(env, "vllm", "serve", "someorg/Rev-1B").stdout)
    p = plan(env, "vllm", "serve", "someorg/Rev-1B", "--revision", "v2")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert "2 layers" in main["model_kind"] and "3 layers" in d["model_kind"]
    assert d["budget"]["weights_source"] == "safetensors headers"
    assert d["budget"]["weights_gib"] == round(expected_bytes(v2, 1) / GIB, 3)
    assert any("/resolve/v2/config.json" in f for _m, f, _r in h.log)


def test_sharded_checkpoint_reads_every_shard_header(hub, env):
    h, _srv = hub
    t = qwen3_tensors(CFG)
    names = sorted(t)
    a, b = names[: len(names) // 2], names[len(names) // 2:]
    index = {"metadata": {}, "weight_map": {n: "model-00001-of-00002.safetensors" for n in a}
             | {n: "model-00002-of-00002.safetensors" for n in b}}
    h.add("someorg/Sharded-1B", {"config.json": json.dumps(CFG).encode(),
                                 "model.safetensors.index.json": json.dumps(index).encode(),
                                 "model-00001-of-00002.safetensors": save({n: t[n] for n in a}),
                                 "model-00002-of-00002.safetensors": save({n: t[n] for n in b})})
    p = plan(env, "python", "-m", "sglang.launch_server", "--model-path", "someorg/Sharded-1B", "--tp", "4")
    d = json.loads(p.stdout)
    assert d["weights_source"] == "safetensors headers"
    assert d["weights_gib"] == round(expected_bytes(CFG, 4) / GIB, 3)
    assert {f.rsplit("/", 1)[-1] for m, f, r in h.log if r} == {"model-00001-of-00002.safetensors",
                                                                "model-00002-of-00002.safetensors"}


def test_docker_vllm_image_with_a_local_folder(tmp_path, env):
    folder = tmp_path / "models" / "Tiny"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(CFG))
    (folder / "model.safetensors").write_bytes(_st(CFG))
    p = plan(env | {"HF_HUB_OFFLINE": "1"}, "docker", "run", "--gpus", "all", "-p", "8000:8000", "--ipc=host",
             "-v", f"{tmp_path}:/models", "vllm/vllm-openai:v0.11.0", "--model", str(folder))
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["engine"] == "vllm" and d["model_source"] == "local folder"
    assert d["budget"]["weights_source"] == "safetensors headers"
    assert any("vllm image" in n for n in d["model_notes"])


def test_a_drafter_matched_to_a_specforge_template_says_so(env):
    p = plan(env | {"HF_HUB_OFFLINE": "1"}, "python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B",
             "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "someorg/qwen3-8b-eagle3")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["model_source"] == d["draft_model_source"] == "bundled (offline fallback)"
    assert any("specforge/qwen3-8b-eagle3, a SpecForge template, not the published drafter" in n
               for n in d["model_notes"])
    assert any(n.startswith("weights estimated from config.json") for n in d["model_notes"])
