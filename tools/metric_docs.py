"""Rewrite (or with --check, compare) docs/contracts.md's client-metric table from load/metric_table.py.

Run: PYTHONPATH=src python tools/metric_docs.py [--check]
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from specbench.load.metric_table import contracts_table

DOC = Path(__file__).resolve().parents[1] / "docs" / "contracts.md"
BLOCK = re.compile(r"(<!-- metric-table:start -->\n)(.*?)(\n<!-- metric-table:end -->)", re.S)


def main() -> int:
    text = DOC.read_text(encoding="utf-8")
    found = BLOCK.search(text)
    if found is None:
        print("docs/contracts.md has no metric-table block", file=sys.stderr)
        return 2
    if "--check" in sys.argv[1:]:
        if found.group(2) != contracts_table():
            print("docs/contracts.md's metric table differs from load/metric_table.py: run tools/metric_docs.py",
                  file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text[:found.start(2)] + contracts_table() + text[found.end(2):], encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
