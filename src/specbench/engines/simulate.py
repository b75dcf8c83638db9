"""Simulated acceptance: an engine's own switch that makes the verify step accept a chosen mean number of tokens,
so dummy-weight boots measure what a real drafter of that quality would give (InferenceX pins a "golden" accept
length per model this way). Engine-neutral: each engine package answers `simulated_acceptance(...)`.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class SimulatedAcceptance:
    """How a server is told to simulate an accept length, or why it cannot be."""

    accept_len: float
    env: dict[str, str] = field(default_factory=dict)  # variables the server is started with
    speculative_config: dict[str, str | float] = field(default_factory=dict)  # keys merged into vLLM's --speculative-config
    source: str = ""  # the engine code that applies it
    refusal: str | None = None  # one line: why this engine/release/algorithm does not apply it

    @property
    def applies(self) -> bool:
        return self.refusal is None


def check_range(accept_len: float, max_len: int | None, what: str) -> str | None:
    """The engine accepts 1 <= L <= draft positions + 1; outside it is our refusal (SGLang would clamp silently)."""
    if not accept_len >= 1.0:  # also NaN
        return f"simulated_accept_len must be at least 1 (an accept length counts the bonus token), got {accept_len}"
    if max_len is not None and accept_len > max_len:
        return (f"simulated_accept_len {accept_len} is above {max_len}, the most {what} can accept per verify "
                "(draft tokens + 1)")
    return None
