"""A store's measured speedups against prediction files written before it ran (`specbench predict MATRIX --json`),
cell by cell (the cell ids of the matrix).

    python3 benchmarks/prediction_vs_store.py STORE PREDICTION.json [PREDICTION.json ...]

Prints one table per prediction file: concurrency, prompt, measured speedup (the cell's output tok/s over the AR
cell's at the same concurrency and prompt), the prediction with its interval, the error and whether the interval
holds the measurement. Standard library only (the store is read read-only).
"""

from __future__ import annotations

import json
import sqlite3
import sys

db = sys.argv[1]
c = sqlite3.connect(f'file:{db}?mode=ro', uri=True)
meas = {}
for cid, label, cl, st, m in c.execute("select cell_id, label, client_json, status, metrics_json from cells"):
    if st == 'done':
        cl = json.loads(cl); m = json.loads(m)
        meas[cid] = (label, cl['concurrency'], cl['prompt_tokens'], m['output_throughput'])
ar = {(v[1], v[2]): v[3] for v in meas.values() if v[0] == 'ar'}
for name in sys.argv[2:]:
    d = json.load(open(name))
    print("==", name.split('/')[-1], d.get('calibration', '')[:100] if isinstance(d.get('calibration'), str) else '')
    print("| c | prompt | measured speedup | predicted [interval] | error | inside | state |")
    for p in d['cells']:
        if p['cell'] in meas and p['label'] != 'ar' and p.get('speedup') is not None:  # None: not predicted
            label, cc, pt, tput = meas[p['cell']]
            s = tput / ar[(cc, pt)]
            err = p['speedup'] / s - 1
            lo, hi = p.get('speedup_lo'), p.get('speedup_hi'); inside = lo is not None and lo <= s <= hi; p['speedup_lo'] = lo if lo is not None else float('nan'); p['speedup_hi'] = hi if hi is not None else float('nan')
            print(f"| {cc} | {pt} | {s:.3f} | {p['speedup']:.3f} [{p['speedup_lo']:.2f}, {p['speedup_hi']:.2f}] | {100*err:+.1f} % | {'yes' if inside else '**no**'} | {p['calibration_state']} |")
