"""Regenerate the module table of docs/structures.md from each module's docstring (first paragraph).

Run: python3 tools/structures.py   (rewrites the table between "| module | holds |" and "## The planner API")
     python3 tools/structures.py --check   (exit 1, naming the modules, when the table is not what it would write)
"""

from __future__ import annotations

import ast
import glob
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def rows() -> list[tuple[str, str]]:
    out = []
    for f in sorted(glob.glob(str(ROOT / "src/specbench/**/*.py"), recursive=True)):
        if f.endswith(("__init__.py", "__main__.py")):
            continue
        doc = ast.get_docstring(ast.parse(Path(f).read_text())) or ""
        first = " ".join(doc.strip().split("\n\n")[0].split())
        out.append((str(Path(f).relative_to(ROOT / "src/specbench")), first.replace("|", "\\|")))
    return out


def regenerated(d: str) -> str:
    """docs/structures.md's text with its module table as the docstrings say today."""
    start = d.index("| module | holds |")
    end = d.index("## The planner API")
    table = "| module | holds |\n|---|---|\n" + "".join(f"| `{m}` | {h} |\n" for m, h in rows())
    table += "\n(Generated from each module's docstring by `python3 tools/structures.py`.)\n\n"
    return d[:start] + table + d[end:]


def main(argv: list[str]) -> int:
    p = ROOT / "docs/structures.md"
    d = p.read_text()
    new = regenerated(d)
    if "--check" in argv:
        if new == d:
            return 0
        old_rows, new_rows = set(d.splitlines()), set(new.splitlines())
        print("docs/structures.md is stale (run python3 tools/structures.py):")
        for line in sorted(new_rows - old_rows):
            print("  missing or changed:", line[:120])
        for line in sorted(old_rows - new_rows):
            print("  no longer so:", line[:120])
        return 1
    p.write_text(new)
    return 0


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
