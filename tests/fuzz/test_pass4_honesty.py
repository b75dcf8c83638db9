"""Pass 4 of the server fuzz (tests/fuzz/pass4_honesty.py, issue 37 item 4) through the real CLI: every lying server
ends as a failed or partial cell that names its lie, every honest one (however it spells its JSON, whatever empty
events it sends) is measured in full; no traceback, no hang, no silent wrong result."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from fuzz.harness import run_case
from fuzz.pass4_honesty import cases


def test_every_server_of_pass4_is_measured_or_caught(tmp_path: Path) -> None:
    import specbench.report.export  # noqa: F401  (each case is a fork of this process: import once here)

    all_cases = cases(tmp_path)
    assert len(all_cases) >= 40
    bad: list[str] = []
    tally: Counter[str] = Counter()
    for case in all_cases:
        cls, why, _ = run_case(case)
        tally[cls] += 1
        if cls not in ("error", "correct"):
            bad.append(f"[{case.category}] {case.what}: {cls}: {why}")
    assert not bad, f"{dict(tally)}\n" + "\n".join(bad)
