"""Any OpenAI-compatible server the matrix launches by its own command (not planned)."""

from __future__ import annotations

from specbench.engines.base import ServerAdapter


def _server(version: str | None) -> ServerAdapter:
    from specbench.engines.openai.server import OpenAIServer

    return OpenAIServer(version)


SERVERS = {"openai": _server}
