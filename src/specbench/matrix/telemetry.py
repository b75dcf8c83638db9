"""GPU telemetry during a cell: memory used, utilization and power per GPU, sampled in a thread while the cell's load
runs, where a GPU is there.

Source: NVML through `nvidia-ml-py` (`pynvml.nvmlDeviceGetMemoryInfo(h).used` bytes, `nvmlDeviceGetUtilizationRates(h)
.gpu` percent, `nvmlDeviceGetPowerUsage(h)` milliwatts) when it imports, else one `nvidia-smi
--query-gpu=index,name,memory.used,utilization.gpu,power.draw --format=csv,noheader,nounits` per sample (MiB,
percent, W: the query the packed runner's matrix/gpus.py and lifecycle.py already make, fields added). Neither:
nothing is sampled and nothing is stored (a CPU machine).

Stored (docs/contracts.md "GPU telemetry"): one row per sample and GPU in the `gpu_samples` table (matrix/store.py)
and a summary per GPU in `metrics_json.gpu_telemetry`. `gpus`: the nvidia-smi indices of a packed run's slot (None:
every GPU listed).
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

QUERY = "index,name,memory.used,utilization.gpu,power.draw"
INTERVAL_S = 1.0


@dataclass(frozen=True)
class Sample:
    t: float  # seconds since the cell's load started
    gpu: str  # nvidia-smi / NVML index
    name: str
    memory_used_mib: float | None
    utilization_pct: float | None
    power_w: float | None


def _num(text: str) -> float | None:
    try:
        return float(text.strip())
    except ValueError:  # "[N/A]", "[Not Supported]"
        return None


def parse_smi(text: str, t: float) -> list[Sample]:
    """nvidia-smi's CSV (QUERY order, no header, no units) -> samples; malformed lines are skipped."""
    out = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 5 or not parts[0].isdigit():
            continue
        out.append(Sample(t, parts[0], parts[1], _num(parts[2]), _num(parts[3]), _num(parts[4])))
    return out


class _Nvml:
    def __init__(self) -> None:
        import pynvml  # type: ignore[import-not-found]

        pynvml.nvmlInit()
        self.nv = pynvml
        self.handles = [(str(i), pynvml.nvmlDeviceGetHandleByIndex(i)) for i in range(pynvml.nvmlDeviceGetCount())]

    def read(self, t: float) -> list[Sample]:
        out = []
        for idx, h in self.handles:
            name = self.nv.nvmlDeviceGetName(h)
            out.append(Sample(t, idx, name.decode() if isinstance(name, bytes) else str(name),
                              self.nv.nvmlDeviceGetMemoryInfo(h).used / 2 ** 20,
                              float(self.nv.nvmlDeviceGetUtilizationRates(h).gpu),
                              self.nv.nvmlDeviceGetPowerUsage(h) / 1000.0))
        return out


def _reader() -> Any:
    """A callable t -> samples (NVML, else nvidia-smi), or None without either."""
    try:
        return _Nvml().read
    except Exception:  # not installed, no driver, no GPU
        pass
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None

    def smi(t: float) -> list[Sample]:
        try:
            r = subprocess.run([exe, f"--query-gpu={QUERY}", "--format=csv,noheader,nounits"], capture_output=True,
                               text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return []
        return parse_smi(r.stdout, t) if r.returncode == 0 else []

    return smi


@dataclass
class Sampler:
    """Samples every `interval_s` in a daemon thread between start() and stop()."""

    gpus: Sequence[int] | None = None
    interval_s: float = INTERVAL_S
    samples: list[Sample] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _got: threading.Condition = field(default_factory=threading.Condition)
    _thread: threading.Thread | None = None

    def start(self) -> bool:
        read = _reader()
        if read is None:
            return False
        t0 = time.monotonic()
        keep = None if self.gpus is None else {str(g) for g in self.gpus}

        def loop() -> None:
            while True:
                rows = [s for s in read(time.monotonic() - t0) if keep is None or s.gpu in keep]
                with self._got:
                    self.samples.extend(rows)
                    self._got.notify_all()
                if self._stop.wait(self.interval_s):
                    return

        self._thread = threading.Thread(target=loop, name="gpu-telemetry", daemon=True)
        self._thread.start()
        return True

    def wait_for(self, n: int, timeout_s: float) -> bool:
        """Until at least n samples were taken (tests: wait for the event, never sleep a duration)."""
        with self._got:
            return self._got.wait_for(lambda: len(self.samples) >= n, timeout_s)

    def stop(self) -> list[Sample]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=15)
        return list(self.samples)


@contextmanager
def sampling(gpus: Sequence[int] | None = None, interval_s: float = INTERVAL_S) -> Iterator[Sampler]:
    s = Sampler(gpus=gpus, interval_s=interval_s)
    s.start()
    try:
        yield s
    finally:
        s.stop()


def summary(samples: Sequence[Sample], interval_s: float = INTERVAL_S) -> dict[str, Any] | None:
    """`metrics_json.gpu_telemetry`: per GPU the sample count, peak and mean memory used (MiB), mean and peak
    utilization (%), mean and peak power (W); None without samples."""
    if not samples:
        return None
    per: dict[str, list[Sample]] = {}
    for s in samples:
        per.setdefault(s.gpu, []).append(s)

    def stats(vals: list[float | None]) -> tuple[float | None, float | None]:
        xs = [v for v in vals if v is not None]
        return (sum(xs) / len(xs), max(xs)) if xs else (None, None)

    gpus = []
    for g, rows in sorted(per.items(), key=lambda kv: int(kv[0]) if kv[0].isdigit() else 0):
        mem_mean, mem_max = stats([r.memory_used_mib for r in rows])
        util_mean, util_max = stats([r.utilization_pct for r in rows])
        pw_mean, pw_max = stats([r.power_w for r in rows])
        gpus.append({"gpu": g, "name": rows[0].name, "samples": len(rows), "memory_used_mib_max": mem_max,
                     "memory_used_mib_mean": mem_mean, "utilization_pct_mean": util_mean,
                     "utilization_pct_max": util_max, "power_w_mean": pw_mean, "power_w_max": pw_max})
    return {"interval_s": interval_s, "source": "nvml-or-nvidia-smi", "gpus": gpus}


def attach(outcome: Any, sampler: Sampler, store: Any, cell_id: str, append: bool = False) -> Any:
    """The cell's samples into the store (`gpu_samples`; `append`: beside those of its earlier boots, else replacing
    an earlier attempt's) and their summary into its metrics; the outcome unchanged without samples."""
    import dataclasses

    rows = sampler.stop()
    if not rows:
        return outcome
    store.put_gpu_samples(cell_id, [(s.t, s.gpu, s.name, s.memory_used_mib, s.utilization_pct, s.power_w)
                                    for s in rows], append=append)
    if outcome.metrics is None:
        return outcome
    return dataclasses.replace(outcome, metrics={**outcome.metrics,
                                                 "gpu_telemetry": summary(rows, sampler.interval_s)})
