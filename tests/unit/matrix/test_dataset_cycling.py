"""When a cell's prompts can be served from a prefix cache (matrix/cellrun.py::dataset_note): a prompt repeated
inside one repeat always can; across repeats only where the cache was not emptied between them."""

from __future__ import annotations

from types import SimpleNamespace

from specbench.load.prompts import Prompt
from specbench.matrix.cellrun import dataset_note
from specbench.matrix.expansion import Cell
from specbench.matrix.store_rows import RepeatRecord, StoredRepeat

CELL = Cell(cell_id="c", server_id="s", phase=0, tp=1, algorithm="ngram", label="ngram", server={},
            client={"dataset": "specbench-edit", "concurrency": 4})
RESET = {"reset": True, "how": "POST /reset_prefix_cache: HTTP 200"}
NOT_RESET = {"reset": False, "how": "the server offers no prefix-cache reset route"}


def _work(distinct: int, total: int) -> SimpleNamespace:
    """`total` prompts cycling through `distinct` texts, as a dataset shorter than the cell's requests gives them."""
    return SimpleNamespace(prompts=[Prompt(n_tokens=3, text=f"prompt {i % distinct}") for i in range(total)])


def _repeats(resets: list[dict[str, object] | None]) -> list[StoredRepeat]:
    return [StoredRepeat(RepeatRecord(repeat=k, started_at=0.0, duration_s=1.0, cache_reset=r), ())
            for k, r in enumerate(resets)]


def test_repeats_that_reuse_prompts_after_a_reset_are_cold() -> None:
    note = dataset_note(CELL, _work(24, 6 * 12 + 2), _repeats([RESET] * 4), 12)  # 48 requests, 24 prompts
    assert note == {"dataset_cycled": False, "distinct_prompts": 24, "dataset_warning": None}


def test_repeats_that_reuse_prompts_without_a_reset_may_be_served_from_the_cache() -> None:
    note = dataset_note(CELL, _work(24, 6 * 12 + 2), _repeats([NOT_RESET] * 4), 12)
    assert note["dataset_cycled"] is True and note["distinct_prompts"] == 24
    assert "48 measured requests from 24 distinct prompts" in note["dataset_warning"]
    one_failed = dataset_note(CELL, _work(24, 74), _repeats([RESET, RESET, NOT_RESET, RESET]), 12)
    assert one_failed["dataset_cycled"] is True


def test_a_prompt_twice_in_one_repeat_cycles_whatever_the_resets() -> None:
    note = dataset_note(CELL, _work(10, 3 * 12 + 2), _repeats([RESET] * 3), 12)
    assert note["dataset_cycled"] is True and note["distinct_prompts"] == 10
    assert note["dataset_warning"].startswith("2 of one repeat's 12 requests repeat a prompt")


def test_distinct_prompts_in_every_repeat_never_cycle() -> None:
    note = dataset_note(CELL, _work(100, 4 * 12 + 2), _repeats([NOT_RESET] * 4), 12)
    assert note == {"dataset_cycled": False, "distinct_prompts": 48, "dataset_warning": None}
