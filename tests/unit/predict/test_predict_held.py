"""A cell whose launch holds fewer requests than it asks (its KV tokens at the cell's prompt + output) is predicted at
the batch that runs (predict/cells.py::held, plan/reach.py::reach_of): the same batch, tok/s and limit as the
"fastest setup that fits" table beside it. The H100 Qwen3-30B-A3B matrix at 8,192-token prompts plans ~106k KV
tokens: at c = 32 about 12 run at once; at 2,048 tokens all 32 do."""

from __future__ import annotations

from pathlib import Path

import pytest

from paths import ROOT
from specbench.matrix.preflight import dry_run
from specbench.matrix.toml_load import load_matrix
from specbench.plan.reach import request_length
from specbench.predict.calibration import shipped
from specbench.predict.cells import held
from specbench.predict.model import CellShape
from specbench.predict.plan_matrix import predict_spec
from specbench.specs.resolve import load_model_spec

CONFIGS = ROOT / "src" / "specbench" / "data" / "configs"
EXAMPLE = "examples/h100-sglang-qwen3-moe-uniform-long.toml"


def _matrix(tmp_path: Path) -> Path:
    drafter = tmp_path / "q3_30b_eagle3"  # the matrix's drafter folder must exist (matrix/toml_load.py)
    drafter.mkdir(exist_ok=True)
    (drafter / "config.json").write_text((CONFIGS / "specforge__qwen3-30B-A3B-eagle3.json").read_text())
    path = tmp_path / "long.toml"
    path.write_text((ROOT / EXAMPLE).read_text().replace("/tmp/models/q3_30b_eagle3", str(drafter)))
    return path


def test_a_kv_bound_cell_is_predicted_at_the_batch_its_kv_holds(tmp_path: Path) -> None:
    spec, _ = load_matrix(_matrix(tmp_path))
    rows = dry_run(spec)
    preds = {(p.label, p.concurrency, p.load): p for p in predict_spec(spec, rows, shipped())}
    kv = next(r["plan_limits"]["kv_tokens"] for r in rows if r["label"] == "ar")
    long_ar = preds[("ar", 32, "8192+128")]
    assert long_ar.batch == kv // (8192 + 128) < 32
    assert preds[("ar", 32, "2048+128")].batch == 32          # 32 x 2,176 tokens fit
    assert preds[("ar", 8, "8192+128")].batch == 8
    spec_long = preds[("eagle3-sim2.5", 32, "8192+128")]
    assert spec_long.batch < 32 and spec_long.speedup is not None
    # the throughput is the held batch's: the c = 32 cell predicts no more than 32 / batch times the c = 8 one's
    assert long_ar.tok_s is not None and preds[("ar", 8, "8192+128")].tok_s is not None
    assert long_ar.tok_s < preds[("ar", 8, "8192+128")].tok_s * long_ar.batch / 8 * 1.2


def test_held_lowers_only_a_cap_the_kv_does_not_reach() -> None:
    target = load_model_spec(str(CONFIGS / "Qwen__Qwen3-8B.json"))
    shape = CellShape(target=target, draft=None, method="ar", num_steps=0, verify_tokens=1, tp=1, concurrency=32,
                      cap=32, prompt_tokens=8192, output_tokens=128)
    plan = {"status": "ok", "engine_cap": 32, "max_running_requests": 32, "kv_tokens": 50_000}
    assert held(shape, plan, 8320).batch == 50_000 // 8320
    assert held(shape, {**plan, "kv_tokens": 400_000}, 8320).batch == 32
    assert held(shape, None, 8320) == shape                                  # no plan: the cap stands
    assert held(shape, {"status": "fails", "error": "OOM"}, 8320) == shape    # a launch that fails is not a batch
    assert held(shape, plan, None) == shape  # a dataset's lengths are not fixed: no KV limit (as plan/reach.py)
    with pytest.raises(ValueError, match="longer than the 5,000 KV tokens"):
        held(shape, {**plan, "kv_tokens": 5_000}, 8320)                       # nothing of it runs


def test_request_length_is_the_fixed_lengths_only() -> None:
    assert request_length({"prompt_tokens": 2048, "output_tokens": 128}) == 2176
    assert request_length({"prompt_len": 2048, "output_len": 128}) is None   # a dataset's caps
    assert request_length({"prompt_tokens": 2048}) is None


def test_an_ar_twin_outside_the_matrix_is_held_by_the_ar_servers_kv(tmp_path: Path) -> None:
    """A speculative cell whose AR cell is not in the matrix is compared with an AR twin at the AR server's cap,
    held to its KV: removing the c = 32, 8,192-token AR cell must not move the speculative prediction far (before,
    the twin ran at the AR server's cap of 32 and the speedup fell 20 %)."""
    spec, _ = load_matrix(_matrix(tmp_path))
    rows = dry_run(spec)
    full = {(p.label, p.concurrency, p.load): p for p in predict_spec(spec, rows, shipped())}
    key = ("eagle3-sim2.5", 32, "8192+128")
    cut = [r for r in rows if not (r["label"] == "ar" and r["client"]["concurrency"] == 32
                                   and r["client"]["prompt_tokens"] == 8192)]
    alone = {(p.label, p.concurrency, p.load): p for p in predict_spec(spec, cut, shipped())}
    assert full[key].speedup is not None and alone[key].speedup is not None
    assert alone[key].speedup == pytest.approx(full[key].speedup, rel=0.05)


def test_the_ttft_a_queued_client_sees_is_the_measured_one(tmp_path: Path) -> None:
    """Where a closed-loop cell asks more than its launch holds, the client's TTFT includes the wait for a slot
    (predict/model.py::queued_ttft_s, Little's law): the H100 MoE store measured a mean TTFT of 9.09 s (AR) and
    13.98 s (EAGLE3) at c = 32, 8,192 tokens, 12 / 11 running, where the service's own first token is ~1.6 s.
    Where all run at once, the two TTFTs are one."""
    import sqlite3

    from paths import DATA

    spec, _ = load_matrix(_matrix(tmp_path))
    preds = {(p.label, p.concurrency, p.load): p for p in predict_spec(spec, dry_run(spec), shipped())}
    con = sqlite3.connect(f"file:{DATA / 'h100-moe-long-sglang-0.5.15.post1' / 'h100-moel.db'}?mode=ro", uri=True)
    try:
        measured = dict(con.execute(
            "SELECT c.label, avg(r.ttft_s) FROM requests r JOIN cells c ON r.cell_id = c.cell_id WHERE r.error IS NULL"
            " AND c.client_json LIKE '%\"prompt_tokens\": 8192%' AND c.client_json LIKE '%\"concurrency\": 32%'"
            " GROUP BY c.label").fetchall())
    finally:
        con.close()
    for label in ("ar", "eagle3-sim2.5"):
        p = preds[(label, 32, "8192+128")]
        assert p.ttft_seen_ms is not None and p.ttft_ms is not None
        assert p.ttft_seen_ms / 1e3 == pytest.approx(measured[label], rel=0.25), label
        assert p.ttft_ms / 1e3 < 0.25 * measured[label]  # the service's own first token: far from what was seen
    unqueued = preds[("ar", 8, "8192+128")]
    assert unqueued.ttft_seen_ms == unqueued.ttft_ms
