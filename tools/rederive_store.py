"""Re-read results stores with the current estimators: every done cell's derived keys (load/speedup.py::fill, what
`specbench run` writes after a matrix through matrix/runner.py::fill_speedups) recomputed from the stored metrics
and written back with plain sqlite3, so a recorded store keeps its schema (no column or table is added) and its
per-request rows. Prints each speculative cell's speedups before and after.

    python tools/rederive_store.py STORE [STORE ...]
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from specbench.load import speedup  # noqa: E402


def rederive(db: Path) -> list[str]:
    con = sqlite3.connect(db)
    try:
        rows = [{"cell_id": r[0], "tp": r[1], "algorithm": r[2], "label": r[3], "status": r[4],
                 "client": json.loads(r[5]) if r[5] else {}, "metrics": json.loads(r[6]) if r[6] else None}
                for r in con.execute("SELECT cell_id, tp, algorithm, label, status, client_json, metrics_json "
                                     "FROM cells")]
        done = [r for r in rows if r["status"] == "done" and r["metrics"]]
        lines = []
        for old, new in zip(done, speedup.fill(done)):
            m = new["metrics"]
            if new["metrics"] != old["metrics"]:
                con.execute("UPDATE cells SET metrics_json=? WHERE cell_id=?", (json.dumps(m), old["cell_id"]))
            if not speedup.is_ar(old["algorithm"], old["label"]):
                lines.append(f"{old['label']} c={old['client'].get('concurrency')}: speedup "
                             f"{old['metrics'].get('speedup')} -> {m.get('speedup')} {m.get('speedup_ci95')}, "
                             f"tpot {m.get('tpot_speedup')}, e2e {m.get('e2e_speedup')}, lead {m.get('speedup_lead')}, "
                             f"decision {m.get('decision')}")
        con.commit()
        return lines
    finally:
        con.close()


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(f"== {arg}")
        print("\n".join(rederive(Path(arg))))
