"""Issue 37 items 5 and 6 through the real CLI (tests/fuzz/pass4_gpus.py): every `--gpus` / CUDA_VISIBLE_DEVICES /
stand-in nvidia-smi / executor and address case ends as a one-line error or a correct answer, none hangs."""

from __future__ import annotations

from pathlib import Path

from fuzz import pass4_gpus
from fuzz.harness import run_all


def test_every_gpu_and_executor_case_is_an_error_or_correct(tmp_path: Path) -> None:
    pass4_gpus.preload()
    cases = pass4_gpus.cases(tmp_path)
    assert len(cases) >= 100
    counts, bad = run_all(cases, pass4_gpus.run)
    assert not bad, f"{dict(counts)}\n" + "\n".join(bad)
