"""docs/structures.md's module table is generated from the docstrings (tools/structures.py): it must not drift
(issue 38: two modules were missing and nothing checked it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from paths import ROOT


def test_the_module_map_is_what_the_docstrings_say(tmp_path: Path):
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "structures.py"), "--check"], capture_output=True,
                       text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_check_names_a_module_the_map_lacks(tmp_path: Path, monkeypatch):
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import structures
    finally:
        sys.path.pop(0)
    text = (ROOT / "docs" / "structures.md").read_text()
    stale = "\n".join(line for line in text.splitlines() if not line.startswith("| `stored/read.py`")) + "\n"
    assert structures.regenerated(stale) != stale
    assert "| `stored/read.py` |" in structures.regenerated(stale)
