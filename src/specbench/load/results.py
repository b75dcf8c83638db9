"""What a load run is asked to do (`LoadSpec`) and what it measured (`RequestResult`, `LoadRun`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from specbench.errors import UserError

Api = Literal["completions", "chat", "generate"]
PATHS: dict[str, str] = {"completions": "/v1/completions", "chat": "/v1/chat/completions", "generate": "/generate"}


@dataclass(frozen=True, slots=True)
class RequestResult:
    """One measured request. Times in seconds; `itl_s` has one gap per content event after the first."""

    idx: int
    start_s: float  # when it was sent, relative to the start of the measured run
    ttft_s: float | None
    e2e_s: float | None
    itl_s: tuple[float, ...]
    prompt_tokens: int | None  # the server's `usage` / `meta_info` count, else the prompt's own count
    output_tokens: int  # the server's count when given, else the number of content events
    error: str | None = None
    spec_verify_ct: int | None = None  # SGLang meta_info
    accept_len: float | None = None  # SGLang: completion_tokens / spec_verify_ct
    events: int = 0  # content SSE events received

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def tpot_s(self) -> float | None:
        """(E2E - TTFT) / (output tokens - 1), as vLLM and SGLang's bench clients define it."""
        if self.error is not None or self.ttft_s is None or self.e2e_s is None or self.output_tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)


@dataclass(frozen=True)
class LoadSpec:
    """What to send and how. `request_rate=None` means closed loop at `concurrency`."""

    base_url: str
    api: Api = "completions"
    model: str = ""
    output_tokens: int = 128
    concurrency: int | None = 1
    request_rate: float | None = None
    num_requests: int = 100
    duration_s: float | None = None
    warmup_requests: int = 0
    include_usage: bool = True
    ignore_eos: bool = True
    temperature: float = 0.0
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    request_timeout_s: float = 600.0
    api_key: str | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.api not in PATHS:
            raise UserError(f"unknown api '{self.api}' (completions, chat or generate)")
        if self.output_tokens < 1:
            raise UserError(f"output tokens must be >= 1 (got {self.output_tokens})")
        if self.num_requests < 1:
            raise UserError(f"number of requests must be >= 1 (got {self.num_requests})")
        if self.warmup_requests < 0:
            raise UserError(f"warm-up requests must be >= 0 (got {self.warmup_requests})")
        if self.request_rate is None and (self.concurrency is None or self.concurrency < 1):
            raise UserError("give a concurrency >= 1 or a request rate")
        if self.request_rate is not None and not self.request_rate > 0:
            raise UserError(f"request rate must be > 0 (got {self.request_rate})")
        if self.concurrency is not None and self.concurrency < 1:
            raise UserError(f"concurrency must be >= 1 (got {self.concurrency})")
        if self.duration_s is not None and not self.duration_s > 0:
            raise UserError(f"duration must be > 0 s (got {self.duration_s})")
        u = urlsplit(self.base_url)
        if u.scheme != "http" or not u.hostname:
            raise UserError(f"base URL must be http://HOST:PORT (got '{self.base_url}')")


@dataclass(frozen=True)
class LoadRun:
    """The measured requests of one run (warm-up excluded) and the wall time they took."""

    results: tuple[RequestResult, ...]
    duration_s: float  # first measured send to last measured completion
    started_at: float  # time.time() at the first measured send
    warmup_errors: tuple[str, ...] = ()
    client_cpu_s: float = 0.0  # this process's CPU time (user + system) over the measured window
