"""The stored numbers recover a known truth: `specbench run` against the instant server's ground-truth scheduler
(testing/instant_truth.py: every step takes STEP_MS, at most CAP requests run at once, draft position i is accepted
with RATES[i] given the ones before). Stated tolerances: TPOT is never below the step time it is made of (a sleep
never ends early) and within 2x of it (a busy machine wakes late); the accept length and the per-position acceptance
are sampled (seeded) over ~150 verify steps: +-0.3 tokens and +-0.12; the cap and the effective concurrency exactly."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from proc_helpers import free_port
from run_helpers import _matrix_head, cli, make_tokenizer, rows
from specbench.testing.instant_truth import Finished, acceptance_per_pos, tokens_per_step

# slow: a whole `specbench run` or a process fault per test, seconds each: `make test-fast` leaves it out
pytestmark = pytest.mark.slow

STEP_MS = 10.0
CAP = 2
RATES = (0.8, 0.6, 0.4)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The store, and the folder where each server wrote what it really did (`--truth-file`, instant_truth.py)."""
    d = tmp_path_factory.mktemp("truth")
    tok = make_tokenizer(d / "tok")
    cmd = [sys.executable, "-m", "specbench.testing.instant_server", "--step-ms", str(STEP_MS),
           "--max-running", str(CAP)]
    rates = ",".join(str(r) for r in RATES)
    m = d / "m.toml"
    m.write_text(_matrix_head("truth", cmd, free_port(), tok, ready_s=30, stop_s=5) + f"""
[[server.spec]]
label = "ar"
flags = {{ "--truth-file" = "{d / 'ar.json'}" }}

[[server.spec]]
label = "spec-vllm-counters"
algorithm = "draft_model"
flags = {{ "--accept-rates" = "{rates}", "--truth-file" = "{d / 'vllm.json'}" }}

[[server.spec]]
label = "spec-sglang-counters"
algorithm = "draft_model"
flags = {{ "--accept-rates" = "{rates}", "--metrics" = "sglang", "--seed" = 1, "--truth-file" = "{d / 'sglang.json'}" }}

[client]
concurrency = [1, 4]
prompt_tokens = 24
output_tokens = 48
num_requests = 8
warmup_requests = 1

[[override]]
when = {{ spec = ["spec-vllm-counters", "spec-sglang-counters"] }}
client = {{ concurrency = 1 }}

[[override]]
when = {{ spec = "spec-sglang-counters" }}
client = {{ warmup_requests = 0 }}
""")
    out = d / "r.sqlite"
    r = cli("run", str(m), "--store", str(out), "--no-progress")
    assert r.returncode == 0, r.stderr
    return out, d


@pytest.fixture(scope="module")
def store(run: tuple[Path, Path]) -> Path:
    return run[0]


def _truth(run: tuple[Path, Path], name: str) -> dict:
    return json.loads((run[1] / f"{name}.json").read_text())


def _finished(run: tuple[Path, Path], name: str) -> list[Finished]:
    """The requests the server `name` finished, in order (the truth file's `requests`)."""
    return [Finished(*r) for r in _truth(run, name)["requests"]]


def _metrics(store: Path) -> dict[tuple[str, int], dict]:
    return {(label, json.loads(c)["concurrency"]): json.loads(mj) for label, c, mj in
            rows(store, "SELECT label, client_json, metrics_json FROM cells")}


def test_tpot_recovers_the_step_time(store: Path, run: tuple[Path, Path]) -> None:
    m = _metrics(store)
    ar = m[("ar", 1)]
    assert STEP_MS <= ar["tpot_ms_mean"] <= 2 * STEP_MS
    # against the step time the server really took (its sleeps overshoot on a busy machine): within 15 %
    real = _truth(run, "ar")["mean_step_ms"]
    assert ar["tpot_ms_mean"] == pytest.approx(real, rel=0.15)
    assert ar["itl_per_token_ms_mean"] == pytest.approx(real, rel=0.15) and ar["itl_kind"] == "inter-chunk"
    truth = STEP_MS / tokens_per_step(RATES)  # one verify step per `tokens_per_step` tokens
    for label in ("spec-vllm-counters", "spec-sglang-counters"):
        assert 0.8 * truth <= m[(label, 1)]["itl_per_token_ms_mean"] <= 2 * truth, label


def test_accept_length_is_one_quantity_for_both_engines_counters(store: Path, run: tuple[Path, Path]) -> None:
    m = _metrics(store)
    truth = tokens_per_step(RATES)
    v = m[("spec-vllm-counters", 1)]
    assert v["accept_length_common_source"] == "vllm_metrics"
    assert v["accept_length_common"] == pytest.approx(truth, abs=0.3)
    for got, want in zip(v["acceptance_per_pos"], acceptance_per_pos(RATES)):
        assert got == pytest.approx(want, abs=0.12)
    s = m[("spec-sglang-counters", 1)]
    assert s["accept_length_common_source"] == "sglang_metrics"  # (generated - requests) / verify calls
    assert s["accept_length_common"] == pytest.approx(truth, abs=0.3)
    # no warm-up on that server: its measured requests (48 tokens; the readiness probe asked 2) are what the cell's
    # counters hold, so the conversion gives back exactly the tokens per verify step they realized, and SGLang's own
    # definition the same with the prefill token counted as a verify step's
    reqs = [r for r in _finished(run, "sglang") if r.tokens == 48]
    assert len(reqs) == 8
    tokens, steps, accepted = (sum(getattr(r, k) for r in reqs) for k in ("tokens", "verify_steps", "accepted"))
    assert s["accept_length_common"] == pytest.approx(1 + accepted / steps, rel=1e-9)
    assert s["accept_length_common"] == pytest.approx((tokens - 8) / steps, rel=1e-9)
    assert s["accept_length_mean"] == pytest.approx(tokens / steps, rel=1e-9)
    assert m[("ar", 1)]["accept_length_common"] is None


