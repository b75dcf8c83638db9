"""SGLang as a benchmark target: launch argv per version, readiness, server-info read-back, client mode.

Flag spellings come from SGLang's own argument definitions (sglang/srt/server_args.py::ServerArgs.add_cli_args
@0.5.12.post1; the annotated `ServerArgs` fields and add_cli_args' deprecated aliases @0.5.15.post1): `--tp-size`
(alias `--tp`), `--speculative-*`, and the mamba strategy flag, which is `--mamba-scheduler-strategy` up to 0.5.13
and `--mamba-radix-cache-strategy` from 0.5.14 (0.5.15.post1 keeps the old one as a deprecated alias).
DDTREE is not upstream (an open PR adds `--speculative-ddtree-budget`); forks spell it that way.

`SGLANG_ENABLE_SPEC_V2` is never set for an autoregressive server (the incident set it everywhere);
from 0.5.14 it only logs "has been removed", so it is dropped there too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from specbench.engines import argv as argv_words
from specbench.engines import server_auth, server_base
from specbench.engines.base import Launch
from specbench.engines.cli_flags import set_server_axes
from specbench.engines.server_base import SPEC_V2_ENV, ServerBase, as_float, setting_table
from specbench.engines.sglang import knobs
from specbench.engines.sglang.simulate import collapsed_routing, routes_by_token_id, simulated_acceptance
from specbench.engines.versions import parse_release
from specbench.errors import UserError

if TYPE_CHECKING:
    from specbench.contracts_inputs import LaunchTarget
    from specbench.engines.openai.server import InfoReadBack, ServerInfo

HEALTH_PATHS = ("/health_generate", "/health")
SERVER_INFO_PATHS = ("/get_server_info", "/server_info")

# Flags that never change a measurement (server_args.py::ServerArgs@0.5.15.post1): where it listens (the NCCL port
# included), its keys, what and where it logs or dumps, the name it serves under, where it stores files it fetches.
NEUTRAL_FLAGS = (*server_base.NEUTRAL_FLAGS, "--admin-api-key", "--nccl-port", "--log-level", "--log-level-http",
                 "--log-requests", "--log-requests-level", "--log-requests-format", "--log-requests-target",
                 "--decode-log-interval", "--crash-dump-folder", "--served-model-name", "--download-dir",
                 "--file-storage-path")

# Setting the draft-token count replaces DFLASH's block size too: both are the per-request draft tokens
# (sglang/srt/arg_groups/speculative_hook.py@0.5.15: the block size is the draft-token count for DFLASH).
_SAME_SETTING = {"--speculative-num-draft-tokens": ("--speculative-dflash-block-size",)}


def mamba_strategy_flag(version: str | None) -> str:
    """`--mamba-scheduler-strategy` (<= 0.5.13) or `--mamba-radix-cache-strategy` (0.5.14+; the default)."""
    v = parse_release(version)
    if v is not None and v <= (0, 5, 13):
        return "--mamba-scheduler-strategy"
    return "--mamba-radix-cache-strategy"


def spell_flag(flag: str, version: str | None) -> str:
    """A user-written flag in this version's spelling (only the renamed mamba strategy differs).

    Without a known version the flag is left as the user wrote it."""
    if flag in ("--mamba-scheduler-strategy", "--mamba-radix-cache-strategy") and parse_release(version):
        return mamba_strategy_flag(version)
    return flag


def _spellings(flag: str) -> tuple[str, ...]:
    """Every spelling of the knob (engines/sglang/knobs.py) plus the settings it replaces."""
    return knobs.spellings(flag) + _SAME_SETTING.get(flag, ())


def set_flag(argv: Sequence[str], flag: str, value: object) -> list[str]:
    """argv with `flag` set to `value`, every SGLang spelling of it (knobs.py) replaced."""
    return argv_words.set_flag(argv, flag, value, _spellings(flag), knobs.release_flags(None).kinds.get)


def respell(argv: Sequence[str], version: str | None) -> list[str]:
    """The base command's flags in this version's spelling (`--x v` and `--x=v` forms)."""
    out = []
    for word in argv:
        head, sep, tail = word.partition("=")
        if head.startswith("--"):
            word = spell_flag(head, version) + sep + tail
        out.append(word)
    return out


def build_argv(base: Sequence[str], settings: Mapping[str, object], host: str, port: int,
               version: str | None = None) -> list[str]:
    """The launch argv for one server tuple: base command + the axes' flags; never a shell string."""
    argv = set_server_axes(respell(base, version), settings, knobs.KNOBS, set_flag)
    algo = str(settings.get("algorithm") or "ar")
    if algo.lower() != "ar":
        argv = set_flag(argv, "--speculative-algorithm", algo.upper())
        if settings.get("draft_model"):
            argv = set_flag(argv, "--speculative-draft-model-path", settings["draft_model"])
        for key, flag in (("num_steps", "--speculative-num-steps"),
                          ("eagle_topk", "--speculative-eagle-topk"),
                          ("num_draft_tokens", "--speculative-num-draft-tokens"),
                          ("ddtree_budget", "--speculative-ddtree-budget")):
            if settings.get(key) is not None:
                argv = set_flag(argv, flag, settings[key])
    else:  # an autoregressive server carries no speculative flag from the base command
        argv = [w for w in _strip_speculative(argv)]
    for flag, value in setting_table(settings, "flags").items():
        argv = set_flag(argv, spell_flag(flag, version), value)
    argv = set_flag(argv, "--host", host)
    argv = set_flag(argv, "--port", port)
    return argv


