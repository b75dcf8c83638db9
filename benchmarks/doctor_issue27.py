"""`specbench doctor` on the issue-27 excerpts (tests/data/doctor_corpus/issue27/index.json): how many it reads
right, before and after a change. Runs against whichever `specbench` is first on PYTHONPATH (old layout:
`specbench.logs.doctor`; new: `specbench.doctor.doctor`), so the same script measures both sides.

    PYTHONPATH=<old checkout>/src python benchmarks/doctor_issue27.py   # before
    PYTHONPATH=src python benchmarks/doctor_issue27.py                  # after

Scores per excerpt: status (started / capped / failed / unknown as the index says), failure kind, the fix (the
index's expected change is among the doctor's fixes), and false caps (a cap warning on an excerpt whose expected
status is not `capped`). Prints one line per excerpt and the totals.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "data" / "doctor_corpus" / "issue27"

try:
    from specbench.doctor.doctor import diagnose_file
except ImportError:  # the layout before the doctor/ package
    from specbench.logs.doctor import diagnose_file  # type: ignore[no-redef]


def _status(j: dict) -> str:
    return "capped" if j["status"] == "started" and j.get("capped") else j["status"]


def _fix_ok(want: object, fixes: list[dict]) -> bool:
    if want is None:
        return True
    changes = [fx.get("change") or {} for fx in fixes]
    if isinstance(want, str):  # a class of fix: free the GPU, host RAM
        return any(fx.get("kind") == want for fx in fixes)
    assert isinstance(want, dict)
    for change in changes:
        if all(k in change and (v is None or change[k] == v) for k, v in want.items()):
            return True
    return False


def main() -> int:
    index = json.loads((CORPUS / "index.json").read_text())
    ok = {"status": 0, "failure": 0, "fix": 0}
    false_caps = 0
    t0 = time.perf_counter()
    for e in index:
        j = diagnose_file(str(CORPUS / e["file"]), with_fixes=True).to_json()
        got_kind = (j.get("failure") or {}).get("kind")
        fixes = list(j.get("fixes") or []) + [fx for w in j.get("warnings", []) if w.get("cap") for fx in w["fixes"]]
        s = _status(j) == e["status"]
        f = got_kind == e["failure"]
        x = _fix_ok(e["fix"], fixes)
        fc = e["status"] != "capped" and any(w.get("cap") for w in j.get("warnings", []))
        ok["status"] += s
        ok["failure"] += f
        ok["fix"] += x
        false_caps += fc
        print(f"{e['file'][:48]:48} status {_status(j):8} {'ok' if s else 'WANT ' + e['status']:14} "
              f"failure {str(got_kind):34} {'ok' if f else 'WANT ' + str(e['failure'])}"
              f"{'' if x else '  FIX MISSING ' + json.dumps(e['fix'])}{'  FALSE CAP' if fc else ''}")
    n = len(index)
    print(f"\n{n} excerpts: status {ok['status']}/{n}, failure {ok['failure']}/{n}, fix {ok['fix']}/{n}, "
          f"false caps {false_caps}; {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
