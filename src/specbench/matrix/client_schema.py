"""The `[client]` table of a matrix file: the client-side axes (load shape, workload, sampling) and their checks."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, ValidationInfo, field_validator

from specbench.matrix import client_checks
from specbench.matrix.schema_base import _Strict, as_axis, axis_at_least


class ClientAxes(_Strict):
    """Client-side axes: each combination is one cell on the running server.

    The workload keys after `slo_tpot_ms` and the sampling keys are left out of a cell when the matrix does not
    set them (its identity then stays what it was before they existed); any list is an axis (`stop`: a list of
    lists)."""

    # NaN/inf reach the checks below (and client_checks) so they name the key's own rule
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=True)

    concurrency: int | list[int] = 1
    prompt_tokens: int | list[int] = 256
    output_tokens: int | list[int] = 64
    # measured requests per cell; a matrix that sets neither this nor requests_per_concurrency measures at least 4 per
    # unit of concurrency (expansion.py DEFAULT_WAVES: several waves at high concurrency)
    num_requests: int | list[int] = 8
    dataset: str | list[str] = "specbench-mini"
    # requests per second (Poisson arrivals); "inf" = all at once, capped by concurrency (closed loop)
    request_rate: float | str | list[float | str] = "inf"
    # requests sent before the measured ones (not stored); the first cell of a concurrency on a boot gets at least one
    # full wave of them in a closed loop (matrix/warmup.py: a batch shape's first run is cold); 0 = none
    warmup_requests: int = 1
    # at least this many requests per unit of concurrency (num_requests = max(num_requests, k x concurrency)),
    # so one matrix keeps every concurrency busy without over-long low-concurrency cells
    requests_per_concurrency: int | None = None
    slo_ttft_ms: float | None = None  # goodput: a request counts when it meets every SLO given
    slo_tpot_ms: float | None = None
    # the cell's load sent this many times on the same server (warm-up once, before the first); metrics_json.spread
    # then holds mean, std, CV and a 95% interval per metric (load/spread.py); `specbench run --repeats N` overrides.
    # {min = A, max = B} (or "auto" = {min = 2, max = 8}): A repeats, then one more per round for each cell whose
    # decision against its question's best is still open, until decided or B (matrix/visits.py, matrix/rounds.py)
    repeats: int | dict[str, int] | str | None = None
    # every repeat on a fresh boot of its server, the servers interleaved A-B-A-B, so the interval holds boot-to-boot
    # drift (the whole matrix; not in an override)
    repeat_across_boots: bool | None = None
    # the A/A check: every autoregressive server is measured twice, as `<label>` and its twin `<label>-aa` launched
    # identically (cells algorithm "ar-aa", never the baseline): the same configuration against itself should come
    # out a tie or undecided (the whole matrix; not in an override)
    aa_check: bool | None = None
    noisy_cv: float | None = None  # a cell whose CV exceeds this is flagged noisy (default 0.05)
    # a cell with more failed requests than this fraction is `partial` (some) or `failed` (all); unset: 0
    max_failed_fraction: float | None = None
    # a request that asked ignore_eos (the default) and ended before its max_tokens makes its cell `partial`; true
    # allows such early stops (a cell whose sampling lets the model stop: ignore_eos = false needs no key)
    allow_early_stop: bool | None = None
    # steady state only (as GuideLLM's warm-up / cool-down percent): requests sent in the first `trim_warmup` of the
    # measured run's wall time, or still running in its last `trim_cooldown`, are left out of the cell's metrics
    # (their rows are kept); fractions, each in [0, 0.45]
    trim_warmup: float | None = None
    trim_cooldown: float | None = None
    # workload: "fixed" | "uniform:LO,HI" | "normal:MEAN,STD" | "data" (load/lengths.py); a dataset category;
    # ShareGPT conversations replayed turn by turn (needs prompt_len = "data")
    prompt_len: str | list[str] | None = None
    output_len: str | list[str] | None = None
    category: str | list[str] | None = None
    multi_turn: bool | list[bool] | None = None
    # sampling, sent with every request (load/bodies.py); unset: temperature 0, ignore_eos on, the server's defaults
    temperature: float | list[float] | None = None
    top_p: float | list[float] | None = None
    top_k: int | list[int] | None = None
    seed: int | list[int] | None = None
    ignore_eos: bool | list[bool] | None = None
    stop: list[str] | list[list[str]] | None = None

    @field_validator("concurrency", "prompt_tokens", "output_tokens", "num_requests")
    @classmethod
    def _positive(cls, v: int | list[int]) -> int | list[int]:
        return axis_at_least(v, 1)

    @field_validator("dataset")
    @classmethod
    def _dataset(cls, v: str | list[str], info: ValidationInfo) -> str | list[str]:
        for d in as_axis(v):
            client_checks.dataset(d, client_checks.base_dir(info.context))
        return v

    @field_validator("request_rate")
    @classmethod
    def _rate(cls, v: Any) -> Any:
        for r in as_axis(v):
            if isinstance(r, str):
                if r.strip().lower() not in ("inf", "infinity"):
                    raise ValueError(f'request_rate must be a number or "inf", got {r!r}')
            elif not r > 0:  # NaN too
                raise ValueError(f"request_rate must be > 0, got {r}")
        return v

    @field_validator("requests_per_concurrency")
    @classmethod
    def _rpc(cls, v: int | None) -> int | None:
        if v is not None and (isinstance(v, bool) or v < 1):
            raise ValueError(f"must be an integer >= 1, got {v}")
        return v

    @field_validator("repeats", mode="before")
    @classmethod
    def _repeats(cls, v: Any) -> Any:
        from specbench.matrix.visits import parse_repeats

        parse_repeats(v)
        return dict(v) if isinstance(v, dict) else v

    @field_validator("repeat_across_boots", "aa_check", mode="before")
    @classmethod
    def _switch(cls, v: Any, info: ValidationInfo) -> Any:
        if v is not None and not isinstance(v, bool):
            raise ValueError(f"{info.field_name} must be true or false, got {v!r}")
        return v

    @field_validator("noisy_cv")
    @classmethod
    def _noisy_cv(cls, v: float | None) -> float | None:
        if v is not None and (isinstance(v, bool) or not 0 < v < 10):
            raise ValueError(f"noisy_cv must be a number in (0, 10) (a fraction: 0.05 = 5%), got {v!r}")
        return v

    @field_validator("max_failed_fraction")
    @classmethod
    def _mff(cls, v: float | None) -> float | None:
        if v is not None and (isinstance(v, bool) or not 0.0 <= v <= 1.0):
            raise ValueError(f"must be a number in [0, 1], got {v!r}")
        return v

    @field_validator("trim_warmup", "trim_cooldown")
    @classmethod
    def _trim(cls, v: float | None) -> float | None:
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v <= 0.45):
            raise ValueError(f"must be a fraction of the run in [0, 0.45], got {v!r}")
        return v

    @field_validator("slo_ttft_ms", "slo_tpot_ms")
    @classmethod
    def _slo(cls, v: float | None) -> float | None:
        if v is not None and not 0 < v < float("inf"):
            raise ValueError(f"an SLO must be a finite number > 0 ms, got {v}")
        return v

    @field_validator("warmup_requests")
    @classmethod
    def _warm(cls, v: int) -> int:
        return axis_at_least(v, 0)

    @field_validator("temperature", "top_p", "top_k", "seed", "ignore_eos", "multi_turn", "allow_early_stop",
                     mode="before")
    @classmethod
    def _typed(cls, v: Any, info: ValidationInfo) -> Any:
        return client_checks.typed(str(info.field_name), v)

    @field_validator("temperature", "top_p", "top_k", "seed")
    @classmethod
    def _sampling(cls, v: Any, info: ValidationInfo) -> Any:
        for x in as_axis(v):
            client_checks.sampling(str(info.field_name), x)
        return v

    @field_validator("stop")
    @classmethod
    def _stop(cls, v: Any) -> Any:
        client_checks.stop_axis(v)
        return v

    @field_validator("prompt_len", "output_len")
    @classmethod
    def _length(cls, v: Any, info: ValidationInfo) -> Any:
        for x in as_axis(v):
            client_checks.length(str(info.field_name), x, client_checks.partner(info.context, info.data, "dataset"))
        return v

    @field_validator("category")
    @classmethod
    def _category(cls, v: Any, info: ValidationInfo) -> Any:
        for x in as_axis(v):
            client_checks.category(x, client_checks.partner(info.context, info.data, "dataset"),
                                   client_checks.base_dir(info.context))
        return v

    @field_validator("multi_turn")
    @classmethod
    def _multi_turn(cls, v: Any, info: ValidationInfo) -> Any:
        if any(as_axis(v)):
            client_checks.multi_turn(client_checks.partner(info.context, info.data, "prompt_len"),
                                     client_checks.partner(info.context, info.data, "dataset"))
        return v
