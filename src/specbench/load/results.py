"""What a load run is asked to do (`LoadSpec`) and what it measured (`RequestResult`, `LoadRun`).

Sampling (`temperature`, `top_p`, `top_k`, `sampling_seed`, `ignore_eos`, `stop`) is checked here with the ranges both
engines accept: temperature >= 0 (vllm/sampling_params.py::SamplingParams._verify_args@0.32 also caps it at 2),
0 < top_p <= 1 (both), top_k -1 (off) or >= 1 (sglang/srt/sampling/sampling_params.py::SamplingParams.verify@0.5.15
refuses 0, vLLM takes 0 or -1 as off).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from specbench.errors import UserError
from specbench.load.stall import Stalls

Api = Literal["completions", "chat", "generate"]
PATHS: dict[str, str] = {"completions": "/v1/completions", "chat": "/v1/chat/completions", "generate": "/generate"}

# Client settings a cell carries only when its matrix sets them, so that the cells of a matrix without them keep the
# identity (and baseline key) they had before these existed: the workload's shape, then sampling. A value equal to
# what the client did before the key existed (CLIENT_DEFAULTS) is left out of the identity as well.
OPTIONAL_CLIENT_KEYS = ("prompt_len", "output_len", "category", "multi_turn",
                        "temperature", "top_p", "top_k", "seed", "ignore_eos", "stop")
CLIENT_DEFAULTS: dict[str, Any] = {"prompt_len": "fixed", "output_len": "fixed", "multi_turn": False,
                                   "temperature": 0.0, "ignore_eos": True}


def is_default(key: str, value: Any) -> bool:
    """An optional client setting that is unset or what the client did before the key existed."""
    if value is None:
        return True
    if key not in CLIENT_DEFAULTS:
        return False
    d = CLIENT_DEFAULTS[key]
    return isinstance(value, bool) == isinstance(d, bool) and value == d


def workload_extras(client: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """The optional client settings a cell sets to other than their defaults, as (key, JSON) pairs, key order."""
    import json

    return tuple((k, json.dumps(client[k], sort_keys=True)) for k in OPTIONAL_CLIENT_KEYS
                 if not is_default(k, client.get(k)))


@dataclass(frozen=True, slots=True)
class RequestResult:
    """One measured request. Times in seconds; `itl_s` has one gap per content event after the first."""

    idx: int
    start_s: float  # when it was sent, relative to the start of the measured run
    ttft_s: float | None
    e2e_s: float | None
    itl_s: tuple[float, ...]
    prompt_tokens: int | None  # the client's count of the prompt it sent, else the server's (load/honesty.py)
    output_tokens: int  # the verified count (load/counting.py): the client's where exact, else the server's
    error: str | None = None
    spec_verify_ct: int | None = None  # SGLang meta_info
    accept_len: float | None = None  # SGLang: output tokens / spec_verify_ct
    events: int = 0  # content SSE events received
    server_output_tokens: int | None = None  # what the server said (`usage` / `meta_info` completion_tokens)
    counted_tokens: int | None = None  # what the client counted (load/counting.py), None when it could not
    count_source: str | None = None  # "token_ids" | "tokenizer" | None
    max_tokens: int | None = None  # the output tokens the request asked for
    early_stop: bool = False  # asked ignore_eos, ended before max_tokens
    accept_hist: tuple[int, ...] | None = None  # SGLang meta_info spec_correct_drafts_histogram ([k]: steps with k)
    answer_digest: str | None = None  # the answer's content digest (load/honesty.py), None when not kept

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
    # every name /v1/models listed at boot: an answer may name any of them (vLLM answers with its first served name
    # whatever alias the request asked: entrypoints/openai/models/serving.py::OpenAIServingModels.model_name@0.32.0)
    served_models: tuple[str, ...] = ()
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
    seed: int = 0  # the Poisson arrivals' seed
    top_p: float | None = None  # None: not sent (the server's default)
    top_k: int | None = None
    sampling_seed: int | None = None  # the request's `seed` (SGLang /generate: `sampling_seed`)
    stop: tuple[str, ...] | None = None
    # count the output tokens received (load/counting.py): the body is kept for after the run; `token_counter` is the
    # tokenizer's batch count of texts (None: token ids in the stream, or the server's count within its bounds)
    count_tokens: bool = True
    token_counter: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        check_sampling(self.temperature, self.top_p, self.top_k, self.sampling_seed, self.stop)
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
    client_stalls: Stalls = Stalls()  # the client's own event loop held up over that window (load/stall.py)


TEMPERATURE_MAX = 2.0  # vllm/sampling_params.py::SamplingParams._verify_args@0.32: "temperature must be in [0, 2]"


def check_sampling(temperature: float | None, top_p: float | None, top_k: int | None, seed: int | None,
                   stop: tuple[str, ...] | list[str] | None) -> None:
    """One-line errors for sampling values no engine takes (the matrix schema calls this for each axis value)."""
    if temperature is not None:
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not math.isfinite(temperature):
            raise UserError(f"temperature must be a finite number, got {temperature!r}")
        if not 0.0 <= temperature <= TEMPERATURE_MAX:
            raise UserError(f"temperature must be in [0, {TEMPERATURE_MAX:g}], got {temperature}")
    if top_p is not None:
        if isinstance(top_p, bool) or not isinstance(top_p, (int, float)) or not math.isfinite(top_p):
            raise UserError(f"top_p must be a finite number, got {top_p!r}")
        if not 0.0 < top_p <= 1.0:
            raise UserError(f"top_p must be in (0, 1], got {top_p}")
    if top_k is not None:
        if isinstance(top_k, bool) or not isinstance(top_k, int):
            raise UserError(f"top_k must be a whole number, got {top_k!r}")
        if top_k != -1 and top_k < 1:
            raise UserError(f"top_k must be -1 (off) or >= 1, got {top_k}")
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise UserError(f"seed must be a whole number, got {seed!r}")
        if not 0 <= seed < 2**63:
            raise UserError(f"seed must be in [0, 2^63), got {seed}")
    if stop is not None:
        if not isinstance(stop, (list, tuple)) or not all(isinstance(x, str) and x for x in stop):
            raise UserError(f"stop must be a list of non-empty strings, got {stop!r}")
