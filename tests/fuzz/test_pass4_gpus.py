"""Issue 37 items 5 and 6 through the real CLI (tests/fuzz/pass4_gpus.py): every `--gpus` / CUDA_VISIBLE_DEVICES /
stand-in nvidia-smi / executor and address case ends as a one-line error or a correct answer, none hangs."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from fuzz import pass4_gpus


def test_every_gpu_and_executor_case_is_an_error_or_correct(tmp_path: Path) -> None:
    pass4_gpus.preload()
    cases = pass4_gpus.cases(tmp_path)
    assert len(cases) >= 100
    bad = []
    counts: Counter[str] = Counter()
    for case in cases:
        cls, why, _ = pass4_gpus.run(case)
        counts[cls] += 1
        if cls not in ("error", "correct"):
            bad.append(f"{cls}: {why} <- {case.what}")
    assert not bad, f"{dict(counts)}\n" + "\n".join(bad)
