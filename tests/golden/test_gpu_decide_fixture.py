"""The real H100 stores of issue 34 (tests/data/gpu-decide-sglang/README.md): every stored throughput re-derived from
the raw request rows' absolute times, the answers the report gives (decided after one round of repeats on fresh
boots), the A/A check, `specbench compare` across two SGLang releases, the fastest setup that fits and the timeline."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from paths import DATA as TEST_DATA
from specbench.report.build import report_paths
from specbench.stored.read import load_store

DATA = TEST_DATA / "gpu-decide-sglang"
A, B = DATA / "gpu-decide-0515.db", DATA / "gpu-decide-0512.db"


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    return report_paths([A], tmp_path_factory.mktemp("gpu"))


def test_every_throughput_is_its_rows(written) -> None:  # type: ignore[no-untyped-def]
    """Pooled throughput = output tokens of the ok requests / the summed spans of each repeat (first send to last
    end, from the rows' absolute times): the stored value to 0.1 %; every repeat's rows on the boot it says."""
    store = load_store(A)
    for c in store.cells:
        reps: dict[int | None, list] = {}
        for q in c.requests:
            reps.setdefault(q.repeat, []).append(q)
        assert set(reps) == set(range(len(reps)))
        span = sum(max(q.ended_at for q in v) - min(q.sent_at for q in v) for v in reps.values())
        tokens = sum(q.output_tokens or 0 for q in c.requests if q.ok)
        assert tokens / span == pytest.approx(c.metric("output_throughput"), rel=1e-3), c.label
        boots = {q.boot for q in c.requests}
        assert boots == ({1} if len(reps) == 2 else {1, 2})  # the round's third repeat ran on a fresh boot


def test_the_answers_after_one_round(written) -> None:  # type: ignore[no-untyped-def]
    by_c = {q.concurrency: q for q in written.report.tables.questions}
    assert set(by_c) == {1, 16}
    for c in (1, 16):
        assert by_c[c].decision.headline.text == "eagle3-sim3.0 (decided against every other)"
        assert by_c[c].decision.looks == 2  # repeats {min 2, max 3}: the 97.5 % level
    assert {r.repeats for r in by_c[16].rows} == {3} and {r.repeats for r in by_c[1].rows} == {2}
    sim2 = by_c[16].row("eagle3-sim2.0")
    assert sim2.vs_ar["throughput"] == "slower" and sim2.speedup is not None and sim2.speedup < 0.9
    md = written.markdown.read_text()
    assert "## A/A check" in md
    aa = [ln for ln in md.splitlines() if "| ar-aa |" in ln and ("| pass |" in ln or "| FAIL" in ln)]
    assert len(aa) == 2 and all("| pass |" in ln for ln in aa)
    assert "timeline.png" in {p.name for p in written.pngs}


def test_fits_reads_the_planned_cap(written) -> None:  # type: ignore[no-untyped-def]
    rows = [r for r in written.report.fits if r.setup.label == "eagle3-sim3.0"]
    assert rows and all(r.setup.reach.reachable == 16 and r.setup.reach.engine_cap == 16 for r in rows)


def test_compare_the_two_releases(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "specbench", "compare", str(A), str(B), "--json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stderr  # a decided regression gates
    out = json.loads(r.stdout)
    assert "engine_version" in json.dumps(out["subject"])
    pairs = {(p["label"], p["concurrency"]): p for p in out["pairs"]}
    assert set(pairs) == {("ar", 1), ("ar", 16), ("eagle3-sim3.0", 1), ("eagle3-sim3.0", 16)}
    assert pairs[("ar", 1)]["outcome"] == "regression" and pairs[("ar", 1)]["throughput"]["level"] == 0.975
