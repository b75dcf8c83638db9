"""The recorded `make demo` (tests/data/demo-smollm2-vllm-cpu/README.md): the first report a user sees decides one
speculative configuration faster (prompt lookup on code edits) and one slower (an untrained 4-layer draft) at every
concurrency, with the prefix cache emptied before every repeat and no integrity warning beside the winner."""

from __future__ import annotations

import pytest

from paths import DATA
from specbench.report.build import report_paths
from specbench.stored.read import load_store

STORE = DATA / "demo-smollm2-vllm-cpu" / "demo.sqlite"


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    return report_paths([STORE], tmp_path_factory.mktemp("demo"))


def test_every_throughput_is_its_rows() -> None:
    for c in load_store(STORE).cells:
        reps: dict[int | None, list] = {}
        for q in c.requests:
            reps.setdefault(q.repeat, []).append(q)
        span = sum(max(q.ended_at for q in v) - min(q.sent_at for q in v) for v in reps.values())
        tokens = sum(q.output_tokens or 0 for q in c.requests if q.ok)
        assert tokens / span == pytest.approx(c.metric("output_throughput"), rel=1e-3), c.label
        assert len(reps) >= 3 and all(q.ok for q in c.requests)


def test_one_decided_win_and_one_decided_loss_at_every_concurrency(written) -> None:  # type: ignore[no-untyped-def]
    by_c = {q.concurrency: q for q in written.report.tables.questions}
    assert set(by_c) == {1, 4}
    for q in by_c.values():
        assert q.decision.headline.text == "ngram (decided against every other)"
        win, loss = q.row("ngram"), q.row("draft-L4")
        assert win.vs_ar["throughput"] == "faster" and win.speedup is not None and win.speedup > 1.3
        assert loss.vs_ar["throughput"] == "slower" and loss.speedup is not None and loss.speedup < 0.8


def test_the_cache_was_emptied_before_every_repeat_and_nothing_warns(written) -> None:  # type: ignore[no-untyped-def]
    for c in load_store(STORE).cells:
        assert c.metrics["prefix_cache_reset"]["reset"] is True, c.label
        assert c.metrics["dataset_cycled"] is False, c.label
    md = written.markdown.read_text()
    assert "the dataset cycles" not in md and "not emptied" not in md