def test_effective_concurrency_cap_and_queueing(store: Path) -> None:
    m = _metrics(store)
    one, four = m[("ar", 1)], m[("ar", 4)]
    assert (one["running_cap"], four["running_cap"]) == (CAP, CAP)
    assert "internal_states" in four["running_cap_source"]
    assert (one["effective_concurrency"], one["queued"]) == (1, False)
    assert (four["effective_concurrency"], four["queued"]) == (CAP, True)
    assert four["oversaturated"] and "queued" in four["saturation_reason"]
    assert not one["oversaturated"]
    assert m[("spec-vllm-counters", 1)]["cap_differs_from_baseline"] is False


def test_counts_are_verified_and_counters_skip_the_warmup(store: Path, run: tuple[Path, Path]) -> None:
    m = _metrics(store)
    for (label, _c), x in m.items():
        assert x["count_sources"] == {"tokenizer": 8}, label
        assert x["total_output_tokens"] == 8 * 48 and x["early_stops"] == 0
        assert x["prefix_cache_reset"]["reset"] is False  # an `openai` server offers no reset route
        assert x["dataset_cycled"] == (x["distinct_prompts"] < 8)
    # vLLM counters read after the warm-up: the server verified more steps than the cell's counters hold, by the
    # warm-up request's (47 tokens after its prefill, 1 to 1 + len(RATES) a step)
    counters = m[("spec-vllm-counters", 1)]["spec_counters"]
    reqs = _finished(run, "vllm")  # the probe (2 tokens), the warm-up, then the 8 measured (48 each)
    assert [r.tokens for r in reqs] == [2, 48] + [48] * 8
    measured = reqs[2:]
    assert counters["drafts"] == sum(r.verify_steps for r in measured)  # exactly the measured requests' verify steps
    assert counters["accepted"] == sum(r.accepted for r in measured)


def test_arrivals_faster_than_the_server_are_flagged_and_trimmed(tmp_path: Path) -> None:
    """CAP 1, 16 tokens of 10 ms steps: the server serves ~6 requests/s. At 40/s with 16 in flight each request waits
    longer than the one before (TTFT grows through the run: over-saturated); with 1 in flight the client holds the
    arrivals back and TTFT stays flat. Closed loop at c=1 the 12 requests run one after another, each ~8 % of the
    run: `trim_warmup` / `trim_cooldown` of 5 % leave out exactly the first and the last."""
    tok = make_tokenizer(tmp_path / "tok")
    cmd = [sys.executable, "-m", "specbench.testing.instant_server", "--step-ms", "10", "--max-running", "1"]
    m = tmp_path / "m.toml"
    m.write_text(_matrix_head("rate", cmd, free_port(), tok, ready_s=30, stop_s=5) + """
[[server.spec]]
label = "ar"

[client]
concurrency = [1, 16]
request_rate = ["inf", 40.0]
prompt_tokens = 24
output_tokens = 16
num_requests = 12
warmup_requests = 0
trim_warmup = 0.05
trim_cooldown = 0.05
""")
    store = tmp_path / "r.sqlite"
    r = cli("run", str(m), "--store", str(store), "--no-progress")
    assert r.returncode == 0, r.stderr
    cells = {(c["concurrency"], c["request_rate"]): x for c, x in
             ((json.loads(c), json.loads(x)) for c, x in rows(store, "SELECT client_json, metrics_json FROM cells"))}
    flood = cells[(16, 40.0)]
    assert flood["queued"] and flood["oversaturated"]
    assert flood["ttft_growth"] is not None and flood["ttft_growth"] > 2 and "TTFT grew" in flood["saturation_reason"]
    held = cells[(1, 40.0)]
    assert not held["queued"] and not held["oversaturated"]
    one = cells[(1, "inf")]
    assert one["trimmed_requests"] == 2 and one["completed"] == 10
    lo, hi = one["trim_window_s"]
    assert 0 < lo < hi < one["duration_s"] + hi  # the window inside the run
    (n,), = rows(store, "SELECT count(*) FROM requests r JOIN cells c USING(cell_id) WHERE c.client_json LIKE "
                        "'%\"concurrency\": 1,%' AND c.client_json LIKE '%\"inf\"%'")
    assert n == 12  # every request's row is kept; only the metrics leave the ends out


def test_default_request_count_gives_several_waves(tmp_path: Path) -> None:
    m = tmp_path / "m.toml"
    m.write_text('engine = "openai"\ncommand = ["x"]\n[client]\nconcurrency = [1, 64]\n')
    r = cli("run", "--dry-run", "--json", str(m))
    assert r.returncode == 0, r.stderr
    by_c = {x["client"]["concurrency"]: x for x in json.loads(r.stdout)}
    assert "requests_per_concurrency" not in by_c[1]["client"]  # its id stays what it was
    assert by_c[64]["client"]["requests_per_concurrency"] == 4  # 256 requests: 4 waves of 64
    m.write_text('engine = "openai"\ncommand = ["x"]\n[client]\nconcurrency = [1, 64]\nnum_requests = 8\n')
    r = cli("run", "--dry-run", "--json", str(m))
    assert all("requests_per_concurrency" not in x["client"] for x in json.loads(r.stdout))  # the matrix chose
