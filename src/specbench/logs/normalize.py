"""Turn raw log text into clean lines: one job, never raises.

Real engine logs arrive wrapped in several layers of decoration. We strip, in this order:

- ANSI colour codes (`\\x1b[32m`), carriage-return progress bars (keep the last segment), NULs;
- journalctl prefixes (`Nov 29 10:00:00 host sglang[123]: `, ISO `2026-11-29T10:00:00+0000 host unit[1]: `);
- docker-compose prefixes (`sglang-1  | `);
- SGLang's `[2026-02-01 00:05:02 TP0]` / `[2026-02-01 00:05:02 DP0 TP3 EP3]` prefix (the rank is kept);
- vLLM's `INFO 01-13 11:35:21 [file.py:12] ` prefix and `(EngineCore_DP0 pid=1)` / `(VllmWorker rank=2 pid=3)`
  / `(Worker_TP1 pid=4)` process tags (the rank is kept);
- plain python-logging prefixes (`2026-11-29 10:00:00,123 - INFO - `).

When several ranks write at once, two records can end up glued on one physical line; we split a line again
wherever an SGLang bracket prefix starts in the middle of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Line:
    """One log record after cleaning. `no` is the 1-based physical line it came from; `rank` the TP rank or None;
    `stage` the pipeline stage (`PP1` in the SGLang prefix) or None."""

    no: int
    rank: int | None
    text: str
    stage: int | None = None


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-_]")
_JOURNAL = re.compile(
    r"^(?:[A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d{2}:?\d{2}|Z)?)"
    r" \S+ [\w@.\-/]+(?:\[\d+\])?: "
)
_COMPOSE = re.compile(r"^[\w.\-]+\s+\| ")
# SGLang: "[2026-02-01 00:05:02 TP0] " or "[2026-02-01 00:05:02 DP0 TP3 EP3] " or "[2026-02-01 00:05:02] "
_SGL_PREFIX = re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?(?P<tags>(?: [A-Z]{1,4}\d+)*)\] ?")
_SGL_TP = re.compile(r"\bTP(\d+)\b")
_SGL_PP = re.compile(r"\bPP(\d+)\b")
# vLLM process tags: "(EngineCore_DP0 pid=1) ", "(VllmWorker rank=2 pid=3) ", "(Worker_TP1 pid=4) ", "(APIServer pid=5) "
_VLLM_TAG = re.compile(r"^\((?P<tag>[\w\-]+(?: rank=\d+)?(?: pid=\d+)?)\) ")
_VLLM_TAG_RANK = re.compile(r"(?:rank=|_TP|TP)(\d+)")
# vLLM record prefix: "INFO 01-13 11:35:21 [file.py:12] " (>=0.8) or "INFO 01-13 11:35:21 file.py:12] " (older)
_VLLM_PREFIX = re.compile(
    r"^(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? (?:\[[^\]]*\] |[\w.]+:\d+\] )?"
)
_PYLOG = re.compile(
    r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)? ?(?:-|\|)? ?(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)? ?(?:-|\|)? ?"
)
_LEVEL = re.compile(r"^(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)[: ] ?")


def decode(raw: bytes | str) -> str:
    """Bytes to text without ever failing: UTF-8, undecodable bytes replaced."""
    if isinstance(raw, str):
        return raw
    return raw.decode("utf-8", errors="replace")


def looks_binary(raw: bytes | str) -> bool:
    """True when the input is clearly not a text log (NULs or mostly control/replacement characters)."""
    text = decode(raw)
    if not text:
        return False
    sample = text[:8192]
    bad = sum(1 for ch in sample if ch == "\x00" or ch == "\ufffd" or (ord(ch) < 32 and ch not in "\n\r\t\x1b"))
    return bad / len(sample) > 0.10


def _strip_one(segment: str) -> tuple[int | None, int | None, str]:
    """Remove the decoration layers from one record; return (rank, stage, text)."""
    rank: int | None = None
    stage: int | None = None
    text = segment.strip()
    for _ in range(4):  # decorations can nest (journalctl around docker around sglang); a few passes suffice
        before = text
        text = _JOURNAL.sub("", text, count=1)
        text = _COMPOSE.sub("", text, count=1)
        m = _VLLM_TAG.match(text)
        if m:
            r = _VLLM_TAG_RANK.search(m.group("tag"))
            if r and rank is None:
                rank = int(r.group(1))
            text = text[m.end():]
        m = _SGL_PREFIX.match(text)
        if m:
            r = _SGL_TP.search(m.group("tags") or "")
            if r and rank is None:
                rank = int(r.group(1))
            pp = _SGL_PP.search(m.group("tags") or "")
            if pp and stage is None:
                stage = int(pp.group(1))
            text = text[m.end():]
        text = _VLLM_PREFIX.sub("", text, count=1)
        text = _PYLOG.sub("", text, count=1)
        text = _LEVEL.sub("", text, count=1)
        text = text.strip()
        if text == before:
            break
    return rank, stage, text


def _strip_outer(text: str) -> str:
    """journalctl / docker-compose wrappers around the whole physical line (they may nest)."""
    for _ in range(3):
        before = text
        text = _COMPOSE.sub("", _JOURNAL.sub("", text.lstrip(), count=1), count=1)
        if text == before:
            break
    return text


def normalize(raw: bytes | str) -> list[Line]:
    """Clean a whole log. Never raises; returns [] for empty input."""
    text = decode(raw).replace("\x00", "")
    text = _ANSI.sub("", text)
    out: list[Line] = []
    for no, physical in enumerate(text.split("\n"), start=1):
        if "\r" in physical:  # progress bars redraw with \r: the last non-empty segment is what the terminal shows
            parts = [p for p in physical.split("\r") if p.strip()]
            physical = parts[-1] if parts else ""
        if not physical.strip():
            continue
        physical = _strip_outer(physical)
        starts = [m.start() for m in _SGL_PREFIX.finditer(physical)]
        cuts = [0] + [s for s in starts if s > 0] + [len(physical)]
        for a, b in zip(cuts, cuts[1:]):
            rank, stage, clean = _strip_one(physical[a:b])
            if clean:
                out.append(Line(no=no, rank=rank, text=clean, stage=stage))
    return out
