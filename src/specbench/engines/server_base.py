"""What every `ServerAdapter` (engines/base.py) shares: the release it was asked for and the protocol's defaults.

A server kind subclasses `ServerBase` as a frozen dataclass and overrides the fields that differ (`name`,
`plan_engine`, `health_paths` ...) and the methods it does differently; the field order stays this one, so
`Server(version)` builds any of them.

The defaults: no extra request fields for counting tokens, no prefix-cache reset route, the served model names from
the read-back's `/v1/models` list, the running cap from the planner's prediction (`max_running_requests` of the
plan contract: what the engine would end up with), and as `neutral_flags` (the launch flags that never change a
result: `specbench compare` matches two runs' servers on their commands without them) where it listens and its key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from specbench.errors import UserError

if TYPE_CHECKING:
    from specbench.contracts_inputs import LaunchTarget

# SGLang's switch of the overlap speculative worker (sglang/srt/environ.py::Envs.SGLANG_ENABLE_SPEC_V2@0.5.12;
# removed in 0.5.14). Defined once, here, because every server kind acts on it: every non-SGLang server drops it
# (the incident set it everywhere) and an autoregressive SGLang server never gets it.
SPEC_V2_ENV = "SGLANG_ENABLE_SPEC_V2"


# Launch flags that never change what a benchmark measures: where the server listens and the key it asks for. Every
# server kind takes these; an engine adds its own (log, dump and name flags) to its `neutral_flags`.
NEUTRAL_FLAGS = ("--host", "--port", "--api-key")


@dataclass(frozen=True)
class ServerBase:
    version: str | None = None
    name: str = ""
    plan_engine: str | None = None
    health_paths: tuple[str, ...] = ("/health",)
    needs_command: bool = True
    tolerate_plan_errors: bool = False
    neutral_flags: tuple[str, ...] = NEUTRAL_FLAGS
    launches_model: bool = False

    def default_plan_version(self) -> str | None:
        return self.version

    def local_model_dir(self, target: LaunchTarget) -> str | None:
        return None

    def private_launch(self, argv: list[str], env: dict[str, str], folder: Path) -> tuple[list[str], dict[str, str]]:
        """The launch as it is started: a server kind that can read its API key from the environment or a file
        moves it out of argv (visible to every user in `ps`). By default nothing moves: a server that reads its
        key only from `--api-key` keeps it there (the stored command and the logs are redacted all the same)."""
        return argv, env

    def count_body(self, api: str) -> dict[str, bool]:
        return {}

    def cache_reset_path(self) -> str | None:
        return None

    def stand_in_measurement(self, argv: Sequence[str], settings: Mapping[str, object]) -> str | None:
        return None

    def stand_in_routing(self, argv: Sequence[str], settings: Mapping[str, object]) -> bool:
        return False  # an engine that says nothing of its dummy weights' routing: each token routed on its own

    def served_models(self, info: Mapping[str, object]) -> list[str] | None:
        models = info.get("models")
        if not isinstance(models, list):
            return None
        return [str(m["id"]) for m in models if isinstance(m, dict) and m.get("id") is not None]

    def running_cap(self, info: Mapping[str, object], log_text: str,
                    plan: Mapping[str, object] | None) -> tuple[int | None, str | None]:
        return planned_cap(plan)



def setting_table(settings: Mapping[str, object], key: str) -> Mapping[str, object]:
    """A server tuple's table setting (`flags`, `env`: matrix/schema.py), {} when absent or empty."""
    value = settings.get(key) or {}
    if not isinstance(value, Mapping):
        raise UserError(f"server setting {key!r} is not a table: {value!r}")
    return value


def as_int(value: object) -> int:
    """`int(value)` for a setting the matrix schema validated as a number (or its string); a one-line error else
    (an override's `server` values reach here unchecked)."""
    return int(_number(value, int))


def as_float(value: object) -> float:
    """`float(value)` for a setting the matrix schema validated as a number (or its string)."""
    return float(_number(value, float))


def _number(value: object, cast: type[int] | type[float]) -> int | float:
    """`cast(value)`, or the one-line error for anything that is no finite number (a bool, a table, "x", inf)."""
    if isinstance(value, (int, float, str)) and not isinstance(value, bool):
        try:
            return cast(value)
        except (ValueError, OverflowError):
            pass
    raise UserError(f"server setting: not a number: {value!r}")


def as_opt_int(value: object) -> int | None:
    """An optional integer setting as the matrix schema validated it (`context_length`, `max_running_requests`); a
    whole float (4096.0, from an override's `server` table) is that integer; anything else a one-line error."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise UserError(f"server setting: not an integer: {value!r}")


def planned_cap(plan: Mapping[str, object] | None) -> tuple[int | None, str | None]:
    """The planner's `max_running_requests` (plan contract), the fallback of every engine's running cap."""
    v = (plan or {}).get("max_running_requests")
    if isinstance(v, int) and not isinstance(v, bool) and v > 0:
        return v, "planner: max_running_requests"
    return None, None
