"""A cell's integrity read from a real store: a wave whose first tokens jumped (report/integrity.py::wave_ttft_jump)
is named in the cell's warnings, which the integrity table and every decision that names the cell carry."""

from __future__ import annotations

from paths import DATA
from specbench.report.integrity import integrity, wave_ttft_jump
from specbench.stored.read import load_store


def test_a_wave_whose_first_tokens_jumped_is_named() -> None:
    """The H100 hybrid store: AR and MTP at c = 2, 2,048 tokens took 1.32 / 1.35 s to first token in their second
    wave against 0.32-0.39 s in the first (no queueing: the cap was 5-8), and their speedups read 0.90-0.95x where
    c = 1 and 4 read 0.69-0.77x. DFlash-16 at c = 4 jumped too, but it queued (cap 3), which its integrity says
    instead; the rest of the store's cells keep their waves within the bounds."""
    st = load_store(str(DATA / "h100-hybrid-sglang-0.5.15.post1" / "h100-hybrid.db"))
    named = {(c.label, c.concurrency, c.client.get("prompt_tokens")) for c in st.cells
             if any(w.startswith("one wave's first tokens") for w in integrity(c).warnings)}
    assert named == {("ar", 2, 2048), ("mtp-sim2.5", 2, 2048)}
    queued = next(c for c in st.cells if (c.label, c.concurrency, c.client.get("prompt_tokens")) == ("dflash16", 4, 512))
    assert wave_ttft_jump(queued, 3) is not None and integrity(queued).oversaturated
    ar = next(c for c in st.cells if (c.label, c.concurrency, c.client.get("prompt_tokens")) == ("ar", 2, 2048))
    lo, hi = wave_ttft_jump(ar, 2) or (0.0, 0.0)
    assert 0.3 < lo < 0.4 and 1.3 < hi < 1.35
