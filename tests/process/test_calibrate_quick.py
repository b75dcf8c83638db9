"""`specbench calibrate --quick MATRIX` (issue 35): the smallest matrix that pins the step model for one GPU, release
and model, derived from the user's matrix; its plan and time said before it runs; the calibration it writes is used
by `predict`; nothing of the user's is overwritten. The full run is recorded from the device
(tests/data/h100-context-sglang-0.5.15.post1/: quick.calibration.json, the store of its first call)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from paths import ROOT
from specbench.matrix.expansion import expand
from specbench.matrix.toml_load import parse_matrix
from specbench.predict.quick import quick_matrix

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CONTEXT = ROOT / "examples" / "h100-sglang-qwen3-8b-context.toml"
DATA = ROOT / "tests" / "data" / "h100-context-sglang-0.5.15.post1"


def sb(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specbench", *argv], capture_output=True, text=True, timeout=300,
                          cwd=ROOT)


def _doc(path: Path) -> dict:
    return tomllib.loads(path.read_text(encoding="utf-8"))


def test_the_quick_matrix_of_the_context_matrix():
    import tomli_w

    plan = quick_matrix(_doc(CONTEXT))
    assert plan.spec_label == "eagle3" and plan.simulated
    assert plan.concurrencies == (1, 32) and plan.prompts == (512, 8192) and plan.output_tokens == 128
    assert (plan.servers, plan.cells) == (3, 12)
    spec = parse_matrix(tomli_w.dumps(plan.doc), "quick", ROOT)
    tuples, cells = expand(spec)
    assert len(tuples) == 3 and len(cells) == 12
    sims = sorted(t.settings.get("simulated_accept_len") or 0 for t in tuples)
    assert sims == [0, 2.0, 3.0]
    # the user's launch is kept: command, [plan], first server settings; the tree variant is not measured
    assert spec.command == _doc(CONTEXT)["command"] and spec.plan.gpu == "H100"
    assert all(t.settings.get("eagle_topk") in (None, 1) for t in tuples)


def test_a_matrix_beyond_the_quick_range_and_an_ar_only_matrix_say_so():
    doc = _doc(CONTEXT)
    doc["client"]["concurrency"] = [1, 128]
    doc["server"]["context_length"] = 2048
    plan = quick_matrix(doc)
    assert plan.concurrencies == (1, 32)
    assert any("concurrency 128 is above" in n for n in plan.notes)
    assert any("context_length 2048 raised to" in n for n in plan.notes)
    assert plan.doc["server"]["context_length"] >= max(plan.prompts) + plan.output_tokens
    doc["server"]["spec"] = [{"label": "ar"}]
    ar = quick_matrix(doc)
    assert ar.spec_label is None and ar.servers == 1 and any("AR only" in n for n in ar.notes)


def test_dry_run_prints_the_matrix_and_the_time(tmp_path):
    r = sb("calibrate", "--quick", str(CONTEXT), "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "3 boots, 12 cells, about" in r.stderr and "min" in r.stderr
    doc = tomllib.loads(r.stdout)
    assert doc["client"]["prompt_tokens"] == [512, 8192] and doc["name"].endswith("-quick-calibration")


def test_the_engine_that_cannot_simulate_runs_the_configuration_at_its_own_acceptance():
    r = sb("calibrate", "--quick", str(ROOT / "examples" / "demo.toml"), "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "no simulated acceptance here" in r.stderr and "2 boots" in r.stderr
    doc = tomllib.loads(r.stdout)
    assert doc["client"]["dataset"] == _doc(ROOT / "examples" / "demo.toml")["client"]["dataset"]
    assert all("simulated_accept_len" not in s for s in doc["server"]["spec"])


@pytest.mark.parametrize("target", ["store", "matrix", "foreign"])
def test_out_never_overwrites_what_is_not_a_calibration(tmp_path, target):
    store = tmp_path / "s.db"
    store.write_bytes((DATA / "h100-quick-8of12.db").read_bytes())
    matrix = tmp_path / "m.toml"
    matrix.write_text(CONTEXT.read_text(encoding="utf-8"), encoding="utf-8")
    foreign = tmp_path / "notes.json"
    foreign.write_text('{"mine": 1}\n', encoding="utf-8")
    out = {"store": store, "matrix": matrix, "foreign": foreign}[target]
    before = out.read_bytes()
    r = sb("calibrate", str(store), "--out", str(out))
    assert r.returncode != 0 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert out.read_bytes() == before
    # a calibration file is replaced
    cal = tmp_path / "cal.json"
    assert sb("calibrate", str(store), "--out", str(cal)).returncode == 0
    assert sb("calibrate", str(store), "--out", str(cal)).returncode == 0


def test_a_store_given_twice_counts_once(tmp_path):
    store = tmp_path / "s.db"
    store.write_bytes((DATA / "h100-quick-8of12.db").read_bytes())
    link = tmp_path / "link.db"
    link.symlink_to(store)
    r = sb("calibrate", str(store), str(link))
    assert r.returncode == 0, r.stderr
    assert "counted once" in r.stderr
    doc = json.loads(r.stdout)
    assert doc["stores"] == [str(store)] and doc["classes"][0]["n_step"] == 8


def test_the_device_quick_calibration_is_used_by_a_later_prediction():
    """quick.calibration.json: written by `calibrate --quick` on the lent H100 (12 cells: AR and EAGLE3 at c = 1 / 32,
    prompts 512 / 8192, simulated accept 2 / 3); `predict --calibration` of the same matrix uses its H100 class, the
    chain cells inside its coverage calibrated, the tree (topk 4) extrapolated, saying so."""
    cal = DATA / "quick.calibration.json"
    doc = json.loads(cal.read_text(encoding="utf-8"))
    assert doc["coverage"]["prompt"] == [512, 8192] and doc["coverage"]["gpus"] == ["H100"]
    r = sb("predict", str(CONTEXT), "--calibration", str(cal), "--json")
    assert r.returncode == 0, r.stderr
    pred = json.loads(r.stdout)
    assert pred["calibration"] == str(cal)
    for c in pred["cells"]:
        assert "calibrated: sglang 0.5.15.post1 / H100 / triton / graphs / Qwen/Qwen3-8B" in c["source"]
        assert c["speedup_lo"] <= c["speedup"] <= c["speedup_hi"] and c["tok_s_lo"] < c["tok_s"] < c["tok_s_hi"]
        if c["label"] == "eagle3-tree4-sim2.5":
            assert c["calibration_state"] == "extrapolated"
            assert any("tree width topk 4" in w for w in c["outside_calibration"])
        else:
            assert c["calibration_state"] == "calibrated", c


def test_the_quick_matrix_is_never_written_over_a_file_it_did_not_write(tmp_path):
    """The quick matrix goes beside the store (STORE.toml): a user's file there is refused before anything boots."""
    mine = tmp_path / "bench.toml"
    mine.write_text("# my matrix\nname = 'x'\n", encoding="utf-8")
    r = sb("calibrate", "--quick", str(CONTEXT), "--store", str(tmp_path / "bench.sqlite"),
           "--out", str(tmp_path / "cal.json"))
    assert r.returncode == 2 and "not a quick matrix specbench wrote" in r.stderr and "Traceback" not in r.stderr
    assert mine.read_text(encoding="utf-8") == "# my matrix\nname = 'x'\n"
    assert not (tmp_path / "bench.sqlite").exists() and not (tmp_path / "cal.json").exists()
