"""A stand-in engine for packed and Ray runs without GPUs: boots in `--boot-s` seconds, then serves as the
instant server (every other flag is the instant server's; `--ttft-ms` / `--itl-ms` set how long a cell takes).

It prints the GPUs it was given (`CUDA_VISIBLE_DEVICES`) and its pid, as an engine's log would, so a test can
check that concurrent servers got disjoint GPUs. `--ignore-sigterm` makes it ignore SIGTERM (an engine stuck in
its shutdown), for the stop-grace tests: it prints `ignored SIGTERM` each time one comes, so a test waits for
that line instead of a guessed duration. `--setsid-child` starts a child that leaves the server's process group
and session (`setsid`, as some engines' workers do) and prints `setsid child pid=N`.

    python -m specbench.testing.standin_server --boot-s 2 --ttft-ms 50 --port 30001
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from specbench.testing import instant_server


def _say_ignored(_signum: int, _frame: object) -> None:
    os.write(1, b"ignored SIGTERM\n")


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    boot_s, ignore_term = 0.0, False
    if "--boot-s" in args:
        i = args.index("--boot-s")
        boot_s = float(args[i + 1])
        del args[i:i + 2]
    if "--ignore-sigterm" in args:
        args.remove("--ignore-sigterm")
        ignore_term = True
    if ignore_term:
        signal.signal(signal.SIGTERM, _say_ignored)
    if "--setsid-child" in args:
        args.remove("--setsid-child")
        child = subprocess.Popen([sys.executable, "-c", "import os, time; os.setsid(); time.sleep(3600)"],
                                 stdin=subprocess.DEVNULL)
        print(f"setsid child pid={child.pid}", flush=True)
    print(f"standin pid={os.getpid()} CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '')}",
          flush=True)
    mark = os.environ.get("SPECBENCH_SERVER_MARK")
    if mark:  # the digest the runner's watchdog carries (matrix/watchdog.py), so a test can find its own
        import hashlib

        print(f"mark_sha256={hashlib.sha256(mark.encode()).hexdigest()}", flush=True)
    print(f"loading weights (boot {boot_s} s)", flush=True)
    time.sleep(boot_s)
    instant_server.main(args)


if __name__ == "__main__":
    main()
