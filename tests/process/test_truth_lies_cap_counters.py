"""A server whose running cap or speculative-decoding counters are false is caught (load/integrity.py::cap_check,
spec_counter_problem; matrix/cellrun.py::truth_verdict): `specbench run` against the instant server's ground truth
(testing/instant_truth.py: at most --max-running requests generate at once; --report-cap and --accepted-scale lie).

- /server_info says a cap of 2 while 4 really run at once: the client sees 4 generating together, the cell is
  `partial` with both numbers, never `done`.
- /server_info says 8 while 2 really run, 8 in flight: `done` (a real engine's KV pool can hold requests back the
  same way), `cap_check` "not_reached" with the numbers, observed 2.
- /metrics shows 3x the accepted draft tokens (more accepted than drafted): `partial`, and no accept length stored.
- the honest servers: `done`, `cap_check` "agrees", the accept length stored."""

from __future__ import annotations

import json
import sys

import pytest

from proc_helpers import free_port
from run_helpers import _matrix_head, cli, make_tokenizer, rows

# slow: a whole `specbench run` or a process fault per test, seconds each: `make test-fast` leaves it out
pytestmark = pytest.mark.slow

RATES = "0.8,0.6,0.4"


@pytest.fixture(scope="module")
def cells(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    d = tmp_path_factory.mktemp("lies")
    tok = make_tokenizer(d / "tok")
    cmd = [sys.executable, "-m", "specbench.testing.instant_server", "--step-ms", "8"]
    m = d / "m.toml"
    m.write_text(_matrix_head("lies", cmd, free_port(), tok, ready_s=30, stop_s=5) + f"""
[[server.spec]]
label = "ar"
flags = {{ "--max-running" = 4 }}

[[server.spec]]
label = "cap-said-2-runs-4"
algorithm = "draft_model"
flags = {{ "--max-running" = 4, "--report-cap" = 2 }}

[[server.spec]]
label = "cap-said-8-runs-2"
algorithm = "draft_model"
flags = {{ "--max-running" = 2, "--report-cap" = 8 }}

[[server.spec]]
label = "honest-spec"
algorithm = "draft_model"
flags = {{ "--max-running" = 4, "--accept-rates" = "{RATES}" }}

[[server.spec]]
label = "accepted-x3"
algorithm = "draft_model"
flags = {{ "--max-running" = 4, "--accept-rates" = "{RATES}", "--accepted-scale" = 3 }}

[client]
concurrency = 4
prompt_tokens = 16
output_tokens = 24
num_requests = 12
warmup_requests = 1

[[override]]
when = {{ spec = "cap-said-8-runs-2" }}
client = {{ concurrency = 8, num_requests = 16 }}
""")
    out = d / "r.sqlite"
    r = cli("run", str(m), "--store", str(out), "--no-progress")
    assert "Traceback" not in r.stderr, r.stderr
    return {label: {"status": status, "reason": reason, **json.loads(mj or "{}")}
            for label, status, reason, mj in rows(out, "SELECT label, status, reason, metrics_json FROM cells")}


def test_a_cap_below_what_ran_fails_the_cell_with_both_numbers(cells: dict[str, dict]) -> None:
    c = cells["cap-said-2-runs-4"]
    assert c["status"] == "partial", c["reason"]
    assert c["cap_check"] == "exceeded" and c["observed_concurrency"] >= 4 > c["running_cap"] + 1
    assert "running cap is 2" in c["reason"] and f"saw {c['observed_concurrency']}" in c["reason"]


def test_a_cap_above_what_ran_is_said_not_reached(cells: dict[str, dict]) -> None:
    c = cells["cap-said-8-runs-2"]
    assert c["status"] == "done", c["reason"]
    assert c["running_cap"] == 8 and c["peak_in_flight"] >= 8
    assert c["cap_check"] == "not_reached" and c["observed_concurrency"] == 2
    assert "at most 2 generated at once" in c["cap_check_reason"]


def test_counters_that_accept_more_than_was_drafted_store_no_acceptance(cells: dict[str, dict]) -> None:
    c = cells["accepted-x3"]
    assert c["status"] == "partial" and "cannot be true" in c["reason"] and "drafted" in c["reason"]
    assert c["accept_length_mean"] is None and c["accept_length_common"] is None
    assert c["acceptance_error"] and "acceptance_per_pos" not in c


def test_the_honest_servers_are_done_and_agree(cells: dict[str, dict]) -> None:
    for label in ("ar", "honest-spec"):
        c = cells[label]
        assert c["status"] == "done", (label, c["reason"])
        assert c["cap_check"] == "agrees" and c["observed_concurrency"] <= 4, label
    spec = cells["honest-spec"]
    assert "acceptance_error" not in spec
    assert 1.5 < spec["accept_length_mean"] < 3.5  # 1 + 0.8 + 0.48 + 0.19 = 2.47 expected (sampled)
