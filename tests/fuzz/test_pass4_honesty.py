"""Pass 4 of the server fuzz (tests/fuzz/pass4_honesty.py, issue 37 item 4) through the real CLI: every lying server
ends as a failed or partial cell that names its lie, every honest one (however it spells its JSON, whatever empty
events it sends) is measured in full; no traceback, no hang, no silent wrong result."""

from __future__ import annotations

from pathlib import Path

from fuzz.harness import run_all
from fuzz.pass4_honesty import cases


def test_every_server_of_pass4_is_measured_or_caught(tmp_path: Path) -> None:
    import specbench.report.export  # noqa: F401  (each case is a fork of this process: import once here)

    all_cases = cases(tmp_path)
    assert len(all_cases) >= 40
    tally, bad = run_all(all_cases)
    assert not bad, f"{dict(tally)}\n" + "\n".join(bad)
