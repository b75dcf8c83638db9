"""`run --gpus` takes the GPUs as they are (issue 37 item 5): nvidia-smi read strictly (a message is no GPU, an
index listed twice counts once), CUDA_VISIBLE_DEVICES read as CUDA reads it, named GPUs that do not exist refused,
and GPUs another process fills skipped with a word. Through a stand-in nvidia-smi on PATH (tests/fake_gpus.py) and
the real CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

import fake_gpus
from proc_helpers import free_port
from run_helpers import cli, make_tokenizer, placements, rows, standin_matrix
from specbench.errors import UserError
from specbench.matrix import gpus

MINI = 'engine = "openai"\ncommand = ["x"]\n[server]\ntp = [1, 2]\n[[server.spec]]\nlabel = "ar"\n'


def _smi_rows(*lines: str) -> str:
    return "\n".join(lines) + "\n"


def test_nvidia_smi_is_read_strictly() -> None:
    text = _smi_rows("No devices were found", "0, GPU-aaa, 81559, 3", "0, GPU-aaa, 81559, 3", "1, GPU-bbb, [N/A], [N/A]",
                     "index, uuid, memory.total [MiB], memory.used [MiB]", "x, GPU-ccc, 1, 1", "2, GPU-ddd, 81559")
    got = gpus.parse_smi_gpus(text)
    assert got == (gpus.SmiGpu("0", "GPU-aaa", 81559.0, 3.0), gpus.SmiGpu("1", "GPU-bbb", None, None))
    assert gpus.parse_smi_gpus("No devices were found\n") == ()


TWO = gpus.Listing((gpus.SmiGpu("0", fake_gpus.uuid(0), 81559, 1), gpus.SmiGpu("1", fake_gpus.uuid(1), 81559, 1)))


@pytest.mark.parametrize("cvd, seen", [
    ("", ()), ("-1", ()), ("0,1", ("0", "1")), ("1,0", ("1", "0")), ("0,0", ()), ("0,x,1", ("0",)),
    ("0,7,1", ("0",)), ("1a", ("1",)), (fake_gpus.uuid(1), ("1",)), ("GPU-00000001", ("1",)), ("GPU-0000000", ()),
    (f"{fake_gpus.uuid(1)},0", ("1",)), ("GPU-ffff", ())])
def test_cuda_visible_devices_as_cuda_reads_it(cvd: str, seen: tuple[str, ...]) -> None:
    got, why = gpus.cuda_visible(cvd, TWO)
    assert got == seen
    assert bool(why) == (len(got) < len([e for e in cvd.split(",")]))  # said whenever an entry is not seen


def test_without_nvidia_smi_indices_are_taken_as_written() -> None:
    assert gpus.cuda_visible("2,3,5", gpus.Listing(None, "nvidia-smi is not on PATH")) == (("2", "3", "5"), "")


def test_memory_another_process_holds_is_skipped_and_said() -> None:
    listing = gpus.Listing((gpus.SmiGpu("0", None, 81559, 2), gpus.SmiGpu("1", None, 81559, 81500),
                            gpus.SmiGpu("2", None, None, None)))
    free = gpus.usable(("0", "1", "2"), listing)
    assert free.ids == ("0", "2")
    assert len(free.skipped) == 1 and free.skipped[0].startswith("GPU 1: 79.6 of 79.6 GiB already in use")
    assert len(free.unknown) == 1 and "GPU 2" in free.unknown[0] and "unknown" in free.unknown[0]


def _dry(tmp_path: Path, env: dict[str, str], *flags: str) -> tuple[int, list[str]]:
    m = tmp_path / "m.toml"
    m.write_text(MINI)
    r = cli("run", str(m), "--dry-run", *flags, env=env)
    return r.returncode, r.stderr.strip().splitlines()


def test_duplicate_indices_give_each_gpu_once(tmp_path: Path) -> None:
    rc, err = _dry(tmp_path, fake_gpus.install(tmp_path / "bin", indices=[0, 0, 1, 1]), "--gpus", "all")
    assert rc == 0 and "specbench: --gpus all: using GPU 0, 1 (nvidia-smi)" in err


@pytest.mark.parametrize("smi, cvd, flags, said", [
    ({"message": "No devices were found", "rc": 6}, None, ("--gpus", "all"), "No devices were found"),
    ({"message": "No devices were found"}, None, ("--gpus", "0"), "no GPU 0: nvidia-smi lists no GPU"),
    ({"n": 2}, "", ("--gpus", "all"), "CUDA_VISIBLE_DEVICES is set and empty"),
    ({"n": 2}, "-1", ("--gpus", "all"), "CUDA stops at '-1'"),
    ({"n": 2}, None, ("--gpus", "0-7"), "no GPU 2, 3, 4, 5, 6, 7 on this machine (nvidia-smi lists GPU 0, 1)"),
    ({"n": 8}, "2,3", ("--gpus", "0,1"), "GPU 0, 1 not visible: CUDA_VISIBLE_DEVICES='2,3'"),
])
def test_gpus_that_are_not_there_are_one_line_errors(tmp_path: Path, smi: dict[str, object], cvd: str | None,
                                                      flags: tuple[str, ...], said: str) -> None:
    env = fake_gpus.install(tmp_path / "bin", **smi)  # type: ignore[arg-type]
    if cvd is not None:
        env["CUDA_VISIBLE_DEVICES"] = cvd
    rc, err = _dry(tmp_path, env, *flags)
    assert rc == 2 and len(err) == 1 and err[0].startswith("specbench: error: --gpus") and said in err[0], err


def test_executor_typos_and_a_stray_address_are_refused_in_a_dry_run(tmp_path: Path) -> None:
    env = fake_gpus.install(tmp_path / "bin", n=2)
    assert _dry(tmp_path, env, "--executor", "rya") == (
        2, ["specbench: error: --executor 'rya': expected local or ray (did you mean ray?)"])
    rc, err = _dry(tmp_path, env, "--address", "127.0.0.1:6379")
    assert rc == 2 and err[0].startswith("specbench: error: --address '127.0.0.1:6379'") and "--executor ray" in err[0]


def test_a_packed_run_skips_a_gpu_another_process_fills(tmp_path: Path) -> None:
    """GPU 1 of two is full (another process's 79.6 GiB): both tp=1 servers run on GPU 0, one after the other."""
    env = fake_gpus.install(tmp_path / "bin", n=2, used_mib={1: 81500}, total_mib=81559)
    m = standin_matrix(tmp_path / "m.toml", free_port(2), make_tokenizer(tmp_path / "tok"), tp="1", specs=1,
                       concurrency="[1]", boot_s=0.2)
    store = tmp_path / "r.sqlite"
    r = cli("run", str(m), "--store", str(store), "--no-progress", "--gpus", "all", env=env)
    assert r.returncode == 0, r.stderr
    assert "specbench: warning: GPU 1: 79.6 of 79.6 GiB already in use by another process: skipped" in r.stderr
    assert [s["placement"]["gpus"] for s in placements(store)] == [["0"], ["0"]]
    assert rows(store, "SELECT status FROM cells") == [("done",), ("done",)]


def test_every_gpu_full_is_refused_before_anything_runs(tmp_path: Path) -> None:
    env = fake_gpus.install(tmp_path / "bin", n=2, used_mib={0: 81500, 1: 80000}, total_mib=81559)
    m = tmp_path / "m.toml"
    m.write_text(MINI)
    r = cli("run", str(m), "--store", str(tmp_path / "r.sqlite"), "--no-progress", "--gpus", "all", env=env)
    err = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(err) == 1 and "every GPU it names is in use by another process" in err[0]
    assert all(s == "pending" for (s,) in rows(tmp_path / "r.sqlite", "SELECT status FROM cells"))


def test_resolve_is_an_error_not_a_guess_without_any_gpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    env = fake_gpus.install(tmp_path / "bin", message="No devices were found", rc=6)
    monkeypatch.setenv("PATH", env["PATH"])
    with pytest.raises(UserError, match="No devices were found"):
        gpus.resolve("all", {})
    with pytest.raises(UserError, match="CUDA stops at '0'"):  # there is no GPU 0 for CUDA_VISIBLE_DEVICES to name
        gpus.resolve("all", {"CUDA_VISIBLE_DEVICES": "0"})
