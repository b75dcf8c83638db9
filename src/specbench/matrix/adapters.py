"""One interface over the engines the runner drives: how to launch, when ready, what to read back.

- `sglang`: `specbench.engines.sglang` (argv per version, /health_generate, /get_server_info).
- `vllm`: `vllm serve` / the OpenAI api_server: `--tensor-parallel-size`, `--gpu-memory-utilization`,
  `--max-num-seqs`, `--max-model-len`, `--speculative-config JSON` (vllm/engine/arg_utils.py); `/health`,
  `/v1/models` (max_model_len), `/metrics` (spec-decode counters, cache_config_info).
- `local`: the embedded vLLM CPU build (`specbench.engines.vllm.local` when present) serving the tiny
  models under SPECBENCH_MODELS; otherwise the same as `vllm`.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import httpx

from specbench.engines.sglang import launch as sg
from specbench.engines.argv import set_flag
from specbench.errors import UserError
from specbench.matrix.spec import MatrixSpec


@dataclass(frozen=True)
class Launch:
    """What one server tuple launches: argv (never a shell string) and its environment changes."""

    argv: list[str]
    env: dict[str, str]  # variables set for this server (shown and stored)
    drop_env: tuple[str, ...] = ()  # inherited variables removed (SGLANG_ENABLE_SPEC_V2 for AR)
    notes: tuple[str, ...] = ()
    cwd: str | None = None


@dataclass(frozen=True)
class Adapter:
    engine: str  # sglang | vllm | local
    plan_engine: str  # the planner's engine name
    health_paths: tuple[str, ...]
    version: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    # -- launch
    def launch(self, spec: MatrixSpec, settings: dict[str, Any]) -> Launch:
        if self.engine == "sglang":
            argv = sg.build_argv(spec.command, settings, spec.host, spec.port, self.version)
            env, notes = sg.launch_env(settings.get("env") or {}, str(settings["algorithm"]), self.version)
            return Launch(argv, env, sg.env_to_drop(str(settings["algorithm"])), tuple(notes))
        if self.engine == "openai":  # any OpenAI-compatible server: the base command, the flags, host and port
            argv = list(spec.command)
            for flag, value in (settings.get("flags") or {}).items():
                argv = set_flag(argv, flag, value)
            argv = set_flag(set_flag(argv, "--host", spec.host), "--port", spec.port)
            env = {k: str(v) for k, v in (settings.get("env") or {}).items()}
            return Launch(argv, env, ("SGLANG_ENABLE_SPEC_V2",) if settings["algorithm"] == "ar" else ())
        if self.engine == "local" and not spec.command:
            return local_launch(spec, settings)
        argv = vllm_argv(spec.command, settings, spec.host, spec.port, False)
        env = {k: str(v) for k, v in (settings.get("env") or {}).items()}
        return Launch(argv, env, ("SGLANG_ENABLE_SPEC_V2",))

    # -- readiness
    def probe(self, base_url: str, timeout_s: float, argv: Sequence[str]) -> None:
        if self.engine == "sglang":
            sg.probe(base_url, timeout_s, token_ids=sg.skips_tokenizer(argv))
            return
        openai_probe(base_url, timeout_s)

    def client_mode(self, argv: Sequence[str]) -> str:
        if self.engine == "sglang":
            return sg.client_mode(argv)
        return "openai"

    # -- read-back
    def read_back(self, base_url: str, log_text: str) -> dict[str, Any]:
        if self.engine == "sglang":
            return sg.read_server_info(base_url) or {}
        out: dict[str, Any] = {}
        if self.engine == "local":
            from specbench.engines.vllm import local as vllm_local

            info = vllm_local.read_server_info(base_url)
            out = {"models": [{"id": info.model, "max_model_len": info.max_model_len}], "version": info.version,
                   "cache_config_info": info.cache_config, "spec_decode": info.spec_decode,
                   "log_facts": vllm_local.log_facts(log_text)}
            args = nondefault_args(log_text)
            if args is not None:
                out["non_default_args"] = args
            return out
        with httpx.Client(timeout=10.0, trust_env=False) as c:
            try:
                r = c.get(base_url + "/v1/models")
                if r.status_code == 200:
                    out["models"] = r.json().get("data")
            except (httpx.HTTPError, ValueError):
                pass
            try:
                r = c.get(base_url + "/metrics")
                if r.status_code == 200:
                    out["cache_config_info"] = prom_labels(r.text, "vllm:cache_config_info")
            except httpx.HTTPError:
                pass
        args = nondefault_args(log_text)
        if args is not None:
            out["non_default_args"] = args
        return out

    def metrics_text(self, base_url: str) -> str | None:
        """GET /metrics (vLLM's spec-decode counters live there); None for SGLang (meta_info per request)."""
        if self.engine == "sglang":
            return None
        try:
            with httpx.Client(timeout=10.0, trust_env=False) as c:
                r = c.get(base_url + "/metrics")
        except httpx.HTTPError:
            return None
        return r.text if r.status_code == 200 else None


def adapter_for(spec: MatrixSpec) -> Adapter:
    if spec.engine == "sglang":
        return Adapter("sglang", "sglang", sg.HEALTH_PATHS, spec.plan.engine_version)
    if spec.engine == "openai":
        return Adapter("openai", "", ("/health", "/v1/models"), spec.plan.engine_version)
    return Adapter(spec.engine, "vllm", ("/health",), spec.plan.engine_version)


# ----------------------------------------------------------------------------- vLLM argv

VLLM_ALIASES = {"--tensor-parallel-size": ("--tensor-parallel-size", "-tp"),
                "--max-model-len": ("--max-model-len",),
                "--max-num-seqs": ("--max-num-seqs",)}


def vllm_argv(base: Sequence[str], settings: dict[str, Any], host: str, port: int, local: bool) -> list[str]:
    argv = list(base)
    argv = _set_vllm(argv, "--tensor-parallel-size", int(settings["tp"]))
    for key, flag in (("mem_fraction_static", "--gpu-memory-utilization"),
                      ("max_running_requests", "--max-num-seqs"),
                      ("context_length", "--max-model-len")):
        if settings.get(key) is not None:
            argv = _set_vllm(argv, flag, settings[key])
    algo = str(settings.get("algorithm") or "ar")
    if algo.lower() != "ar":
        cfg: dict[str, Any] = {"method": algo}
        if settings.get("draft_model"):
            cfg["model"] = resolve_local_model(settings["draft_model"]) if local else settings["draft_model"]
        if settings.get("num_draft_tokens") is not None:
            cfg["num_speculative_tokens"] = int(settings["num_draft_tokens"])
        argv = _set_vllm(argv, "--speculative-config", json.dumps(cfg, separators=(",", ":")))
    else:
        argv = _set_vllm(argv, "--speculative-config", None)
    for flag, value in (settings.get("flags") or {}).items():
        argv = _set_vllm(argv, flag, value)
    argv = _set_vllm(argv, "--host", host)
    argv = _set_vllm(argv, "--port", port)
    return argv


def _set_vllm(argv: list[str], flag: str, value: Any) -> list[str]:
    names = VLLM_ALIASES.get(flag, (flag,))
    out = argv
    for name in names:
        if name != flag:
            out = set_flag(out, name, None)
    return set_flag(out, flag, value)


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


def local_launch(spec: MatrixSpec, settings: dict[str, Any]) -> Launch:
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
                                                int(settings.get("num_draft_tokens") or 3), extra)
    args: list[str] = []
    if int(settings["tp"]) != 1:
        args = set_flag(args, "--tensor-parallel-size", int(settings["tp"]))
    for flag, value in (settings.get("flags") or {}).items():
        args = set_flag(args, flag, value)
    model = resolve_local_model(spec.model or "tiny-target")
    if not Path(model).is_dir():
        raise UserError(f"local engine: model folder {model} not found; run `make models` (or set SPECBENCH_MODELS)")
    cfg = vllm_local.LocalServerConfig(
        model=model, port=spec.port, host=spec.host, served_model_name=spec.served_model_name,
        max_model_len=settings.get("context_length"), max_num_seqs=settings.get("max_running_requests"),
        speculative=speculative, extra_args=tuple(args),
        extra_env={k: str(v) for k, v in (settings.get("env") or {}).items()},
    )
    exe = vllm_local.require_engine()  # a UserError naming `make engine` when absent
    argv = vllm_local.build_argv(cfg, exe)
    return Launch(argv, vllm_local.env_overrides(cfg), ("SGLANG_ENABLE_SPEC_V2",))


