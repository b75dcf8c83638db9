"""The fix for a process the host killed (no engine owns the host): how much host RAM the killed process held, read
from the kernel's own line (mm/oom_kill.c::__oom_kill_process: `Out of memory: Killed process PID (COMM)
total-vm:NkB, anon-rss:NkB, file-rss:NkB, shmem-rss:NkB ...`)."""

from __future__ import annotations

import re
from typing import Any

from specbench.logs.failures import Failure

_KILLED = re.compile(r"Killed process (\d+) \(([^)]*)\)[^\n]*?anon-rss:(\d+)kB")
HOST_KINDS = ("host_oom_killed", "process_killed")


def host_fixes(fail: Failure) -> list[dict[str, Any]]:
    if fail.kind not in HOST_KINDS:
        return []
    m = _KILLED.search(fail.context or fail.message)
    result = {"status": "ok", "error": None, "kv_tokens": None, "max_running_requests": None}
    if m:
        gib = int(m.group(3)) / 2**20
        return [{"kind": "host_ram", "change": {}, "source": "log", "result": {**result, "host_ram_needed_gib":
                                                                              round(gib, 2)},
                 "why": f"the kernel killed {m.group(2)} (pid {m.group(1)}) holding {gib:.2f} GiB of host RAM: free "
                        "at least that much host memory (other jobs, page cache of a parallel download or compile) "
                        "or add swap before the launch; GPU settings do not change it"}]
    return [{"kind": "host_ram", "change": {}, "source": "log", "result": result,
             "why": "SIGKILL with no kernel line in the log: `dmesg -T | grep -i -B5 'killed process'` names the OOM "
                    "kill; weights load through host RAM (and each rank of a TP launch holds its shard), so free host "
                    "memory or add swap before the launch"}]
