"""Issue 37 items 5 and 6 as fuzz cases: `run --gpus` against stand-in `nvidia-smi`s that mislead (duplicate
indices, "No devices were found", a failed driver, GPUs another process fills), `CUDA_VISIBLE_DEVICES` as CUDA reads
it (empty, -1, cut short by an invalid id, UUIDs), and `--executor` / `--address` combinations (a typo, an address
without Ray, a dead address).

Each case's environment is in `extra["env"]` (a value of None unsets the variable); `run(case)` applies it around
the harness's fork (the child inherits this process's environment) and restores it. The oracle of a case that must
be accepted: when the run says which GPUs it uses (`... using GPU 0, 1`), they are the ones CUDA would see."""

from __future__ import annotations

import os
import re
import socket
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from fuzz.harness import Case, Result, environment, run_case

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the stand-in nvidia-smi
import fake_gpus  # noqa: E402

MATRIX = 'engine = "openai"\ncommand = ["x"]\n[server]\ntp = [1, 2]\n[[server.spec]]\nlabel = "ar"\n'
USING = re.compile(r"using GPUs? ([^\s(;,]+(?:, [^\s(;,]+)*)")


def _smis(tmp: Path) -> dict[str, tuple[Path, tuple[str, ...] | None]]:
    """Stand-in nvidia-smis: name -> (its bin folder, the GPUs CUDA sees without CUDA_VISIBLE_DEVICES; None: unknown,
    there is no nvidia-smi)."""
    full = 81559
    out: dict[str, tuple[Path, tuple[str, ...] | None]] = {
        "smi8": (tmp / "smi8", tuple(str(i) for i in range(8))), "smi2": (tmp / "smi2", ("0", "1")),
        "dup": (tmp / "dup", ("0", "1")), "nodev0": (tmp / "nodev0", ()), "nodev6": (tmp / "nodev6", ()),
        "driver": (tmp / "driver", ()), "none": (tmp / "none", None), "full1": (tmp / "full1", ("0", "1")),
        "fullall": (tmp / "fullall", ("0", "1")), "na": (tmp / "na", ("0", "1")),
    }
    fake_gpus.install(tmp / "smi8")
    fake_gpus.install(tmp / "smi2", n=2)
    fake_gpus.install(tmp / "dup", indices=[0, 0, 1, 1])
    fake_gpus.install(tmp / "nodev0", message="No devices were found", rc=0)
    fake_gpus.install(tmp / "nodev6", message="No devices were found", rc=6)
    fake_gpus.install(tmp / "driver", rc=9, message="NVIDIA-SMI has failed because it couldn't communicate with the "
                      "NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.")
    fake_gpus.install(tmp / "full1", n=2, used_mib={1: 81500}, total_mib=full)
    fake_gpus.install(tmp / "fullall", n=2, used_mib={0: 81500, 1: 80000}, total_mib=full)
    fake_gpus.install(tmp / "na", n=2, used_mib={0: "[N/A]", 1: "[N/A]"}, total_mib=full)
    (tmp / "none").mkdir(parents=True, exist_ok=True)
    return out


def _env(bin_dir: Path, cvd: str | None = None) -> dict[str, str | None]:
    # only the stand-in's folder and the interpreter's: no real nvidia-smi of this machine is found
    return {"PATH": f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}/usr/bin:/bin",
            "CUDA_VISIBLE_DEVICES": cvd, "RAY_ADDRESS": None}


def _expect(ids: tuple[str, ...]) -> Callable[[Result], str | None]:
    def oracle(res: Result) -> str | None:
        m = USING.search(res.stderr)
        if m is None:
            return None
        said = sorted(m.group(1).split(", "))
        return None if said == sorted(ids) else f"uses GPUs {said}, CUDA sees {sorted(ids)}"
    return oracle


def _parse(text: str) -> tuple[str, ...] | None:
    """`--gpus` text -> ids, None when it is not a list of ids (the cases use only well-formed ones)."""
    out: list[str] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += [str(i) for i in range(int(lo), int(hi or lo) + 1)]
    return tuple(out)


