"""What a server that spells its JSON another way costs the client (load/counting.py's fallback), by spelling.

Part 1, in-process: the counting functions on one 128-token streamed body in each spelling of the instant server
(`--json-style`: compact as the engines write it, spaces as Python's json.dumps by default, loose every other
spelling at once), best of many short repeats: `ids_count(parse=False)` is what runs as each request ends, inside the
measured window; `ids_count` and `received_text` after the run (the JSON fallback where the spelling is not compact).

Part 2, end to end: the instant server in each spelling (pinned to core 1) and specbench's client (core 0) at c=16,
128 output tokens, token ids asked (as against vLLM): the client's CPU per request, as the difference of a 600- and a
3,000-request run (start-up cancels), for the whole process (the after-run counting included) and for the measured
window alone (load/client.py's `client_cpu_s`).

    PYTHONPATH=src .venv/bin/python benchmarks/json_spellings.py            # both parts (~2 min)
    PYTHONPATH=src .venv/bin/python benchmarks/json_spellings.py --part 1
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STYLES = ("compact", "spaces", "loose")


def part1() -> None:
    from specbench.load import counting
    from specbench.testing.instant_bodies import stream_events, stream_tail

    print("| spelling | API | body bytes | ids_count at request end us | ids_count after the run us |"
          " received_text us |\n|---|---|---|---|---|---|")
    for style in STYLES:
        for api, ids in (("completions", True), ("chat", False)):
            body = b"".join(stream_events(api, 128, 1, "m", ids, style)) + stream_tail(api, 128, 10, True, "m", style)

            def best(f: object) -> float:
                return min(timeit.repeat(f, number=5, repeat=200)) / 5 * 1e6  # type: ignore[arg-type]

            fast = best(lambda: counting.ids_count(body, api, parse=False))  # noqa: B023
            after = best(lambda: counting.ids_count(body, api))  # noqa: B023
            text = best(lambda: counting.received_text(body, api))  # noqa: B023
            print(f"| {style} | {api}{' + ids' if ids else ''} | {len(body):,} | {fast:,.1f} | {after:,.1f} |"
                  f" {text:,.1f} |")


def _point(url: str, n: int) -> tuple[float, dict[str, float]]:
    code = f"""
import json, sys
from specbench.load.client import run_load
from specbench.load.prompts import Prompt
from specbench.load.results import LoadSpec
spec = LoadSpec({url!r}, api="completions", model="instant", output_tokens=128, concurrency=16, num_requests={n},
                extra_body={{"return_token_ids": True}})
run = run_load(spec, [Prompt(64, text="hello " * 64)])
assert all(r.ok for r in run.results), [r.error for r in run.results if not r.ok][:3]
assert {{r.count_source for r in run.results}} == {{"token_ids"}}
print(json.dumps({{"cpu_s": run.client_cpu_s}}))
"""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    pin = ["taskset", "-c", "0"] if shutil.which("taskset") and (os.cpu_count() or 1) >= 2 else []
    r = subprocess.run([*pin, sys.executable, "-c", code], capture_output=True, text=True, check=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return used, json.loads(r.stdout.strip().splitlines()[-1])


def part2(rounds: int) -> None:
    print("\n| spelling | round | process CPU / request us | measured window CPU / request us |\n|---|---|---|---|")
    pin = ["taskset", "-c", "1"] if shutil.which("taskset") and (os.cpu_count() or 1) >= 2 else []
    for style in STYLES:
        srv = subprocess.Popen([*pin, sys.executable, "-m", "specbench.testing.instant_server", "--port", "0",
                                "--burst", "16", "--json-style", style], stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
        try:
            url = f"http://127.0.0.1:{int((srv.stdout.readline() if srv.stdout else 'READY 0').split()[1])}"
            for k in range(rounds):
                small, ds = _point(url, 600)
                big, db = _point(url, 3000)
                print(f"| {style} | {k} | {(big - small) / 2400 * 1e6:,.0f} |"
                      f" {(db['cpu_s'] - ds['cpu_s']) / 2400 * 1e6:,.0f} |", flush=True)
        finally:
            srv.kill()
            srv.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", type=int, choices=(1, 2), default=None, help="run only this part")
    ap.add_argument("--rounds", type=int, default=2, help="part 2: runs per spelling")
    a = ap.parse_args()
    print(f"# load avg {os.getloadavg()[0]:.2f}")
    if a.part in (None, 1):
        part1()
    if a.part in (None, 2):
        part2(a.rounds)
    print(f"# load avg at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
