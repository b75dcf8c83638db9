"""The SGLang and quantized / renamed half of the command corpus (tests/data/command_corpus/commands_sglang.json: 23
launch commands copied from public issues, cookbooks and PRs, each with its URL and, where the source says it, the
outcome), planned as a new user meets them: offline, with an empty HF cache, so quantized and renamed checkpoints
resolve to a bundled stand-in (specs/standin.py) or fail in one line. The README there has the schema; the score over
the whole corpus is benchmarks/command_corpus_score.py (benchmarks/RESULTS.md)."""

from __future__ import annotations

import json

import pytest

from paths import DATA as TEST_DATA
from specbench.contracts_inputs import PlanOptions
from specbench.engines.command import read_command
from specbench.errors import UserError
from specbench.plan.api import plan_command

DATA = TEST_DATA / "command_corpus"
CORPUS = json.loads((DATA / "commands_sglang.json").read_text())
BY_ID = {e["id"]: e for e in CORPUS}
GPUS = {"B200": "B200", "A100": "A100 80GB"}

# the verdict as planned here; "no config": no public config copy and no bundled stand-in (one-line error)
# As planned with the command alone (the newest release): --disable-mla and --enable-ep-moe are 0.4.x flags the newest
# parser does not have, so it exits before loading (issue 36); with the release (0.4.x, older than any flag
# list) the flag cannot be checked and the memory verdict stands (test_stated_outcomes_are_predicted).
VERDICT = {
    "sglang-qwen3-30b-a3b-instruct-2507-fp8-local-b200-triton-moe": "ok", "sglang-deepseek-r1-awq-tp8-dtype-half": "ok",
    "sglang-deepseek-r1-awq-tp8-disable-mla": "fails", "sglang-qwen3-235b-a22b-tp8-tracker": "ok",
    "sglang-qwen3-235b-a22b-fp8-tp4-tracker": "ok", "sglang-qwen3-235b-a22b-fp8-tp8-enable-ep-moe-tracker": "fails",
    "sglang-qwen3-235b-a22b-thinking-2507-tp8-cookbook": "ok", "sglang-qwen3-coder-30b-a3b-aiter-off-page32-cookbook": "ok",
    "sglang-serve-qwen3.6-35b-a3b-fp8-eagle-spec-v2-cookbook": "ok", "sglang-nemotron3-super-bf16-tp4-cookbook": "ok",
    # 70B bf16 weights (131 GiB) on one H200: nothing is left for the KV cache at the default mem-fraction-static
    "sglang-llama-3.3-70b-tp1-cookbook": "fails",
    "sglang-deepseek-r1-0528-tp8-cookbook": "ok", "sglang-deepseek-r1-fp4-tp4-modelopt-fp4-default-backend": "ok",
    "sglang-qwen3-4b-fp8-docker-blackwell-context-60000": "no config",
    "sglang-gemma-3-27b-int4-awq-not-enough-memory": "no config",
    "sglang-qwen3-vl-30b-a3b-awq-hf-cache-snapshot-path-fails": "ok",
    "sglang-qwen3-30b-moe-local-folder-tp2-benchmarked": "no config", "sglang-qwen3-30-a3b-typo-a100": "no config",
    "sglang-deepseek-v3-tp8-cookbook": "ok",
    # a new version or another model is never guessed from a look-alike name
    "sglang-deepseek-v3.1-terminus-tp8-cookbook": "no config", "sglang-serve-llama-4-scout-1m-context-tp8-cookbook": "no config",
    "sglang-serve-ministral-3-14b-2512-cookbook": "no config", "sglang-qwen3-coder-next-tp2-cookbook": "no config",
}
# quantized / renamed checkpoints: the stand-in and the quantization it is planned with
STAND_IN = {
    "sglang-qwen3-30b-a3b-instruct-2507-fp8-local-b200-triton-moe": ("Qwen/Qwen3-30B-A3B", "fp8"),
    "sglang-deepseek-r1-awq-tp8-dtype-half": ("deepseek-ai/DeepSeek-R1", "awq"),
    "sglang-qwen3-235b-a22b-thinking-2507-tp8-cookbook": ("Qwen/Qwen3-235B-A22B", "unquantized"),
    "sglang-serve-qwen3.6-35b-a3b-fp8-eagle-spec-v2-cookbook": ("Qwen/Qwen3.6-35B-A3B", "fp8"),
    "sglang-nemotron3-super-bf16-tp4-cookbook": ("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8", "unquantized"),
    "sglang-deepseek-r1-0528-tp8-cookbook": ("deepseek-ai/DeepSeek-R1", "fp8"),
    "sglang-deepseek-r1-fp4-tp4-modelopt-fp4-default-backend": ("deepseek-ai/DeepSeek-R1", "modelopt"),
    "sglang-qwen3-vl-30b-a3b-awq-hf-cache-snapshot-path-fails": ("Qwen/Qwen3-VL-30B-A3B-Instruct", "awq"),
}
# stated outcomes the planner gets wrong, with why (asserted still wrong, so a fix shows up)
KNOWN_MISS = {
    "sglang-qwen3-vl-30b-a3b-awq-hf-cache-snapshot-path-fails": "a 0.5.3 loader failure of that AWQ VL checkpoint, "
                                                               "not a memory or configuration check the planner has",
}


@pytest.fixture(autouse=True)
def _empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)


def _plan(e: dict, with_version: bool = False) -> dict:
    """Planned as a user with only the command would (the newest release); `with_version`: with the release the
    issue names, as a user who knows it passes --engine-version."""
    version = e.get("version") if with_version else None
    return plan_command(e["command"], PlanOptions(gpu=GPUS.get(e["gpu"] or "", "H200"), fixes=False,
                                                  engine_version=version))


def test_the_corpus_and_the_verdicts_cover_each_other():
    assert len(CORPUS) == len(BY_ID) == 23 and set(BY_ID) == set(VERDICT)
    assert all(e["url"].startswith("https://github.com/") and e["engine"] == "sglang" for e in CORPUS)
    assert sum("started" in e["stated"] for e in CORPUS) >= 8
    whole = sum(len(json.loads(f.read_text())) for f in DATA.glob("commands*.json"))
    assert whole >= 80


@pytest.mark.parametrize("cid", list(BY_ID))
def test_each_command_plans_to_its_verdict(cid):
    e = BY_ID[cid]
    assert read_command(e["command"]).engine.name == "sglang"
    if VERDICT[cid] == "no config":
        with pytest.raises(UserError, match="cannot find a config for") as exc:
            _plan(e)
        assert "\n" not in str(exc.value)
        return
    p = _plan(e)
    assert p["status"] == VERDICT[cid] and p["tp"] == e["tp"]
    if cid in STAND_IN:
        sibling, quant = STAND_IN[cid]
        assert f"bundled config of {sibling}" in p["model_stand_in"]
        assert p["weights_quant_label"].startswith(quant)


@pytest.mark.parametrize("cid", [c for c, e in BY_ID.items() if "started" in e["stated"] and VERDICT[c] != "no config"])
def test_stated_outcomes_are_predicted(cid):
    e = BY_ID[cid]
    predicted = _plan(e, with_version=True)["status"] == "ok"  # the outcome was stated for that release
    if cid in KNOWN_MISS:
        assert predicted != e["stated"]["started"], f"{cid} is now predicted: drop it from KNOWN_MISS"
    else:
        assert predicted == e["stated"]["started"]
