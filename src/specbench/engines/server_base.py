"""What every `ServerAdapter` (engines/base.py) shares: the release it was asked for and the protocol's defaults.

A server kind subclasses `ServerBase` as a frozen dataclass and overrides the fields that differ (`name`,
`plan_engine`, `health_paths` ...) and the methods it does differently; the field order stays this one, so
`Server(version)` builds any of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specbench.contracts import LaunchTarget

# SGLang's switch of the overlap speculative worker (sglang/srt/environ.py::Envs.SGLANG_ENABLE_SPEC_V2@0.5.12;
# removed in 0.5.14). Defined once, here, because every server kind acts on it: every non-SGLang server drops it
# (the incident set it everywhere) and an autoregressive SGLang server never gets it.
SPEC_V2_ENV = "SGLANG_ENABLE_SPEC_V2"


@dataclass(frozen=True)
class ServerBase:
    version: str | None = None
    name: str = ""
    plan_engine: str | None = None
    health_paths: tuple[str, ...] = ("/health",)
    needs_command: bool = True
    tolerate_plan_errors: bool = False

    def default_plan_version(self) -> str | None:
        return self.version

    def local_model_dir(self, target: LaunchTarget) -> str | None:
        return None

    def private_launch(self, argv: list[str], env: dict[str, str], folder: Path) -> tuple[list[str], dict[str, str]]:
        """The launch as it is started: a server kind that can read its API key from the environment or a file
        moves it out of argv (visible to every user in `ps`). By default nothing moves: a server that reads its
        key only from `--api-key` keeps it there (the stored command and the logs are redacted all the same)."""
        return argv, env
