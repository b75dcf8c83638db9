"""The instant server's fault modes (`--close-every`, `--error-event-every`, `--malformed-every`, `--truncate-every`,
`--stall-every`): which are due on a request, and each one injected at its event, half-way through the stream."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

from specbench.testing.instant_bodies import DONE, END, chunk, sse

FAULTS = ("close", "error", "malformed", "truncate", "stall")


def due(every: Mapping[str, int], nth: int, n_events: int) -> dict[str, int]:
    """Fault -> the event index it happens at (half-way), for each fault whose `every` divides request `nth`."""
    return {what: n_events // 2 for what in FAULTS if every.get(what) and nth % every[what] == 0}


async def inject(faults: Mapping[str, int], k: int, send: Callable[[bytes], None],
                 transport: asyncio.Transport | None, style: str = "compact") -> bool:
    """Inject the fault due at event `k` (an event's JSON spelled in `style`); True when the response ends here."""
    if faults.get("close") == k:
        assert transport is not None
        transport.abort()
        return True
    if faults.get("error") == k:
        send(sse({"error": {"object": "error", "message": "injected mid-stream error",
                            "type": "InternalServerError", "code": 500}}, style) + DONE + END)
        return True
    if faults.get("malformed") == k:
        send(chunk(b"data: <html>not json</html>\n\n"))  # then the stream goes on as if nothing happened
    if faults.get("truncate") == k:
        send(END)  # the last chunk: a clean end, with no [DONE]
        return True
    if faults.get("stall") == k:
        await asyncio.sleep(3600)  # the client's request timeout ends it
        return True
    return False
