"""The real command corpus (tests/data/command_corpus/commands.json: 57 launch commands copied from public docs,
recipes and issues, each with its URL): every command is read as its engine (or refused in one line as an
unsupported server or for a shell variable), every one whose config is public plans to the verdict recorded here,
and where the source states the engine's numbers the plan is compared with them.

The configs (tests/data/command_corpus/configs/, see SOURCES.md there and the README) are put in a throw-away HF
cache under their model ids, so the models resolve as a user's cached download would (`model_source`
"hf cache"); commands that name a local path get `--model-config`. Planned offline (conftest pins HF_HUB_OFFLINE).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from paths import DATA as TEST_DATA
from specbench.contracts_inputs import PlanOptions
from specbench.engines.command import read_command
from specbench.errors import UserError
from specbench.plan.api import plan_command
from specbench.specs.resolve import is_repo_id

DATA = TEST_DATA / "command_corpus"
CORPUS = json.loads((DATA / "commands.json").read_text())
BY_ID = {e["id"]: e for e in CORPUS}
COMMIT = "0" * 40
# the GPU the source names, when the catalog has it; every other command is planned on the H200 (the default)
GPUS = {"A100": "A100 80GB", "H100": "H100 80GB", "H100 80GB HBM3": "H100 80GB", "H20": "H20", "8x H20": "H20",
        "B200": "B200", "4xB200": "B200", "H200": "H200"}

# the verdict of each command as planned here ("no config": the model, or its drafter, has no public config copy and
# no bundled stand-in; quantized / renamed checkpoints and published drafters plan on a stand-in: specs/standin.py)
VERDICT = {
    "vllm-gpt-oss-20b-a100": "ok", "vllm-gpt-oss-120b-tp2": "ok", "vllm-gpt-oss-120b-eval-tp8-underscore-flag": "ok",
    "vllm-gpt-oss-120b-rocm-cc-dotted-flags": "ok", "vllm-gpt-oss-120b-h100-known-limitation-fails": "ok",
    "vllm-qwen3-next-80b-tp4": "ok", "vllm-qwen3-next-80b-mtp-spec-config": "ok",
    "vllm-qwen3-next-80b-fp8-env-prefixed": "ok", "vllm-qwen3-next-80b-long-ctx-env": "ok",
    "vllm-qwen3.6-35b-a3b-tp8": "ok", "vllm-qwen3.6-35b-a3b-tp8-mtp": "ok",
    "vllm-qwen3.5-397b-docker-positional-model": "ok", "vllm-qwen3.5-35b-a3b-cpu-docker-model-flag": "ok",
    "vllm-qwen3.5-397b-nvfp4-dp4-ep": "fails", "vllm-qwen3.5-397b-fp8-tp8-mtp": "ok",
    "vllm-qwen3-235b-rocm-env-prefixed": "fails", "vllm-qwen3-235b-fp8-rocm-env-prefixed": "fails",
    "vllm-nemotron3-nano-bf16-262k": "ok", "vllm-deepseek-r1-0528-tp8-ep": "ok",
    "vllm-deepseek-r1-0528-dp8-ep": "ok", "vllm-deepseek-r1-fp4-cuda-visible-devices": "ok",
    # fp8-rocm: planned at the newest vLLM (the recipe names none), whose parser has no --disable-log-requests (now
    # --enable-log-requests): it exits before loading (issue 36: an unknown flag is a FAIL in the engine's words)
    # dp8-ep: the recipe's own command; with --enable-expert-parallel each of the 8 ranks holds 1/8 of the experts
    # (engines/vllm/expert_parallel.py), it was "fails" while the planner gave every DP rank all of them
    "vllm-minimax-m2.7-tp4": "ok", "vllm-minimax-m2.7-dp8-ep": "ok", "vllm-minimax-m2.7-docker-tp4": "ok",
    "vllm-kimi-k2-thinking-tp8-h200": "fails", "vllm-kimi-k2-thinking-tp8-dcp8-h200": "fails",
    "vllm-qwen3.8-27b-unsloth-nvfp4-tp2-rtx5090": "no config",
    "vllm-qwen3.8-27b-inferact-nvfp4-rtx5090-enforce-eager": "no config", "vllm-falcon-h1-1b-tp2-dp1": "no config",
    "vllm-gpt-oss-120b-api-server-tp2": "ok", "vllm-qwen3-coder-30b-fp8-pp2-mixed-gpus-fails": "ok",
    "vllm-gpt-oss-120b-h100-v0.11.2-85k-ok": "shell variable", "vllm-gpt-oss-120b-h100-v0.14.1-oom": "shell variable",
    "sglang-qwen3-next-80b-tp4-model-alias": "ok", "sglang-qwen3-next-80b-nextn-speculative-algo-abbrev": "ok",
    "sglang-qwen3-next-80b-thinking-tp8": "ok", "sglang-qwen3-next-80b-1m-context-env-prefixed": "ok",
    "sglang-serve-qwen3.5-397b-nextn-algo-abbrev": "ok", "sglang-qwen3.5-397b-cuda-ipc-env": "ok",
    "sglang-qwen3.5-397b-amd-aiter-triton": "ok", "sglang-gpt-oss-120b-tp8-reasoning": "ok",
    "sglang-gpt-oss-120b-tool-server-tp2": "ok", "sglang-gpt-oss-120b-tp2-dp4-h20": "ok",
    "sglang-nemotron3-nano-bf16-max-running-1024": "ok", "sglang-nemotron3-nano-fp8-max-running-1024": "ok",
    "sglang-qwen3-235b-a22b-instruct-2507-tp8": "ok", "sglang-serve-llama-3.1-405b-tp8": "ok",
    "sglang-qwen3-30b-a3b-2507-eagle3-specforge-tp4": "ok", "sglang-qwen3-8b-eagle3-angelslim-b200": "ok",
    "sglang-qwen3-8b-dflash-b16-b200": "ok", "sglang-qwen3-coder-30b-a3b-dflash": "no config",
    "sglang-qwen3-8b-eagle3-mem-fraction-abbrev-a800": "ok",
    "sglang-qwen3-4b-eagle3-angelslim-mem-fraction-abbrev-fails": "no config",
    "sglang-qwen3-30b-a3b-eagle3-angelslim": "ok",  # the drafter on its target's SpecForge template
    "sglang-docker-deepseek-r1-tp16-2node-disable-radix-abbrev": "ok",
    "trtllm-serve-gpt-oss-120b-tp8-ep8": "unsupported", "trtllm-serve-deepseek-r1-fp4-tp8-ep2": "unsupported",
}

# where the source states the engine's numbers: (plan key, the stated key) compared exactly, or a known mismatch
# with its reason (kept failing-visible: the test asserts the mismatch is still there, so a fix shows up)
STATED = {
    "vllm-gpt-oss-120b-api-server-tp2": {"started": "match", "max_model_len": "match"},
    "sglang-gpt-oss-120b-tp2-dp4-h20": {"started": "match"},
    "vllm-gpt-oss-120b-h100-known-limitation-fails": {
        "started": "known mismatch: the MXFP4 weights are estimated from config.json (60.7 GiB at TP1), ~15% below "
                   "what vLLM loads on Hopper (issue #12), so the plan keeps ~12 GiB for KV where the engine had "
                   "1.71 GiB and then failed",
        "available_kv_cache_gib": "known mismatch: same cause"},
    "vllm-kimi-k2-thinking-tp8-h200": {
        "started": "known mismatch: the only public config copy is partial (configs/SOURCES.md): no "
                   "quantization_config, so the INT4 checkpoint is planned as bf16 (~4x the weights) and fails",
        "kv_tokens": "known mismatch: same cause", "available_kv_cache_gib": "known mismatch: same cause"},
    "vllm-kimi-k2-thinking-tp8-dcp8-h200": {
        "started": "known mismatch: partial config, as above; decode context parallelism is not planned either",
        "kv_tokens": "known mismatch: same cause", "available_kv_cache_gib": "known mismatch: same cause"},
}
PLAN_KEY = {"kv_tokens": "kv_tokens", "available_kv_cache_gib": "available_kv_gib", "max_model_len": "max_model_len"}


def _config(e: dict) -> Path | None:
    return DATA / "configs" / Path(e["config_source"]).name if e["config_source"] else None


@pytest.fixture(scope="module")
def hf_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("hf")
    for e in CORPUS:
        cfg = _config(e)
        if cfg is None or not is_repo_id(e["model"] or ""):
            continue
        root = home / "hub" / ("models--" + e["model"].replace("/", "--"))
        snap = root / "snapshots" / COMMIT
        snap.mkdir(parents=True, exist_ok=True)
        shutil.copy(cfg, snap / "config.json")
        hq = cfg.with_name(cfg.stem + "__hf_quant_config.json")
        if hq.exists():
            shutil.copy(hq, snap / "hf_quant_config.json")
        (root / "refs").mkdir(exist_ok=True)
        (root / "refs" / "main").write_text(COMMIT)
    return home


@pytest.fixture(autouse=True)
def _cache(hf_home, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(hf_home))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("SPECBENCH_CACHE_DIR", str(tmp_path / "sb"))


def _plan(e: dict) -> dict:
    opts = {"gpu": GPUS.get(e["gpu"] or "", "H200"), "fixes": False}
    if _config(e) is not None and not is_repo_id(e["model"] or ""):
        opts["model_config"] = str(_config(e))
    return plan_command(e["command"], PlanOptions(**opts))


def test_the_corpus_and_the_verdicts_cover_each_other():
    assert len(CORPUS) == 57 and set(BY_ID) == set(VERDICT)
    assert all(e["url"] for e in CORPUS)  # two name a code-index file id (README.md)
    assert sum(v in ("ok", "fails") for v in VERDICT.values()) >= 30


@pytest.mark.parametrize("cid", list(BY_ID))
def test_each_command_is_read_as_its_engine_or_refused_in_one_line(cid):
    e = BY_ID[cid]
    if VERDICT[cid] == "unsupported":
        with pytest.raises(UserError, match=r"TensorRT-LLM .*which specbench does not plan") as exc:
            read_command(e["command"])
    elif VERDICT[cid] == "shell variable":
        with pytest.raises(UserError, match=r"shell variable \$model_name") as exc:
            read_command(e["command"])
    else:
        assert read_command(e["command"]).engine.name == e["engine"]
        return
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("cid", [c for c, v in VERDICT.items() if v not in ("unsupported", "shell variable")])
def test_each_command_plans_to_its_verdict(cid):
    e = BY_ID[cid]
    if VERDICT[cid] == "no config":
        with pytest.raises(UserError, match="cannot find a config for") as exc:
            _plan(e)
        assert "\n" not in str(exc.value)
        return
    p = _plan(e)
    assert p["engine"] == e["engine"] and p["status"] == VERDICT[cid]
    assert p["tp"] == (e["tp"] if "-dp" not in e["command"] else p["tp"])
    # a model with no public config copy is planned on a bundled stand-in (specs/standin.py), which says so
    want = "bundled (offline fallback)" if p["model_stand_in"] else ("hf cache" if is_repo_id(e["model"]) else "config file")
    assert p["model_source"] == want


@pytest.mark.parametrize("cid", list(STATED))
def test_stated_engine_numbers(cid):
    e = BY_ID[cid]
    p = _plan(e)
    assert set(STATED[cid]) == set(e["stated"]), "every stated number is compared or marked"
    for key, how in STATED[cid].items():
        got = (p["status"] == "ok") if key == "started" else p.get(PLAN_KEY[key])
        want = e["stated"][key]
        if how == "match":
            assert got == want, key
        else:
            assert how.startswith("known mismatch: ") and got != want, f"{key} now matches: drop the mark"
