"""A log that is neither SGLang's nor vLLM's (issue 36 item 8): the doctor names whose it is, with no budget table of
dashes, in text and JSON; a log of ours without a single memory number shows no table either."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from paths import ROOT
from specbench.doctor.doctor import diagnose_text

LOGS = {
    "llama.cpp": "llama_model_loader: loaded meta data with 33 key-value pairs and 291 tensors from model.gguf\n"
                 "llm_load_tensors: offloading 32 repeating layers to GPU\n"
                 "llama_new_context_with_model: n_ctx      = 4096\n",
    "Ollama": 'time=2026-11-30T10:00:00.000Z level=INFO source=server.go:395 msg="starting llama server" cmd=x\n',
    "Hugging Face TGI": "2026-11-30T10:00:00.000Z  INFO text_generation_launcher: Args { model_id: \"x\" }\n",
    "TensorRT-LLM": "[TensorRT-LLM][INFO] Loaded engine size: 15 GiB\n",
}


@pytest.mark.parametrize("engine", sorted(LOGS))
def test_a_foreign_log_is_named(engine):
    d = diagnose_text(LOGS[engine])
    assert d.status == "unknown" and d.budget == () and d.failure is None
    assert d.explanation.startswith(f"This is a {engine} log, not SGLang's or vLLM's")


def test_the_cli_says_it_in_one_sentence_and_json(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(LOGS["llama.cpp"], encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "specbench", "doctor", str(log)], capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    assert r.returncode == 0 and "llama.cpp log" in r.stdout and "memory budget" not in r.stdout
    j = subprocess.run([sys.executable, "-m", "specbench", "doctor", str(log), "--json"], capture_output=True,
                       text=True, timeout=120, cwd=ROOT)
    doc = json.loads(j.stdout)
    assert doc["status"] == "unknown" and doc["budget"] == [] and "llama.cpp" in doc["explanation"]
