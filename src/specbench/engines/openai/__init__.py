"""Any OpenAI-compatible server the matrix launches by its own command (not planned)."""

from __future__ import annotations

from typing import Any


def _server(version: str | None) -> Any:
    from specbench.engines.openai.server import OpenAIServer

    return OpenAIServer(version)


SERVERS = {"openai": _server}
