"""Where one server tuple runs: its slot (one per concurrently running server), port, GPUs and the load generator's
CPU cores (`Placement`, chosen by the serial runner, the packed runner or a Ray task), and the record of it a ready
server keeps in `server_info_json.placement` (`PlacementRecord`)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TypedDict


class PlacementRecord(TypedDict):
    """A ready server's `server_info_json.placement` (docs/structures.md): where it ran and the runner's pid."""

    slot: int
    port: int | None
    gpus: list[str] | None
    cores: list[int] | None
    host_pid: int


@dataclass(frozen=True)
class Placement:
    """Where a tuple runs: its slot (one per concurrently running server), port, GPUs and load-generator cores."""

    slot: int = 0
    port: int | None = None  # None: the matrix's port
    gpus: tuple[str, ...] | None = None  # CUDA_VISIBLE_DEVICES for the server; None: the environment's
    gpu_indices: tuple[int, ...] | None = None  # nvidia-smi indices whose memory baseline is waited for
    cores: tuple[int, ...] | None = None  # the load generator's CPU affinity (set after the server started)

    @property
    def name(self) -> str:
        return f"gpu {','.join(self.gpus)}" if self.gpus else (f"slot {self.slot}" if self.slot else "")

    def record(self) -> PlacementRecord:
        return PlacementRecord(slot=self.slot, port=self.port, gpus=list(self.gpus) if self.gpus else None,
                               cores=list(self.cores) if self.cores else None, host_pid=os.getpid())
