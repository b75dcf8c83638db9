"""Regenerate the module table of docs/structures.md from each module's docstring (first paragraph).

Run: python3 tools/structures.py   (rewrites the table between "| module | holds |" and "## The planner API")
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


def main() -> None:
    p = ROOT / "docs/structures.md"
    d = p.read_text()
    start = d.index("| module | holds |")
    end = d.index("## The planner API")
    table = "| module | holds |\n|---|---|\n" + "".join(f"| `{m}` | {h} |\n" for m, h in rows())
    table += "\n(Generated from each module's docstring by `python3 tools/structures.py`.)\n\n"
    p.write_text(d[:start] + table + d[end:])


if __name__ == "__main__":
    main()
