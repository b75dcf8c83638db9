"""The engine registry's typed parts (engines/base.py: PlanParts, LogParts, LogTables): every planned engine builds
them from its own folder, and the doctor reads logs with exactly those tables (no module found by name)."""

from __future__ import annotations

import dataclasses
import re

from specbench.doctor import reading
from specbench.engines.base import LogParts, LogTables, PlanParts, engines


def test_every_engine_builds_its_parts_from_its_own_folder():
    table = engines()
    assert {"sglang", "vllm"} <= set(table)
    for name, eng in table.items():
        plan, log = eng.plan_parts(), eng.log_parts()  # type: ignore[attr-defined]
        assert isinstance(plan, PlanParts) and isinstance(log, LogParts) and isinstance(log.tables, LogTables)
        assert eng.log_tables() is log.tables
        for parts in (plan, log):
            for f in dataclasses.fields(parts):
                fn = getattr(parts, f.name)
                if callable(fn):
                    assert fn.__module__.startswith(f"specbench.engines.{name}."), (name, f.name, fn.__module__)
        t = log.tables
        assert isinstance(t.late_boot, re.Pattern) and t.warnings and t.failures


def test_the_doctor_reads_with_every_engines_tables():
    tables = [e.log_tables() for e in engines().values()]
    r = reading.log_reader()
    assert r.lines == tuple(t.lines for t in tables)
    assert r.late_boot == tuple(t.late_boot for t in tables)
    assert r.warnings == tuple(w for t in tables for w in t.warnings)
    assert set(r.search_words()) >= {a.encode() for t in tables for a in t.failures.anchors}
    # a line only SGLang prints and one only vLLM prints are both read (the merged line tables)
    sglang = "[2026-01-01 00:00:00 TP0] KV Cache is allocated. #tokens: 87061, K size: 6.23 GB, V size: 6.23 GB"
    vllm = "INFO 01-01 00:00:00 [kv_cache_utils.py:1087] GPU KV cache size: 11,893 tokens"
    assert r.facts_of_text(sglang).kv_tokens == 87061
    assert r.facts_of_text(vllm).kv_tokens == 11893
