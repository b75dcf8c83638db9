"""`specbench predict` / `specbench calibrate` as real CLI processes: bad input ends in one line, the --json keys
are those docs/contracts.md documents, `run --dry-run` carries the prediction, `run --order predicted` orders."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from paths import ROOT
from predict_stores import LLAMA8, local_matrix, write_store
from specbench.predict.model import Params

DOC = ROOT / "docs" / "contracts.md"
MOE_STORE = ROOT / "tests" / "data" / "h200-moe-sglang-0.5.15.post1" / "h200-moe.db"


@pytest.fixture(scope="module")
def moe(tmp_path_factory) -> Path:
    """The MoE example matrix with its drafter folder on disk."""
    return local_matrix(tmp_path_factory.mktemp("moe"))


def sb(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specbench", *argv], capture_output=True, text=True, timeout=300,
                          cwd=cwd)


def one_line_error(r: subprocess.CompletedProcess[str], needle: str) -> None:
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    assert needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def documented(heading: str) -> set[str]:
    lines = DOC.read_text(encoding="utf-8").splitlines()
    keys: set[str] = set()
    for line in lines[lines.index(heading) + 1:]:
        m = re.match(r"\| `([^`]+)` \|", line)
        if m:
            keys.add(m.group(1))
        elif keys and not line.startswith("|"):
            break
    return keys


def test_predict_json_keys_are_the_contract(moe):
    r = sb("predict", str(moe), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert set(doc) == {"matrix", "calibration", "cells", "fits"}
    assert "calibrations/sglang.json" in doc["calibration"]
    cells = doc["cells"]
    assert len(cells) == 16
    for c in cells:
        assert set(c) == documented("## `specbench predict` (and the dry run's `predicted`)")
        # an H200 SGLang 0.5.15 cell has a calibration of its own: calibrated, with an interval around its tok/s;
        # but accept 1.5: the MoE store's cells there measured dummy-weight routing (a stand-in's artifact, kept out
        # of the fit: engines/sglang/simulate.py::collapsed_routing), so the class is calibrated from 2.5 up only
        assert c["tok_s_lo"] < c["tok_s"] < c["tok_s_hi"]
        if "sim1.5" in c["label"]:
            assert c["calibration_state"] == "extrapolated" and "accept length 1.50" in " ".join(c["outside_calibration"])
        else:
            assert c["calibration_state"] == "calibrated"
    for row in doc["fits"]:
        assert set(row) == documented("### Fastest setup that fits (`fits`)")
    ar = [c for c in cells if c["label"] == "ar"]
    spec = [c for c in cells if c["label"] != "ar"]
    assert all(c["speedup"] == 1.0 and c["accept_len"] is None for c in ar)
    assert all(c["speedup_lo"] < c["speedup"] < c["speedup_hi"] for c in spec)
    assert {c["accept_len"] for c in spec} == {1.5, 2.5, 3.5}
    # more accepted tokens per step: faster, at every concurrency
    by = {(c["label"], c["concurrency"]): c["speedup"] for c in spec}
    for conc in (1, 4, 16, 32):
        assert by[("eagle3-sim1.5", conc)] < by[("eagle3-sim2.5", conc)] < by[("eagle3-sim3.5", conc)]


def test_accept_len_and_acceptance_from_store_override(moe):
    fixed = json.loads(sb("predict", str(moe), "--json", "--accept-len", "2").stdout)
    assert {c["accept_len"] for c in fixed["cells"] if c["label"] != "ar"} == {2.0}
    measured = json.loads(sb("predict", str(moe), "--json", "--acceptance-from", str(MOE_STORE)).stdout)
    acc = {c["label"]: c["accept_len"] for c in measured["cells"] if c["label"] != "ar"}
    for label, want in (("eagle3-sim1.5", 1.5), ("eagle3-sim2.5", 2.5), ("eagle3-sim3.5", 3.5)):
        assert acc[label] == pytest.approx(want, abs=0.12) and acc[label] != want  # measured, not the setting


def test_a_gpu_never_calibrated_gets_moved_constants_and_a_wider_interval(tmp_path, moe):
    """Issue 35: the B200 has no calibration; its cells are predicted with the nearest calibrated GPU's constants moved
    by the B200's roofline, `extrapolated`, naming the GPU, with an interval wider than the H200's own."""
    m = local_matrix(tmp_path, replace=(('gpu = "H200"', 'gpu = "B200"'),))
    far = json.loads(sb("predict", str(m), "--json").stdout)["cells"]
    near = json.loads(sb("predict", str(moe), "--json").stdout)["cells"]
    assert {c["source"].split(" (")[0] for c in far} == {"moved: sglang 0.5.15.post1 / H200 / triton / graphs / any "
                                                         "model"}
    for f, n in zip(far, near):
        assert f["calibration_state"] == "extrapolated"
        assert any("GPU B200 never calibrated" in w for w in f["outside_calibration"])
        assert f["tok_s_lo"] < f["tok_s"] < f["tok_s_hi"] and f["sigma_log"] > n["sigma_log"]
        if f["label"] != "ar":
            assert f["speedup_lo"] < f["speedup"] < f["speedup_hi"]
            assert f["speedup_hi"] / f["speedup_lo"] > n["speedup_hi"] / n["speedup_lo"]


def test_calibrate_writes_a_file_predict_reads(tmp_path):
    k = Params(a=5e-4, al=2e-5, p=5e-5, e=1.3, d=3e-4, q=2e-4, f=0.02, g=1.5)
    store = write_store(tmp_path / "syn.db", LLAMA8, k)
    out = tmp_path / "cal.json"
    r = sb("calibrate", str(store), "--out", str(out))
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert set(doc) == documented("### Calibration file")
    assert doc["format"] == "specbench-calibration" and doc["version"] == 2
    assert doc["coverage"]["prompt"] == [512, 512] and doc["out_of_sample"] == {}  # one store: none of its own
    llama = next(c for c in doc["classes"] if c["key"]["model"] == LLAMA8.model)
    # one model alone cannot separate the per-step floors from the roofline multiplier (test_predict_fit.py does,
    # over three models); the fitted constants still reproduce its cells
    assert llama["n_step"] == 12 and llama["step_rel_rms"] < 0.01
    m = local_matrix(tmp_path, replace=(("Qwen/Qwen3-30B-A3B", LLAMA8.model),
                                        ("specforge/qwen3-30B-A3B-eagle3", LLAMA8.draft)))
    pred = json.loads(sb("predict", str(m), "--json", "--calibration", str(out)).stdout)
    assert pred["calibration"] == str(out)  # the shipped calibrations stand behind it for classes it lacks
    assert all(LLAMA8.model in c["source"] for c in pred["cells"])


@pytest.mark.parametrize("argv,needle", [
    (["predict", "/nonexistent/m.toml"], "no such matrix file"),
    (["predict", "MOE", "--calibration", "/nonexistent/cal.json"], "cannot read calibration"),
    (["predict", "MOE", "--accept-len", "0.5"], "--accept-len must be a number >= 1"),
    (["predict", "MOE", "--accept-len", "nan"], "--accept-len must be a number >= 1"),
    (["predict", "MOE", "--accept-len", "inf"], "--accept-len must be a number >= 1"),
    # a store none of whose labels is a speculative configuration of the matrix: said, never a silent fallback
    (["predict", "MOE", "--acceptance-from", str(ROOT / "tests/data/h200-run-sglang-0.5.15.post1/h200.db")],
     "none of the store's labels (mtp)"),
    (["predict", "MOE", "--accept-len", "2", "--acceptance-from", str(MOE_STORE)], "not both"),
    (["predict", "MOE", "--acceptance-from", "/nonexistent/s.db"], "no such results store"),
    (["calibrate", "/nonexistent/s.db"], "no such results store"),
])
def test_one_line_errors(moe, argv, needle):
    one_line_error(sb(*[str(moe) if a == "MOE" else a for a in argv]), needle)


@pytest.mark.parametrize("text,needle", [
    ("{not json", "not JSON"),
    ('{"format": "other"}', "not a specbench calibration file"),
    ('{"format": "specbench-calibration", "version": 99}', "calibration version 99"),
    ('{"format": "specbench-calibration", "version": 1, "classes": [{"key": {}}]}', "classes[0]: malformed"),
    ('{"format": "specbench-calibration", "version": 1, "classes": [], "global": {"a": "x"}}', "must be numbers"),
    # hand-edited constants a step cost cannot have (NaN, negative, 1e300, a boolean) are refused, not predicted
    ('{"format": "specbench-calibration", "version": 2, "classes": [], "global": {"a": NaN}}', "physical range"),
    ('{"format": "specbench-calibration", "version": 2, "classes": [], "global": {"p": -1e-3}}', "physical range"),
    ('{"format": "specbench-calibration", "version": 2, "classes": [], "global": {"e": 1e300}}', "physical range"),
    ('{"format": "specbench-calibration", "version": 2, "classes": [], "global": {"e": true}}', "physical range"),
    # "false" is a string, and a true one: refused, not read as CUDA graphs on
    ('{"format": "specbench-calibration", "version": 2, "global": {}, "classes": [{"key": {"engine": "sglang", '
     '"engine_version": "0.5.15.post1", "gpu": "H200", "attention_backend": "triton", "cuda_graphs": "false"}, '
     '"params": {}}]}', "cuda_graphs must be true or false"),
])
def test_bad_calibration_files(tmp_path, moe, text, needle):
    f = tmp_path / "cal.json"
    f.write_text(text, encoding="utf-8")
    one_line_error(sb("predict", str(moe), "--calibration", str(f)), needle)


def test_calibrate_refuses_a_store_without_usable_cells(tmp_path):
    bad = tmp_path / "not-sqlite.db"
    bad.write_text("hello", encoding="utf-8")
    r = sb("calibrate", str(bad))
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    # a catalog GPU with no roofline ceilings (specs/gpu.py::PERF; the RTX PRO 6000 Blackwell has them now)
    store = write_store(tmp_path / "rtx5090.db", LLAMA8, Params(), recorded_gpu="RTX 5090")
    one_line_error(sb("calibrate", str(store)), "no calibratable cells")


def test_dry_run_shows_the_predicted_speedup(moe):
    r = sb("run", str(moe), "--dry-run")
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stdout.splitlines() if "cell cell-" in ln]
    assert len(lines) == 16 and all("predicted=" in ln for ln in lines)
    rows = json.loads(sb("run", str(moe), "--dry-run", "--json").stdout)
    assert all(set(row["predicted"]) == documented("## `specbench predict` (and the dry run's `predicted`)")
               for row in rows)


def test_calibrate_says_what_its_cells_cannot_pin():
    """One store of 4 cells (h200-run: AR and MTP at c = 1 / 4, eager) for 15 step constants: said on stderr."""
    r = sb("calibrate", str(ROOT / "tests/data/h200-run-sglang-0.5.15.post1/h200.db"))
    assert r.returncode == 0, r.stderr
    assert "warning: sglang 0.5.15.post1 / H200 / triton / eager / any model: 4 cells for 15 step constants" in r.stderr


def test_a_label_with_brackets_is_printed_as_written(tmp_path, moe):
    """A label is the user's text: rich must not read `[fast]` as markup and drop it (the fits table did)."""
    text = moe.read_text(encoding="utf-8")
    assert 'label = "eagle3-sim{simulated_accept_len}"' in text
    m = tmp_path / "brackets.toml"
    m.write_text(text.replace('label = "eagle3-sim{simulated_accept_len}"', 'label = "eagle3[fast]-{simulated_accept_len}"'),
                 encoding="utf-8")
    r = sb("predict", str(m))
    assert r.returncode == 0, r.stderr
    table, _, fits = r.stdout.partition("Fastest setup that fits")
    assert "eagle3[fast]-1.5" in table and "eagle3[fast]-1.5" in fits, r.stdout
