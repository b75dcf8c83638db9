"""Where the tests find the repository: ROOT (the repository root, where `specbench` runs and `examples/` lies) and
DATA (tests/data, the committed fixtures). A test module imports them from here, whatever folder of tests/ it is in,
instead of counting parent folders of its own file."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
