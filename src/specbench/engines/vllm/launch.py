"""vLLM servers for the runner: `vllm serve` / the OpenAI api_server, and the embedded CPU build (`local`).

Flags: `--tensor-parallel-size`, `--gpu-memory-utilization`, `--max-num-seqs`, `--max-model-len`,
`--speculative-config JSON` (vllm/engine/arg_utils.py::EngineArgs.add_cli_args@0.32.0); readiness `/health` and one
completion; read-back `/v1/models` (max_model_len), `/metrics` (spec-decode counters, `vllm:cache_config_info`) and
the `non-default args: {...}` line of its log.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from specbench.engines import prometheus, server_auth, server_base
from specbench.engines.argv import set_flag
from specbench.engines.base import Launch
from specbench.engines.cli_flags import set_server_axes
from specbench.engines.openai.server import metrics_text, models_info, openai_probe
from specbench.engines.server_base import (
    SPEC_V2_ENV,  # never inherited by a vLLM server
    ServerBase,
    as_float,
    as_int,
    as_opt_int,
    setting_table,
)
from specbench.engines.vllm import knobs
from specbench.engines.vllm.knobs import release_flags
from specbench.engines.vllm.loglines import nondefault_args_text
from specbench.engines.vllm.simulate import simulated_acceptance
from specbench.errors import UserError

if TYPE_CHECKING:
    from specbench.contracts_inputs import LaunchTarget



# Flags that never change a measurement (vLLM 0.32.0's `vllm serve --help`, engines/vllm/cli_flags/0.32.0.txt):
# where it listens, its key, what and how it logs, the name it serves under, where it downloads to.
NEUTRAL_FLAGS = (*server_base.NEUTRAL_FLAGS, "--uvicorn-log-level", "--log-level", "--log-config-file",
                 "--logging-config", "--disable-log-stats", "--enable-log-requests", "--no-enable-log-requests",
                 "--enable-log-outputs", "--no-enable-log-outputs", "--disable-uvicorn-access-log",
                 "--no-disable-uvicorn-access-log", "--disable-access-log-for-endpoints", "--max-log-len",
                 "--served-model-name", "--download-dir")


class VllmReadBack(TypedDict, total=False):
    """What a vLLM server reports about itself: `/v1/models` `data`, the `vllm:cache_config_info` labels of /metrics
    and its log's `non-default args: {...}` text; the embedded engine (`local`) adds its `/version`, the spec-decode
    counters and a few facts from its log (engines/vllm/local.py). Each key only where the server answered it."""

    models: list[dict[str, object]]
    version: str | None
    cache_config_info: dict[str, str] | None
    spec_decode: dict[str, float]
    log_facts: dict[str, object]
    non_default_args: str


@dataclass(frozen=True)
class VllmServer(ServerBase):
    """A vLLM server launched from the matrix's `command`."""

    name: str = "vllm"
    plan_engine: str | None = "vllm"
    health_paths: tuple[str, ...] = ("/health",)
    neutral_flags: tuple[str, ...] = NEUTRAL_FLAGS

    def launch(self, target: LaunchTarget, settings: Mapping[str, object]) -> Launch:
        argv = vllm_argv(target.command, settings, target.host, target.port, False)
        env = {k: str(v) for k, v in setting_table(settings, "env").items()}
        return with_simulation(Launch(argv, env, (SPEC_V2_ENV,)), settings, self.default_plan_version())

    def probe(self, base_url: str, timeout_s: float, argv: Sequence[str]) -> None:
        openai_probe(base_url, timeout_s)

    def private_launch(self, argv: list[str], env: dict[str, str], folder: Path) -> tuple[list[str], dict[str, str]]:
        """One `--api-key` moves to VLLM_API_KEY, which vLLM reads when the flag is absent
        (entrypoints/serve/middleware/register.py@0.32.0: `args.api_key or [envs.VLLM_API_KEY]`); several keys
        stay flags (the variable holds one)."""
        rest, keys = server_auth.take_flag(argv, "--api-key")
        if len(keys) != 1:
            return argv, env
        return rest, {**env, "VLLM_API_KEY": keys[0]}

    def client_mode(self, argv: Sequence[str]) -> str:
        return "openai"

    def read_back(self, base_url: str, log_text: str) -> VllmReadBack:
        out: VllmReadBack = {}
        models = models_info(base_url)
        if models is not None:
            out["models"] = models
        text = metrics_text(base_url)
        if text is not None:
            out["cache_config_info"] = prometheus.labels(text, "vllm:cache_config_info")
        return _with_nondefault_args(out, log_text)

    def metrics_text(self, base_url: str) -> str | None:
        return metrics_text(base_url)

    def count_body(self, api: str) -> dict[str, bool]:
        """`return_token_ids`: every streamed choice carries its token ids
        (vllm/entrypoints/openai/completion/protocol.py::CompletionRequest.return_token_ids@0.32.0; chat too)."""
        return {"return_token_ids": True}

    def cache_reset_path(self) -> str | None:
        # vllm/entrypoints/serve/dev/cache/api_router.py::reset_prefix_cache@0.32.0 (POST), mounted only with
        # VLLM_SERVER_DEV_MODE=1 (the embedded engine sets it, engines/vllm/local.py): elsewhere a 404, which
        # matrix/cellrun.py::no_reset_route reads as "no route" (stated, not warned)
        return "/reset_prefix_cache"

    def running_cap(self, info: Mapping[str, object], log_text: str,
                    plan: Mapping[str, object] | None) -> tuple[int | None, str | None]:
        return running_cap(info, log_text, plan)


