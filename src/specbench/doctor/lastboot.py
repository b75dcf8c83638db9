"""A log's last boot, read and parsed: the bounded bytes of the file, the facts and failure of its last boot (with the
errors it survived, a deliberate stop, its warnings and whether it reached the last start-up steps), and the status
that follows from them (started, failed or unknown). Everything the doctor says starts from this.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from specbench.doctor import reading
from specbench.logs.facts import LogFacts
from specbench.logs.failures import Failure, stop_index
from specbench.logs.normalize import decode, normalize
from specbench.logs.reader import read_log_bounded
from specbench.logs.warnings import LogWarning


def read_log(path: str | Path) -> bytes:
    """The log's bytes, bounded (logs/reader.py: regular files only, a size cap, cut long lines, head + tail, and the
    middle's failure, boot and readiness lines);
    UserError (one line) for a missing file, a folder, a FIFO/device, an unreadable or too large file."""
    return read_log_bounded(path, reading.log_reader().search_words())


def log_text(raw: bytes | str) -> str:
    """The log as text (undecodable bytes replaced)."""
    return raw if isinstance(raw, str) else raw.decode("utf-8", errors="replace")


def parse_raw(raw: bytes | str) -> tuple[LogFacts, Failure | None]:
    """Facts and failure of the last boot in the text. Never raises."""
    parsed = parse_all(raw)
    return parsed.facts, parsed.failure


@dataclass(frozen=True)
class Parsed:
    """The last boot of a log as the doctor reads it."""

    facts: LogFacts
    failure: Failure | None
    survived: tuple[str, ...]  # exception lines the engine printed before it went on to serve
    stopped: bool  # a deliberate stop (SIGTERM) is in the boot
    warnings: tuple[LogWarning, ...] = ()
    late_boot: bool = False  # a record of the last start-up steps (graph capture, KV allocated) on any rank


def parse_all(raw: bytes | str) -> Parsed:
    """The last boot of the text, parsed with every engine's log knowledge (reading.py). Never raises."""
    reader = reading.log_reader()
    boots = reader.boots(normalize(decode(raw)))
    if not boots:
        return Parsed(LogFacts(boots=0), None, (), False)
    lines = boots[-1]
    facts, failure = reader.facts(lines, boots=len(boots)), reader.failure(lines)
    if failure is not None and failure.kind == "max_running_requests_zero" and facts.max_running_requests is None:
        facts = replace(facts, max_running_requests=0)  # the assertion's own statement: the engine ended at 0
    warns = tuple(reader.warnings_in(lines, facts))
    return Parsed(facts, failure, tuple(reader.survived_errors(lines)), stop_index(lines) is not None, warns,
                  reader.reached_late_boot(lines))


def boot_status(facts: LogFacts, failure: Failure | None, warnings: tuple[LogWarning, ...] = (),
                late_boot: bool = False) -> str:
    """failed: a boot failure; started: the engine said it serves, served, or got past KV sizing to the last start-up
    steps (CUDA-graph capture, vLLM's KV cache size / block lines) with no error, or printed a cap (caps are printed
    once the limits are resolved); unknown otherwise."""
    if failure is not None and failure.boot_failure:
        return "failed"
    if facts.ready or facts.accept_lengths or facts.gen_throughputs or facts.running_requests:
        return "started"
    if failure is not None:  # a request-level refusal implies the server was up
        return "started"
    if late_boot or facts.graphs:
        return "started"
    if any(w.cap for w in warnings):
        return "started"
    return "unknown"


