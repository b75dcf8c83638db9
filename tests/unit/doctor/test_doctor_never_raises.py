"""Property: no log, however random, truncated, decorated or interleaved, makes the doctor raise."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from paths import DATA
from specbench.doctor.diff import diff
from specbench.doctor.doctor import diagnose_text
from specbench.doctor.reading import log_reader
from specbench.logs.normalize import normalize

REAL_LINES: list[str] = []
for p in sorted(DATA.rglob("*.log")):
    REAL_LINES += p.read_text(errors="replace").splitlines()
_cases = DATA / "real-logs-dev.json"
if _cases.is_file():
    for c in json.loads(_cases.read_text()):
        REAL_LINES += c["raw_log"]
REAL_LINES = [ln for ln in REAL_LINES if ln.strip()] or ["Load weight begin. avail mem=94.24 GB"]
INCIDENT = [(DATA / "incident" / n).read_text() for n in ("working.log", "failing.log")]

PREFIXES = st.sampled_from([
    "", "[2026-11-20 14:02:22 TP0] ", "[2026-11-20 14:02:22 TP7] ", "[2026-11-20 14:02:22 DP1 TP3 EP3] ",
    "\x1b[33m", "\x1b[0m", "Nov 20 14:02:22 box sglang[42]: ", "sglang-1  | ", "(EngineCore_DP0 pid=1) ",
    "INFO 11-30 02:29:11 [core.py:1] ", "(VllmWorker rank=3 pid=9) WARNING 11-30 02:29:11 [x.py:2] ", "\r", "[",
])


def _cut(line: str, frac: float) -> str:
    return line[: int(len(line) * frac)]


real_line = st.builds(lambda pre, ln, frac, keep: pre + (ln if keep else _cut(ln, frac)),
                      PREFIXES, st.sampled_from(REAL_LINES), st.floats(0, 1), st.booleans())
noise_line = st.builds(lambda pre, t: pre + t, PREFIXES, st.text(max_size=120))
# argument dumps with values literal_eval turns into non-JSON types (sets, bytes, complex, Ellipsis)
odd_args = st.builds(lambda v: f"server_args=ServerArgs(model_path='m', odd={v}, tp_size=2)",
                     st.sampled_from(["{1, 2}", "b'x'", "1j", "...", "frozenset()", "(1, {2})", "{'a': {3}}"]))
log_lines = st.lists(st.one_of(real_line, real_line, noise_line, odd_args), max_size=60)


def _interleave(a: list[str], b: list[str], picks: list[bool]) -> list[str]:
    out, i, j = [], 0, 0
    for pick in picks:
        if pick and i < len(a):
            out.append(a[i]); i += 1
        elif j < len(b):
            out.append(b[j]); j += 1
    return out + a[i:] + b[j:]


def _check(raw: str | bytes) -> None:
    d = diagnose_text(raw, with_fixes=False)
    assert d.status in ("started", "failed", "unknown")
    json.dumps(d.to_json())  # plain JSON: the runner stores it as is
    assert isinstance(d.explanation, str) and d.explanation


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(log_lines, st.sampled_from(["\n", "\r\n", ""]))
def test_random_decorated_truncated_lines(lines: list[str], sep: str):
    _check(sep.join(lines) if sep else "".join(lines))


@settings(max_examples=150, deadline=None)
@given(log_lines, log_lines, st.lists(st.booleans(), max_size=120))
def test_interleaved_logs_and_diff(a: list[str], b: list[str], picks: list[bool]):
    raw = "\n".join(_interleave(a, b, picks))
    _check(raw)
    left, right = diagnose_text("\n".join(a), with_fixes=False), diagnose_text(raw, with_fixes=False)
    json.dumps(diff(left, right).to_json())


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(INCIDENT), st.integers(0, 20000), st.integers(0, 20000))
def test_incident_logs_cut_anywhere(text: str, start: int, end: int):
    piece = text[min(start, end): max(start, end)]
    _check(piece)
    f = log_reader().facts_of_text(piece)
    if f.max_mamba_cache_size is not None:
        assert f.max_mamba_cache_size in (24, 2)  # a number cut short ("24" -> "2") is still one of the two


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2000))
def test_random_bytes(raw: bytes):
    _check(raw)
    normalize(raw)


@settings(max_examples=5, deadline=None)
@given(st.sampled_from(INCIDENT), st.floats(0.3, 1.0))
def test_planner_path_never_raises_on_cut_logs(text: str, frac: float):
    d = diagnose_text(text[: int(len(text) * frac)], with_fixes=True)
    json.dumps(d.to_json())