def running_cap(info: Mapping[str, object], log_text: str,
                plan: Mapping[str, object] | None) -> tuple[int | None, str | None]:
    """vLLM runs at most `max_num_seqs` requests at once, fewer when the KV cache holds fewer full-length requests:
    min(max_num_seqs, floor(Maximum concurrency)) (the plan contract's `max_running_requests` is the same rule).
    max_num_seqs from the log (as logged, else its `non-default args` dump), else the planner's value; the KV bound
    from the log's `Maximum concurrency for L tokens per request: X`; the planner's prediction when the log has
    neither."""
    import math

    from specbench.engines.server_base import planned_cap

    planned, _ = planned_cap(plan)
    if log_text:
        from specbench.engines.vllm.loglines import LINES
        from specbench.logs.parse import parse_text

        f = parse_text(log_text, (LINES,))
        seqs = f.max_num_seqs if isinstance(f.max_num_seqs, int) and f.max_num_seqs > 0 else None
        if seqs is None:
            dumped = (f.server_args or {}).get("max_num_seqs") if isinstance(f.server_args, dict) else None
            seqs = dumped if isinstance(dumped, int) and not isinstance(dumped, bool) and dumped > 0 else None
        conc = math.floor(f.max_concurrency) if f.max_concurrency else None
        got = [(v, n) for v, n in ((seqs, "max_num_seqs"), (conc, "Maximum concurrency")) if v]
        if seqs is None and planned is not None:  # vLLM's default max_num_seqs is the planner's to know
            got.append((planned, "the planner's max_running_requests"))
        if got:
            return min(v for v, _ in got), "log: " + " / ".join(n for _, n in got)
    return planned_cap(plan)


@dataclass(frozen=True)
class LocalServer(VllmServer):
    """The embedded engine (engines/vllm/local.py): vLLM's CPU build serving a tiny local model, or `command`."""

    name: str = "local"
    needs_command: bool = False
    tolerate_plan_errors: bool = True  # the tiny CPU models may be outside what the planner models
    launches_model: bool = True  # `model`: the folder under SPECBENCH_MODELS it serves

    def default_plan_version(self) -> str | None:
        from specbench.engines.vllm.local import ENGINE_VERSION

        return self.version or ENGINE_VERSION  # the release the embedded engine's install script pins

    def local_model_dir(self, target: LaunchTarget) -> str | None:
        return resolve_local_model(target.model or "tiny-target")

    def launch(self, target: LaunchTarget, settings: Mapping[str, object]) -> Launch:
        if target.command:
            return VllmServer.launch(self, target, settings)
        return with_simulation(local_launch(target, settings), settings, self.default_plan_version())

    def read_back(self, base_url: str, log_text: str) -> VllmReadBack:
        from specbench.engines.vllm import local as vllm_local

        info = vllm_local.read_server_info(base_url)
        out: VllmReadBack = {"models": [{"id": info.model, "max_model_len": info.max_model_len}], "version": info.version,
               "cache_config_info": info.cache_config, "spec_decode": info.spec_decode,
               "log_facts": vllm_local.log_facts(log_text)}
        return _with_nondefault_args(out, log_text)


def with_simulation(launch: Launch, settings: Mapping[str, object], version: str | None) -> Launch:
    """The launch with the tuple's simulated accept length merged into its `--speculative-config`
    (engines/vllm/simulate.py); a UserError with vLLM's reason where it does not apply."""
    if settings.get("simulated_accept_len") is None:
        return launch
    env_words = [f"{k}={v}" for k, v in launch.env.items()]  # VLLM_TARGET_DEVICE / VLLM_CPU_KVCACHE_SPACE say CPU
    sim = simulated_acceptance(as_float(settings["simulated_accept_len"]), env_words + list(launch.argv), version)
    if not sim.applies:
        raise UserError(f"simulated_accept_len for {settings.get('label') or settings.get('algorithm')}: "
                        f"{sim.refusal}")
    words = list(launch.argv)
    i = max(i for i, w in enumerate(words) if w == "--speculative-config")
    merged = {**json.loads(words[i + 1]), **sim.speculative_config}
    words[i + 1] = json.dumps(merged, separators=(",", ":"))
    return dataclasses.replace(launch, argv=words,
                               notes=(*launch.notes, f"simulated acceptance {sim.accept_len} ({sim.source})"))


def _with_nondefault_args(out: VllmReadBack, log_text: str) -> VllmReadBack:
    args = nondefault_args(log_text)
    if args is not None:
        out["non_default_args"] = args
    return out


