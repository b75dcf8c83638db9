"""Turn raw log text into clean lines: one job, never raises.

Real engine logs arrive wrapped in several layers of decoration. We strip, in this order:

- ANSI colour codes (`\\x1b[32m`), carriage-return progress bars (keep the last segment), NULs;
- journalctl prefixes (`Nov 29 10:00:00 host sglang[123]: `, ISO `2026-11-29T10:00:00+0000 host unit[1]: `);
- docker-compose prefixes (`sglang-1  | `);
- SGLang's `[2026-02-01 00:05:02 TP0]` / `[2026-02-01 00:05:02 DP0 TP3 EP3]` prefix (the rank is kept);
- vLLM's `INFO 01-13 11:35:21 [file.py:12] ` prefix and `(EngineCore_DP0 pid=1)` / `(VllmWorker rank=2 pid=3)`
  / `(Worker_TP1 pid=4)` process tags (the rank is kept);
- `docker logs --timestamps` (`2026-07-08T22:40:03.166647879Z `), tracing records (`...Z  WARN mod.fn: `), Ray's
  `(RayWorkerWrapper pid=1, ip=10.0.0.1)` tags and `[repeated 30x across cluster]` suffixes;
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
# `docker logs --timestamps`: RFC3339 with nanoseconds and Z, no host
_DOCKER_TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z ")
# structured (tracing-style) records, e.g. dynamo: `2025-10-15T08:43:28.505650Z  WARN module.func: text`
_TRACING = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z?\s+(?:TRACE|DEBUG|INFO|WARN|WARNING|ERROR)\s+"
                      r"[\w.:]+: ")
# Ray's `[repeated 30x across cluster]` de-duplication suffix
_RAY_REPEAT = re.compile(r"\s*\[repeated \d+x across cluster\]\s*$")
# vLLM records glued on one physical line (a post that lost its newlines): split before each level prefix
_VLLM_GLUED = re.compile(r"\s{2,}(?=(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d )")
# SGLang: "[2026-02-01 00:05:02 TP0] " or "[2026-02-01 00:05:02 DP0 TP3 EP3] " or "[2026-02-01 00:05:02] "
# 2024 builds print the time only, always with a rank tag: "[23:17:08 TP4] "
_SGL_PREFIX = re.compile(r"\[(?:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?(?P<tags>(?: [A-Z]{1,4}\d+)*)|"
                         r"\d\d:\d\d:\d\d(?P<ttags>(?: [A-Z]{1,4}\d+)+))\] ?")
_SGL_TP = re.compile(r"\bTP(\d+)\b")
_SGL_PP = re.compile(r"\bPP(\d+)\b")
# vLLM process tags: "(EngineCore_DP0 pid=1) ", "(VllmWorker rank=2 pid=3) ", "(Worker_TP1 pid=4) ", "(APIServer pid=5) "
# Ray adds `, ip=...`; a pasted line can lose its opening parenthesis (then the pid is required)
_VLLM_TAG = re.compile(r"^(?:\((?P<tag>[\w\-]+(?: rank=\d+)?(?: pid=\d+)?(?:, ip=[\w.:\-]+)?)|"
                       r"(?P<tag2>[\w\-]+ pid=\d+(?:, ip=[\w.:\-]+)?))\) ")
_VLLM_TAG_RANK = re.compile(r"(?:rank=|_TP|TP)(\d+)")
# vLLM record prefix: "INFO 01-13 11:35:21 [file.py:12] " (>=0.8) or "INFO 01-13 11:35:21 file.py:12] " (older)
_VLLM_PREFIX = re.compile(
    r"^(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? (?:\[[^\]]*\] |[\w.]+:\d+\] )?"
)
_PYLOG = re.compile(
    r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)? ?(?:-|\|)? ?(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)? ?(?:-|\|)? ?"
)
_LEVEL = re.compile(r"^(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)[: ] ?")
# a paste quoted with a bar (GitHub renders `▎`/`│` left borders; copied text keeps them)
_QUOTE_BAR = re.compile(r"^[▎▍▌│┃]+ ?")


def decode(raw: bytes | str) -> str:
    """Bytes to text without ever failing: UTF-8, undecodable bytes replaced."""
    if isinstance(raw, str):
        return raw
    return raw.decode("utf-8", errors="replace")


def looks_binary(raw: bytes | str) -> bool:
    """True when the input is clearly not a text log (mostly control/replacement characters). Runs of NULs are not
    counted: `logrotate copytruncate` leaves the truncated part of a file that is still being written as NULs before
    the new lines (a sparse hole), so a rotated log starts with thousands of them; a file of NULs only is binary."""
    text = decode(raw)
    if not text:
        return False
    rest = text.lstrip("\x00")  # the hole logrotate left before the first new line
    sample = rest[:65536].replace("\x00", "")[:8192]
    if not sample:
        return True
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
        text = _TRACING.sub("", text, count=1)
        text = _DOCKER_TS.sub("", text, count=1)
        text = _COMPOSE.sub("", text, count=1)
        m = _VLLM_TAG.match(text)
        if m:
            r = _VLLM_TAG_RANK.search(m.group("tag") or m.group("tag2") or "")
            if r and rank is None:
                rank = int(r.group(1))
            text = text[m.end():]
        m = _SGL_PREFIX.match(text)
        if m:
            tags = m.group("tags") or m.group("ttags") or ""
            r = _SGL_TP.search(tags)
            if r and rank is None:
                rank = int(r.group(1))
            pp = _SGL_PP.search(tags)
            if pp and stage is None:
                stage = int(pp.group(1))
            text = text[m.end():]
        text = _VLLM_PREFIX.sub("", text, count=1)
        text = _PYLOG.sub("", text, count=1)
        text = _LEVEL.sub("", text, count=1)
        text = _QUOTE_BAR.sub("", text, count=1)
        text = text.strip()
        if text == before:
            break
    return rank, stage, text


def _strip_outer(text: str) -> str:
    """journalctl / docker-compose wrappers around the whole physical line (they may nest)."""
    for _ in range(3):
        before = text
        text = _JOURNAL.sub("", text.lstrip(), count=1)
        text = _COMPOSE.sub("", _DOCKER_TS.sub("", _TRACING.sub("", text, count=1), count=1), count=1)
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
        physical = _RAY_REPEAT.sub("", _strip_outer(physical))
        starts = [m.start() for m in _SGL_PREFIX.finditer(physical)]
        starts += [m.end() for m in _VLLM_GLUED.finditer(physical)]
        starts.sort()
        cuts = [0] + [s for s in starts if s > 0] + [len(physical)]
        for a, b in zip(cuts, cuts[1:]):
            rank, stage, clean = _strip_one(physical[a:b])
            if clean:
                out.append(Line(no=no, rank=rank, text=clean, stage=stage))
    return out