def _dry(m: Path, *flags: str) -> list[str]:
    return ["run", str(m), "--dry-run", *flags]


def _gpus_cases(m: Path, smis: Mapping[str, tuple[Path, tuple[str, ...] | None]]) -> Iterator[Case]:
    """--gpus TEXT against each stand-in: `all` is what CUDA sees; named ids must exist."""
    texts = ["all", "0", "1", "0,1", "0-1", "1,0", "0-7", "2", "7", "8", "0-3", "9-10"]
    for name in ("smi8", "smi2", "dup", "nodev0", "nodev6", "driver", "none"):
        bin_dir, seen = smis[name]
        for text in texts:
            if text == "all":
                ok, ids = bool(seen), seen or ()
            else:
                ids = _parse(text) or ()
                ok = seen is None or set(ids) <= set(seen)  # without nvidia-smi: unchecked, said so
            yield Case("gpus", _dry(m, "--gpus", text), f"{name}: --gpus {text}", must_fail=not ok,
                       oracle=_expect(ids), extra={"env": _env(bin_dir)})


# CUDA_VISIBLE_DEVICES -> what CUDA sees on a 2-GPU and an 8-GPU node (the stand-in's UUIDs are GPU-0000000N-...),
# as torch.cuda models CUDA (torch/cuda/__init__.py _parse_visible_devices): empty or a first invalid entry: none;
# the list ends at the first invalid entry (not an index, an index past the GPU count, another kind than the first
# entry's: indices or GPU- UUIDs); an index is read as strtoul reads it ('1a' is 1); a GPU named twice: none at all
CVD_2 = {"": (), "-1": (), "0": ("0",), "1": ("1",), "0,1": ("0", "1"), "1,0": ("1", "0"), "0,0": (),
         "0,0,1": (), "1,0,1": (), "0,-1,1": ("0",), "0,x,1": ("0",), "x": (), "-1,0": (), " 0 , 1 ": ("0", "1"),
         "5": (), "0,5,1": ("0",), fake_gpus.uuid(1): ("1",), "GPU-00000001": ("1",), "GPU-deadbeef": (),
         f"{fake_gpus.uuid(1)},0": ("1",), f"0,{fake_gpus.uuid(0)}": ("0",), ",": (), "0,": ("0",),
         "1a,0": ("1", "0"), f"{fake_gpus.uuid(1)},GPU-00000001": ()}
CVD_8 = {"": (), "-1": (), "0,5,1": ("0", "5", "1"), "7": ("7",), "8": (), "3,3": (), "2,3": ("2", "3"),
         "6,7,8,0": ("6", "7"), "GPU-0000000": ()}  # a UUID prefix that names several GPUs: invalid
CVD_NONE = {"": (), "-1": (), "0,1": ("0", "1"), "0,x,1": ("0",), "0,0": (), "3": ("3",)}


def _cvd_cases(m: Path, smis: Mapping[str, tuple[Path, tuple[str, ...] | None]]) -> Iterator[Case]:
    for name, table in (("smi2", CVD_2), ("dup", CVD_2), ("smi8", CVD_8), ("none", CVD_NONE)):
        for cvd, seen in table.items():
            yield Case("cvd", _dry(m, "--gpus", "all"), f"{name}: CUDA_VISIBLE_DEVICES={cvd!r} --gpus all",
                       must_fail=not seen, oracle=_expect(seen), extra={"env": _env(smis[name][0], cvd)})
    bin8 = smis["smi8"][0]
    for text, ok in (("2,3", True), ("0", False), ("2-4", False), ("3", True)):
        yield Case("cvd", _dry(m, "--gpus", text), f"smi8: CUDA_VISIBLE_DEVICES=2,3 --gpus {text}", must_fail=not ok,
                   oracle=_expect(_parse(text) or ()), extra={"env": _env(bin8, "2,3")})