# ----------------------------------------------------------------------------- vLLM argv

def vllm_argv(base: Sequence[str], settings: Mapping[str, object], host: str, port: int, local: bool) -> list[str]:
    argv = set_server_axes(list(base), settings, knobs.KNOBS, _set_vllm)
    algo = str(settings.get("algorithm") or "ar")
    if algo.lower() != "ar":
        cfg: _SpeculativeConfig = {"method": algo}
        draft = settings.get("draft_model")
        if draft:
            cfg["model"] = resolve_local_model(str(draft)) if local else str(draft)  # a string (matrix/schema.py)
        if settings.get("num_draft_tokens") is not None:
            cfg["num_speculative_tokens"] = as_int(settings["num_draft_tokens"])
        argv = _set_vllm(argv, "--speculative-config", json.dumps(cfg, separators=(",", ":")))
    else:
        argv = _set_vllm(argv, "--speculative-config", None)
    for flag, value in setting_table(settings, "flags").items():
        argv = _set_vllm(argv, flag, value)
    argv = _set_vllm(argv, "--host", host)
    argv = _set_vllm(argv, "--port", port)
    return argv


class _SpeculativeConfig(TypedDict, total=False):
    """The `--speculative-config` JSON a tuple's spec settings give (vllm/config/speculative.py::SpeculativeConfig
    @0.32.0), in the order it is written."""

    method: str
    model: str
    num_speculative_tokens: int


def _set_vllm(argv: list[str], flag: str, value: object) -> list[str]:
    """argv with `flag` set, every vLLM spelling of it (knobs.py: `-tp`, `--no-X` ...) replaced."""
    return set_flag(argv, flag, value, knobs.spellings(flag), release_flags(None).kinds.get)



# ----------------------------------------------------------------------------- the local engine


def models_dir() -> Path:
    """SPECBENCH_MODELS, else ./.cache/models, else the checkout's .cache/models (`make models` builds it)."""
    env = os.environ.get("SPECBENCH_MODELS")
    if env:
        return Path(env).resolve()
    here = Path(".cache/models")
    if here.is_dir():
        return here.resolve()
    from specbench.engines.vllm.local import repo_root

    return repo_root() / ".cache" / "models"


def resolve_local_model(name: str) -> str:
    """A bare model name (tiny-target) is a folder under SPECBENCH_MODELS; a path stays a path."""
    p = Path(name)
    if p.is_absolute() or "/" in name:
        return str(p.resolve()) if p.exists() else name
    return str(models_dir() / name)


def local_launch(target: LaunchTarget, settings: Mapping[str, object]) -> Launch:
    """The embedded engine (engines/vllm_local.py): `vllm serve` from the engine venv on a tiny local model.

    Axes map to LocalServerConfig: context_length -> --max-model-len, max_running_requests -> --max-num-seqs,
    a speculative variant -> --speculative-config (draft_model by default; `algorithm` is vLLM's method).
    """
    from specbench.engines.vllm import local as vllm_local

    algo = str(settings.get("algorithm") or "ar")
    speculative = None
    if algo.lower() != "ar":
        draft = settings.get("draft_model")
        if not draft and algo == "draft_model":
            raise UserError(f"spec variant {settings.get('label')!r}: algorithm draft_model needs draft_model")
        extra: dict[str, object] = {} if algo == "draft_model" else {"method": algo}
        speculative = vllm_local.DraftModelSpec(resolve_local_model(str(draft)) if draft else "",
                                                as_int(settings.get("num_draft_tokens") or 3), extra)
    args: list[str] = []
    if as_int(settings["tp"]) != 1:
        args = set_flag(args, "--tensor-parallel-size", as_int(settings["tp"]))
    for flag, value in setting_table(settings, "flags").items():
        args = set_flag(args, flag, value)
    model = resolve_local_model(target.model or "tiny-target")
    if not Path(model).is_dir():
        raise UserError(f"local engine: model folder {model} not found; run `make models` (or set SPECBENCH_MODELS)")
    cfg = vllm_local.LocalServerConfig(
        model=model, port=target.port, host=target.host, served_model_name=target.served_model_name,
        max_model_len=as_opt_int(settings.get("context_length")),
        max_num_seqs=as_opt_int(settings.get("max_running_requests")),
        speculative=speculative, extra_args=tuple(args),
        extra_env={k: str(v) for k, v in setting_table(settings, "env").items()},
    )
    exe = vllm_local.require_engine()  # a UserError naming `make engine` when absent
    argv = vllm_local.build_argv(cfg, exe)
    return Launch(argv, vllm_local.env_overrides(cfg), (SPEC_V2_ENV,))

# ----------------------------------------------------------------------------- read-back parsing


def nondefault_args(log_text: str) -> str | None:
    """vLLM logs `non-default args: {...}` at start; kept as the text it printed (loglines owns the pattern)."""
    return next((t for t in map(nondefault_args_text, log_text.splitlines()) if t is not None), None)
