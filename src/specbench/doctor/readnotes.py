"""What of the log the doctor read, said in a note: the reader's marker (logs/reader.py) when the middle of a long
log was searched rather than read line by line."""

from __future__ import annotations

import re

_MARKER = re.compile(r"\[specbench: ([\d,]+) lines \(([\d,]+) bytes\) in the middle of the log (?:searched for failure, "
                     r"boot and readiness lines; ([\d,]+) kept below(?:, ([\d,]+) more matching lines dropped)?|"
                     r"not read)")
_CUT = "[specbench: line cut at 1 MiB]"


def _n(s: str | None) -> int:
    return int(s.replace(",", "")) if s else 0


def read_notes(text: str) -> list[str]:
    notes: list[str] = []
    m = _MARKER.search(text)
    if m:
        lines, size = _n(m.group(1)), _n(m.group(2)) / 2**20
        if m.group(3) is None:
            notes.append(f"Read the start and the end of the log; {lines:,} lines ({size:,.1f} MiB) between were not "
                         "read.")
        else:
            dropped = _n(m.group(4))
            notes.append(f"Read the first and the last MiB of the log in full; the {lines:,} lines ({size:,.1f} MiB) "
                         f"between were searched for failure, boot and readiness lines and {_n(m.group(3)):,} kept"
                         + (f" ({dropped:,} more over the cap were dropped)" if dropped else "") + ".")
    cuts = text.count(_CUT)
    if cuts:
        notes.append(f"{cuts:,} line{'s' if cuts > 1 else ''} over 1 MiB {'were' if cuts > 1 else 'was'} cut at "
                     "1 MiB.")
    return notes