def local_tokenizer_dir(spec: MatrixSpec) -> str | None:
    """Where the model's tokenizer.json is: `tokenizer`, the local model, or the launch command's model
    (a folder, or its snapshot in the local Hugging Face cache). None when none of them has one."""
    if spec.tokenizer:
        return spec.tokenizer
    if spec.engine == "local":
        return resolve_local_model(spec.model or "tiny-target")
    model = command_model(spec.command)
    if not model:
        return None
    if (Path(model) / "tokenizer.json").is_file():
        return model
    from specbench.specs.resolve import hf_cache_config

    cfg = hf_cache_config(model)
    if cfg is not None and (cfg.parent / "tokenizer.json").is_file():
        return str(cfg.parent)
    return None


def command_model(argv: Sequence[str]) -> str | None:
    """The model of a launch command: `--model-path X` / `--model X` / `--model=X`, or `vllm serve X`."""
    for i, word in enumerate(argv):
        head, sep, tail = word.partition("=")
        if head in ("--model-path", "--model"):
            if sep:
                return tail
            if i + 1 < len(argv):
                return argv[i + 1]
        if word == "serve" and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            return argv[i + 1]
    return None


# ----------------------------------------------------------------------------- probes and parsing


def served_model(base_url: str, timeout_s: float = 10.0) -> str | None:
    with httpx.Client(timeout=timeout_s, trust_env=False) as c:
        r = c.get(base_url + "/v1/models")
        r.raise_for_status()
        data = r.json().get("data") or []
    return data[0]["id"] if data else None


def openai_probe(base_url: str, timeout_s: float) -> None:
    """One short completion through the OpenAI API; raises on failure."""
    model = served_model(base_url, min(timeout_s, 10.0))
    with httpx.Client(timeout=timeout_s, trust_env=False) as c:
        r = c.post(base_url + "/v1/completions", json={"model": model, "prompt": "Hello", "max_tokens": 2,
                                                      "temperature": 0})
        r.raise_for_status()
        if not r.json().get("choices"):
            raise RuntimeError(f"/v1/completions answered without choices: {r.text[:200]}")


def prom_labels(text: str, name: str) -> dict[str, str] | None:
    for line in text.splitlines():
        if line.startswith(name + "{"):
            body = line[len(name) + 1: line.index("}")]
            return dict(re.findall(r'(\w+)="([^"]*)"', body))
    return None


def nondefault_args(log_text: str) -> str | None:
    """vLLM logs `non-default args: {...}` at start; kept as the text it printed."""
    m = re.search(r"non-default args: (\{.*\})", log_text)
    return m.group(1) if m else None

