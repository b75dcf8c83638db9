"""An OpenAI-compatible server: the base command with the tuple's flags, host and port; `/v1/models` and one
completion as the readiness probe. Shared by every engine whose server speaks the OpenAI API."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

import httpx

from specbench.engines import httpclient, server_auth
from specbench.engines.argv import set_flag
from specbench.engines.base import Launch
from specbench.engines.server_base import SPEC_V2_ENV, ServerBase, planned_cap, setting_table

if TYPE_CHECKING:
    from specbench.contracts_inputs import LaunchTarget


class ServerInfo(TypedDict):
    """What `server_info` read: the path that answered and the JSON object it answered with (the server's own keys)."""

    source: str
    info: dict[str, object]


class InfoReadBack(TypedDict, total=False):
    """The read-back of a server that may answer `server_info` (SGLang's paths) and `/v1/models`: each key only
    where the server answered it."""

    source: str
    info: dict[str, object]
    models: list[dict[str, object]]


def info_read_back(base_url: str, info: ServerInfo | None) -> InfoReadBack:
    """`info` (when a path answered), then `/v1/models` `data` under `models` (when it answers)."""
    out: InfoReadBack = {"source": info["source"], "info": info["info"]} if info is not None else {}
    models = models_info(base_url)
    if models is not None:
        out["models"] = models
    return out


@dataclass(frozen=True)
class OpenAIServer(ServerBase):
    name: str = "openai"
    health_paths: tuple[str, ...] = ("/health", "/v1/models")

    def launch(self, target: LaunchTarget, settings: Mapping[str, object]) -> Launch:
        argv = list(target.command)
        for flag, value in setting_table(settings, "flags").items():
            argv = set_flag(argv, flag, value)
        argv = set_flag(set_flag(argv, "--host", target.host), "--port", target.port)
        env = {k: str(v) for k, v in setting_table(settings, "env").items()}
        return Launch(argv, env, (SPEC_V2_ENV,) if settings["algorithm"] == "ar" else ())

    def probe(self, base_url: str, timeout_s: float, argv: Sequence[str]) -> None:
        openai_probe(base_url, timeout_s)

    def client_mode(self, argv: Sequence[str]) -> str:
        return "openai"

    def read_back(self, base_url: str, log_text: str) -> InfoReadBack:
        return info_read_back(base_url, server_info(base_url))

    def metrics_text(self, base_url: str) -> str | None:
        return metrics_text(base_url)

    def running_cap(self, info: Mapping[str, object], log_text: str,
                    plan: Mapping[str, object] | None) -> tuple[int | None, str | None]:
        """Any engine's reading of what this server reports or logs (an OpenAI server is one of them underneath:
        each engine package reads its own keys and lines), else the planner's prediction."""
        from specbench.engines.base import servers

        for kind, factory in sorted(servers().items()):
            if kind == self.name:
                continue
            cap, source = factory(None).running_cap(info, log_text, None)
            if cap is not None:
                return cap, source
        return planned_cap(plan)


def models_info(base_url: str) -> list[dict[str, object]] | None:
    """`/v1/models` `data` (id, max_model_len ...); None when the server does not answer it (or not with a list of
    model objects, the OpenAI API's shape)."""
    try:
        with httpclient.client(trust_env=False, timeout=10.0, headers=server_auth.headers()) as c:
            r = c.get(base_url + "/v1/models")
        data = r.json().get("data") if r.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
    if not isinstance(data, list) or not all(isinstance(m, dict) for m in data):
        return None
    return data


SERVER_INFO_PATHS = ("/server_info", "/get_server_info")  # SGLang's (the second deprecated in 0.5.15.post1)


def server_info(base_url: str, timeout_s: float = 10.0,
                paths: Sequence[str] = SERVER_INFO_PATHS) -> ServerInfo | None:
    """`{"source": path, "info": {...}}` from the first of `paths` that answers 200 with a JSON object; else None."""
    with httpclient.client(trust_env=False, timeout=timeout_s, headers=server_auth.headers()) as c:
        for path in paths:
            try:
                r = c.get(base_url + path)
            except httpx.HTTPError:
                continue
            if r.status_code == 200:
                try:
                    info = r.json()
                except ValueError:
                    continue
                if isinstance(info, dict):
                    return {"source": path, "info": info}
    return None


def post_path(base_url: str, path: str, timeout_s: float = 30.0) -> tuple[bool, str]:
    """POST `path` with an empty body: (answered 2xx, the status and the start of the answer)."""
    try:
        with httpclient.client(trust_env=False, timeout=timeout_s, headers=server_auth.headers()) as c:
            r = c.post(base_url + path)
    except httpx.HTTPError as exc:
        return False, f"{path}: {type(exc).__name__}: {exc}"
    return 200 <= r.status_code < 300, f"{path}: HTTP {r.status_code} {r.text[:120].strip()}"


def metrics_text(base_url: str) -> str | None:
    """GET /metrics (vLLM's spec-decode counters live there); None when the server has none."""
    try:
        with httpclient.client(trust_env=False, timeout=10.0, headers=server_auth.headers()) as c:
            r = c.get(base_url + "/metrics")
    except httpx.HTTPError:
        return None
    return r.text if r.status_code == 200 else None


def served_model(base_url: str, timeout_s: float = 10.0) -> str | None:
    with httpclient.client(trust_env=False, timeout=timeout_s, headers=server_auth.headers()) as c:
        r = c.get(base_url + "/v1/models")
        r.raise_for_status()
        data = r.json().get("data") or []
    return data[0]["id"] if data else None


def served_models_now(base_url: str, timeout_s: float = 10.0) -> list[str] | None:
    """Every id GET /v1/models lists now; None when it cannot be read (no answer, not JSON): unknown, not a change."""
    try:
        with httpclient.client(trust_env=False, timeout=timeout_s, headers=server_auth.headers()) as c:
            r = c.get(base_url + "/v1/models")
        data = r.json().get("data") if r.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    if not isinstance(data, list):
        return None
    return [str(m["id"]) for m in data if isinstance(m, dict) and m.get("id") is not None]


def openai_probe(base_url: str, timeout_s: float) -> None:
    """One short completion through the OpenAI API; raises on failure."""
    model = served_model(base_url, min(timeout_s, 10.0))
    with httpclient.client(trust_env=False, timeout=timeout_s, headers=server_auth.headers()) as c:
        r = c.post(base_url + "/v1/completions", json={"model": model, "prompt": "Hello", "max_tokens": 2,
                                                      "temperature": 0})
        r.raise_for_status()
        if not r.json().get("choices"):
            raise RuntimeError(f"/v1/completions answered without choices: {r.text[:200]}")
