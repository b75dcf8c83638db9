"""Test-wide pins.

vLLM's CPU sizing depends on the machine (specbench.engines.vllm.cpu.CpuIsa: AVX512-BF16 and AMX, as torch
reports them to vLLM). The exact CPU numbers the unit tests assert are those of the machine the fixtures in
tests/data were recorded on (AMD EPYC: AVX512-BF16, no AMX), so every test plans for that machine unless it pins
another one; a pin among the command's own VAR=value words wins over this one, which is how the live engine tests
plan for the machine they run on (engine_boot.plan_words asks the engine's torch).
"""

from __future__ import annotations

import pytest

from specbench.engines.vllm import cpu as vllm_cpu


@pytest.fixture(autouse=True)
def _pin_the_fixtures_cpu(monkeypatch):
    monkeypatch.setenv(vllm_cpu.AVX512_BF16_ENV, "1")
    monkeypatch.setenv(vllm_cpu.AMX_ENV, "0")
    # plans resolve models from the bundled configs, never from a Hub the test machine may reach (specs/hub.py);
    # the Hub tests (test_plan_hub.py) lift this for their stand-in server on 127.0.0.1
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
