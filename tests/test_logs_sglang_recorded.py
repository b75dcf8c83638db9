"""Real SGLang GPU boots recorded by tools/gpu/boot_one.sh (tests/data/sglang-<version>/*.log): what the doctor reads
from the log must agree with the recorder's header (package version, final status) and with what the running server
reported about itself (`GET /get_server_info`, written at the end of the file)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from specbench.logs.doctor import diagnose_text

RECORDED = sorted((Path(__file__).parent / "data").glob("sglang-*/*.log"))


def _server_info(text: str) -> dict[str, Any] | None:
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("# GET /get_server_info"):
            body = " ".join(ln[1:].strip() for ln in lines[i + 1:] if ln.startswith("#   "))
            m = re.search(r"\{.*\}", body)
            try:
                return json.loads(m.group(0)) if m else None
            except json.JSONDecodeError:
                return None
    return None


def _info_value(info: dict[str, Any], key: str) -> Any:
    """The scheduler's effective value (internal_states). Top-level keys are the requested server args, which can
    differ (sgl-project/sglang#38846: 32 requested, 9 effective), so they are not used."""
    for state in info.get("internal_states") or []:
        if isinstance(state, dict) and key in state:
            return state[key]
    return None


@pytest.mark.parametrize("path", RECORDED, ids=[f"{p.parent.name}/{p.name}" for p in RECORDED])
def test_recorded_sglang_boot(path: Path):
    text = path.read_text(errors="replace")
    d = diagnose_text(text, with_fixes=False)
    f = d.facts
    assert f.engine == "sglang"
    version = re.search(r"^# sglang (\S+)", text, re.M)
    if version:
        assert f.engine_version == version.group(1)
    status = re.search(r"status=(\w+) after", text)
    if status and status.group(1) == "ready":
        assert d.status == "started"
        assert f.avail_before_load_gib is not None and f.weights_gib is not None and f.kv_tokens is not None
    elif status and status.group(1) == "exited":
        assert d.status == "failed" and d.failure is not None
    info = _server_info(text)
    if info:
        # internal_states repeats the requested server args; the scheduler's own numbers have their own keys
        for fact, key in (("max_running_requests", "effective_max_running_requests_per_dp"),
                          ("max_total_num_tokens", "max_total_num_tokens")):
            want = _info_value(info, key)
            if isinstance(want, int):
                assert getattr(f, fact) == want, key
