"""`run --order predicted`: the servers the model rates highest run first (AR, the baseline, before them); the
runner honours the order within each phase on a real run (instant server, real store)."""

from __future__ import annotations

import sys
from pathlib import Path

from predict_stores import local_matrix
from proc_helpers import free_port
from run_helpers import _matrix_head, make_tokenizer
from run_helpers import rows as store_rows
from specbench.matrix.expansion import expand
from specbench.matrix.preflight import dry_run
from specbench.matrix.runner import RunOptions, run_matrix
from specbench.matrix.toml_load import load_matrix
from specbench.predict.calibration import shipped
from specbench.predict.plan_matrix import predict_spec, server_order


def test_predicted_order_is_ar_then_best_speedup_first(tmp_path: Path):
    spec, _ = load_matrix(local_matrix(tmp_path))
    rows = dry_run(spec)
    order = server_order(rows, predict_spec(spec, rows, shipped()))
    label = {r["server_id"]: r["label"] for r in rows}
    assert [label[s] for s in order] == ["ar", "eagle3-sim3.5", "eagle3-sim2.5", "eagle3-sim1.5"]


def test_the_runner_runs_servers_in_the_given_order(tmp_path: Path):
    tok = make_tokenizer(tmp_path / "tok")
    cmd = [sys.executable, "-m", "specbench.testing.instant_server", "--burst", "1"]
    m = tmp_path / "m.toml"
    m.write_text(_matrix_head("order", cmd, free_port(), tok, ready_s=30, stop_s=5) + """
[server]
tp = 1

[[server.spec]]
label = "ar"

[[server.spec]]
label = "spec3"
algorithm = "draft_model"
flags = { "--accept-length" = 3 }

[client]
concurrency = [1]
prompt_tokens = 16
output_tokens = 8
num_requests = 2
warmup_requests = 0
""")
    spec, text = load_matrix(m)
    tuples, _ = expand(spec)
    by_label = {st.settings["label"]: st.server_id for st in tuples}
    assert [st.settings["label"] for st in tuples] == ["ar", "spec3"]  # the matrix's own order
    store = tmp_path / "r.sqlite"
    rep = run_matrix(spec, text, str(m), RunOptions(store_path=store, progress=False,
                                                    order=(by_label["spec3"], by_label["ar"])))
    assert rep.done == 2 and not rep.failed
    started = store_rows(store, "SELECT label FROM cells ORDER BY started_at")
    assert [r[0] for r in started] == ["spec3", "ar"]