def _strip_speculative(argv: list[str]) -> list[str]:
    out: list[str] = []
    skipping = False
    for word in argv:
        if word.startswith("--"):
            skipping = word.split("=", 1)[0].startswith("--speculative-")
            if skipping:
                continue
        elif skipping:
            continue
        out.append(word)
    return out


def launch_env(env: dict[str, str], algorithm: str, version: str | None = None) -> tuple[dict[str, str], list[str]]:
    """The tuple's environment variables and notes on what was dropped."""
    notes: list[str] = []
    out = dict(env)
    if SPEC_V2_ENV in out:
        v = parse_release(version)
        if algorithm.lower() == "ar":
            del out[SPEC_V2_ENV]
            notes.append(f"{SPEC_V2_ENV} dropped: never set for an autoregressive server")
        elif v is not None and v >= (0, 5, 14):
            del out[SPEC_V2_ENV]
            notes.append(f"{SPEC_V2_ENV} dropped: removed in SGLang 0.5.14 (only logs a warning)")
    return out, notes


def env_to_drop(algorithm: str) -> tuple[str, ...]:
    """Variables removed from the inherited environment (an exported SPEC_V2 must not leak into AR)."""
    return (SPEC_V2_ENV,) if algorithm.lower() == "ar" else ()


def skips_tokenizer(argv: Sequence[str]) -> bool:
    return "--skip-tokenizer-init" in argv


def client_mode(argv: Sequence[str]) -> str:
    """`generate-ids` (native /generate with input_ids) for --skip-tokenizer-init servers, else `openai`."""
    return "generate-ids" if skips_tokenizer(argv) else "openai"


class _GenerateBody(TypedDict, total=False):
    """The probe's /generate request (io_struct.py::GenerateReqInput@0.5.15.post1): token ids or text."""

    sampling_params: dict[str, int]
    input_ids: list[int]
    text: str


def probe(base_url: str, timeout_s: float, token_ids: bool = False) -> None:
    """One short generation through the native /generate endpoint; raises on any failure."""
    from specbench.engines import httpclient  # httpx: ~0.1 s of import that `plan` / `predict` never need

    body: _GenerateBody = {"sampling_params": {"max_new_tokens": 2, "temperature": 0}}
    if token_ids:
        body["input_ids"] = [1, 2, 3, 4]
    else:
        body["text"] = "Hello"
    with httpclient.client(trust_env=False, timeout=timeout_s, headers=server_auth.headers()) as c:
        r = c.post(base_url + "/generate", json=body)
        r.raise_for_status()
        data = r.json()
    if isinstance(data, list):
        data = data[0]
    if "meta_info" not in data:
        raise RuntimeError(f"/generate answered without meta_info: {str(data)[:200]}")


def read_server_info(base_url: str, timeout_s: float = 10.0) -> ServerInfo | None:
    """The effective server arguments as the running server reports them (`GET /get_server_info`)."""
    from specbench.engines.openai.server import server_info

    return server_info(base_url, timeout_s, SERVER_INFO_PATHS)


