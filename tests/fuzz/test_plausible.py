"""The plausible-but-wrong fuzz (tests/fuzz/plausible.py, #23) through the real CLI, a few examples per category:
every one must end as a one-line error or a correct answer (no traceback, no hang, no silent wrong result).
`tools/fuzz_report.py --strategy plausible` runs the same strategies at 600+ inputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from fuzz.harness import Case, run_case, run_cli
from fuzz.plausible import PLAUSIBLE, log_oracle
from fuzz.strategies import ROOT

LOGS_DIR = ROOT / "tests" / "data" / "doctor_corpus"


@pytest.mark.parametrize("name", sorted(PLAUSIBLE))
def test_every_plausible_slip_ends_as_an_error_or_a_correct_answer(name: str) -> None:
    @settings(max_examples=8, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck), phases=[Phase.generate])  # no shrinking: one fork each
    @given(PLAUSIBLE[name]())
    def one(case: Case) -> None:
        cls, why, _ = run_case(case)
        assert cls in ("error", "correct"), f"{cls}: {why} <- {case.what}"

    one()


def test_a_v0_log_cut_after_its_gpu_blocks_line_is_past_kv_sizing_and_said_not_to_serve(tmp_path: Path) -> None:
    # the one "silent wrong" of the 630-input run (2026-12-01): corpus log 004 cut right after its vLLM V0 line
    # "GPU blocks: 1952, # CPU blocks: 2048". The doctor's documented reading (doctor/lastboot.py::boot_status, from
    # c977d90) is started: past KV sizing with no error, the same stage as the whole 4-line log (its last line,
    # "Maximum concurrency", is one more KV-sizing line), and the JSON and the text say the serve line is missing.
    # The oracle lacked the "GPU blocks:" step the doctor counts, so it flagged a correct answer.
    src = LOGS_DIR / "004-vllm-started-llama8b-3090-20k.log"
    data = src.read_bytes()
    cut = data[: data.index(b"# CPU blocks: 2048\n") + len(b"# CPU blocks: 2048\n")]
    (tmp_path / "cut.log").write_bytes(cut)
    res = run_cli(["doctor", "--json", str(tmp_path / "cut.log")])
    assert res.rc == 0, res.stderr
    j = json.loads(res.stdout)
    assert j["status"] == "started" and j["facts"]["ready"] is False and j["failure"] is None
    assert "the log ends before it said it serves" in j["explanation"]
    assert log_oracle("cut-line", data, cut, None)(res) is None
    # and the oracle still flags a cut before any late step reported as started
    early = data[: data.index(b"\n") + 1]  # "Loading model weights took ..." alone
    assert log_oracle("cut-line", data, early, None)(res) == "a log without a ready line reported as started"
