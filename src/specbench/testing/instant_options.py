"""What the instant server is told to do, as one frozen value: pacing, output length, the fault modes, the
ground-truth scheduler and every lie it may tell (instant_server.py turns the command line into it; instant_http.py
serves by it).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Options:
    burst: int = 16
    ttft_ms: float = 0.0
    itl_ms: float = 0.0
    max_output: int | None = None
    default_output: int = 16
    accept_length: int = 1
    num_spec_tokens: int = 3
    fail_every: int = 0
    close_every: int = 0
    error_event_every: int = 0
    malformed_every: int = 0
    truncate_every: int = 0
    stall_every: int = 0
    no_usage: bool = False
    model: str = "instant"
    record: str | None = None
    require_key: str | None = None  # --enforce-api-key: /v1 and /generate answer 401 without `Bearer KEY` (as vLLM)
    # ground truth (instant_truth.py): a batch scheduler with known step time, cap and acceptance; and its lies
    step_ms: float = 0.0
    step_ms_per_running: float = 0.0  # + this per request running in the step (a batch-dependent step time)
    max_running: int = 1 << 30
    accept_rates: tuple[float, ...] = ()
    seed: int = 0
    metrics: str = "vllm"  # which engine's counters /metrics shows in truth mode: vllm | sglang
    usage_scale: float = 1.0
    usage_offset: int = 0
    early_eos: float | None = None
    models_name: str | None = None
    report_cap: int | None = None
    accepted_scale: float = 1.0  # lie: /metrics shows the accepted draft tokens (total and per position) x this
    truth_file: str | None = None
    json_style: str = "compact"  # how the stream's JSON is spelled (instant_bodies.JSON_STYLES)
    # identity lies (load/honesty.py must catch each) and one honest oddity
    answer_model: str | None = None  # lie: every answer names this model, whatever /v1/models and the request say
    switch_model: str | None = None  # lie: after `switch_after` answers, /v1/models and the answers name this model
    switch_after: int = 0
    same_answer: bool = False  # lie: every prompt gets the same answer (a cache or a stub)
    prompt_tokens_lie: int | None = None  # lie: usage / meta_info prompt_tokens is this, whatever was sent
    empty_events: bool = False  # honest: an event without text between every two content events

    def lie(self, n: int) -> int | float:
        v = n * self.usage_scale + self.usage_offset
        return int(v) if float(v).is_integer() else v

    def fault_every(self) -> dict[str, int]:
        """Each fault of `instant_faults.FAULTS` -> every how many requests it happens (0: never)."""
        return {"close": self.close_every, "error": self.error_event_every, "malformed": self.malformed_every,
                "truncate": self.truncate_every, "stall": self.stall_every}