def _busy_cases(m: Path, tmp: Path, smis: Mapping[str, tuple[Path, tuple[str, ...] | None]]) -> Iterator[Case]:
    """GPUs another process fills: a dry run says so; a run skips them, and refuses when none is left."""
    for name in ("full1", "fullall", "na"):
        for text in ("all", "0,1"):
            yield Case("busy", _dry(m, "--gpus", text), f"{name}: --gpus {text} (dry run)",
                       oracle=_said_busy(name == "full1" and ("1",) or name == "fullall" and ("0", "1") or ()),
                       extra={"env": _env(smis[name][0])})
    for i, text in enumerate(("all", "0,1", "1")):  # every named GPU full: nothing to run on
        yield Case("busy", ["run", str(m), "--store", str(tmp / f"busy{i}.db"), "--no-progress", "--gpus", text],
                   f"fullall: run --gpus {text}", must_fail=True, extra={"env": _env(smis["fullall"][0])})
    yield Case("busy", ["run", str(m), "--store", str(tmp / "busy-full1.db"), "--no-progress", "--gpus", "1"],
               "full1: run --gpus 1 (that GPU full)", must_fail=True, extra={"env": _env(smis["full1"][0])})


def _said_busy(busy: tuple[str, ...]) -> Callable[[Result], str | None]:
    def oracle(res: Result) -> str | None:
        for g in busy:
            if not re.search(rf"GPU {g}\b[^\n]*(in use|used)", res.stderr):
                return f"GPU {g} is full of another process's memory and the dry run does not say so"
        return None
    return oracle


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed when this returns: nothing listens on it


def _ray_cases(m: Path, tmp: Path, smis: Mapping[str, tuple[Path, tuple[str, ...] | None]]) -> Iterator[Case]:
    env = _env(smis["smi2"][0])
    for flags, ok in ((["--executor", "rya"], False), (["--executor", "Ray"], False), (["--executor", ""], False),
                      (["--executor", "locl"], False), (["--executor", "slurm"], False), (["--executor", "local"], True),
                      (["--executor", "ray"], True), (["--address", "127.0.0.1:6379"], False),
                      (["--executor", "local", "--address", "127.0.0.1:6379"], False),
                      (["--gpus", "0", "--address", "127.0.0.1:6379"], False),
                      (["--executor", "ray", "--gpus", "0"], False),
                      (["--executor", "ray", "--address", "127.0.0.1:6379"], True)):
        yield Case("ray", _dry(m, *flags), f"dry run {' '.join(flags)}", must_fail=not ok, extra={"env": env})
    port = _closed_port()
    for i, addr in enumerate((f"127.0.0.1:{port}", f"ray://127.0.0.1:{port}", f"localhost:{port}",
                              "127.0.0.1:notaport", "127.0.0.1:0", "127.0.0.1:99999")):
        yield Case("ray", ["run", str(m), "--store", str(tmp / f"ray{i}.db"), "--no-progress", "--executor", "ray",
                           "--address", addr], f"run --executor ray --address {addr} (nothing listens)",
                   must_fail=True, extra={"env": env, "timeout_s": 60})


def cases(tmp: Path) -> list[Case]:
    tmp.mkdir(parents=True, exist_ok=True)
    m = tmp / "m.toml"
    m.write_text(MATRIX)
    smis = _smis(tmp)
    return [*_gpus_cases(m, smis), *_cvd_cases(m, smis), *_busy_cases(m, tmp, smis), *_ray_cases(m, tmp, smis)]


def run(case: Case) -> tuple[str, str, Result]:
    """harness.run_case with the case's environment (`extra["env"]`)."""
    with environment(case.extra.get("env") or {}):  # type: ignore[arg-type]
        return run_case(case)


def preload() -> None:
    """Import what a dry run and a run import, once, here: each forked case then starts in milliseconds."""
    import rich.console  # noqa: F401

    import specbench.commands.run  # noqa: F401
    import specbench.matrix.preflight  # noqa: F401
    import specbench.matrix.runner  # noqa: F401
    import specbench.predict.plan_matrix  # noqa: F401
    import specbench.redact  # noqa: F401