@dataclass(frozen=True)
class SglangServer(ServerBase):
    """The runner's SGLang server: argv per release, /health_generate, /get_server_info, token-id client mode."""

    name: str = "sglang"
    plan_engine: str | None = "sglang"
    health_paths: tuple[str, ...] = HEALTH_PATHS
    neutral_flags: tuple[str, ...] = NEUTRAL_FLAGS

    def launch(self, target: LaunchTarget, settings: Mapping[str, object]) -> Launch:
        argv = build_argv(target.command, settings, target.host, target.port, self.version)
        env_set = {k: str(v) for k, v in setting_table(settings, "env").items()}  # strings (matrix/schema.py)
        env, notes = launch_env(env_set, str(settings["algorithm"]), self.version)
        if settings.get("simulated_accept_len") is not None:
            sim = simulated_acceptance(as_float(settings["simulated_accept_len"]), argv, self.version)
            if not sim.applies:
                raise UserError(f"simulated_accept_len for {settings.get('label') or settings['algorithm']}: "
                                f"{sim.refusal}")
            env = {**env, **sim.env}
            notes = [*notes, f"simulated acceptance {sim.accept_len} ({sim.source})"]
            stand_in = collapsed_routing(argv, env)
            notes = [*notes, stand_in] if stand_in else notes
        return Launch(argv, env, env_to_drop(str(settings["algorithm"])), tuple(notes))

    def stand_in_measurement(self, argv: Sequence[str], settings: Mapping[str, object]) -> str | None:
        """The launch's environment as `launch` builds it (the [server] env, then the simulated acceptance's
        variables) against simulate.py::collapsed_routing."""
        env = self._cell_env(argv, settings)
        return None if env is None else collapsed_routing(argv, env)

    def stand_in_routing(self, argv: Sequence[str], settings: Mapping[str, object]) -> bool:
        """simulate.py::routes_by_token_id of the launch's environment."""
        env = self._cell_env(argv, settings)
        return env is not None and routes_by_token_id(argv, env)

    def _cell_env(self, argv: Sequence[str], settings: Mapping[str, object]) -> dict[str, str] | None:
        """The [server] env, then the simulated acceptance's variables, as `launch` sets them; None where the
        simulated acceptance does not apply to this launch."""
        env = {k: str(v) for k, v in setting_table(settings, "env").items()}
        accept = settings.get("simulated_accept_len")
        if accept is not None:
            try:
                env.update(simulated_acceptance(as_float(accept), list(argv), self.version).env)
            except (UserError, ValueError):
                return None
        return env

    def probe(self, base_url: str, timeout_s: float, argv: Sequence[str]) -> None:
        probe(base_url, timeout_s, token_ids=skips_tokenizer(argv))

    def client_mode(self, argv: Sequence[str]) -> str:
        return client_mode(argv)

    def private_launch(self, argv: list[str], env: dict[str, str], folder: Path) -> tuple[list[str], dict[str, str]]:
        """`--api-key` / `--admin-api-key` move into a YAML file (mode 0600) read through `--config`: SGLang has no
        environment variable for them, but prepare_server_args merges `--config FILE` into its arguments
        (server_args.py::prepare_server_args and server_args_config_parser.py::ConfigArgumentMerger@0.5.12.post1
        and @0.5.15.post1). A command that has its own --config keeps its keys as given."""
        if "--config" in argv or any(w.startswith("--config=") for w in argv):
            return argv, env
        rest, keys = server_auth.take_flag(argv, "--api-key")
        rest, admin = server_auth.take_flag(rest, "--admin-api-key")
        if not keys and not admin:
            return argv, env
        import json
        import os

        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"sglang-keys-{os.getpid()}-{id(argv):x}.yaml"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:  # JSON strings are YAML scalars: any character of a key stays as it is
            for name, vals in (("api-key", keys), ("admin-api-key", admin)):
                if vals:
                    f.write(f"{name}: {json.dumps(vals[-1])}\n")
        return [*rest, "--config", str(path)], env

    def read_back(self, base_url: str, log_text: str) -> InfoReadBack:
        from specbench.engines.openai.server import info_read_back

        return info_read_back(base_url, read_server_info(base_url))

    def metrics_text(self, base_url: str) -> str | None:
        """GET /metrics: SGLang serves it with --enable-metrics (`sglang:generation_tokens_total`,
        `sglang:spec_verify_calls_total`: observability/metrics_collector.py@0.5.15.post1); None without it."""
        from specbench.engines.openai.server import metrics_text

        return metrics_text(base_url)

    def count_body(self, api: str) -> dict[str, bool]:
        """The OpenAI routes' text with its special tokens (`skip_special_tokens`, entrypoints/openai/protocol.py
        @0.5.15.post1), so the tokenizer's count of it sees every generated token; /generate streams output_ids."""
        return {} if api == "generate" else {"skip_special_tokens": False}

    def cache_reset_path(self) -> str | None:
        return "/flush_cache"  # entrypoints/http_server.py::flush_cache@0.5.15.post1 (GET or POST)

    def running_cap(self, info: Mapping[str, object], log_text: str,
                    plan: Mapping[str, object] | None) -> tuple[int | None, str | None]:
        return running_cap(info, log_text, plan)


def running_cap(info: Mapping[str, object], log_text: str,
                plan: Mapping[str, object] | None) -> tuple[int | None, str | None]:
    """The running cap: `/server_info` internal_states' `effective_max_running_requests_per_dp` x dp_size
    (managers/scheduler.py::Scheduler.get_internal_state@0.5.15.post1), else the log's summary line
    `max_running_requests=N` (the doctor's parser), else the planner's prediction."""
    from specbench.engines.server_base import planned_cap

    raw = info.get("info") if isinstance(info, dict) else None
    inner: dict[str, object] = raw if isinstance(raw, dict) else {}
    states_raw = inner.get("internal_states")
    states: list[object] = states_raw if isinstance(states_raw, list) else []
    per_dp = [s.get("effective_max_running_requests_per_dp") for s in states if isinstance(s, dict)]
    caps = [v for v in per_dp if isinstance(v, int) and not isinstance(v, bool) and v > 0]
    if caps:
        dp_raw = inner.get("dp_size")
        dp = dp_raw if isinstance(dp_raw, int) and not isinstance(dp_raw, bool) and dp_raw > 0 else 1
        return caps[0] * dp, "server: internal_states.effective_max_running_requests_per_dp"
    if log_text:
        from specbench.engines.sglang.loglines import LINES
        from specbench.logs.parse import parse_text

        v = parse_text(log_text, (LINES,)).max_running_requests
        if isinstance(v, int) and v > 0:
            return v, "log: max_running_requests"
    return planned_cap(plan)
