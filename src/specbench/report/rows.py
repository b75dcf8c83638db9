"""The frozen rows the report is made of: phase-table rows, fastest per point, failures, logs, memory plan rows,
the summary, and `Tables` holding them all (built by tables.py, drawn by markdown.py, html.py and the plots)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from specbench.decide import Decision, Metric
from specbench.report.integrity import Integrity

DONE = "done"
# partial: more requests failed than max_failed_fraction; damaged: stored numbers no run writes (impossible.py)
FAILED_STATES = ("failed", "partial", "skipped", "damaged")


@dataclass(frozen=True)
class CellRow:
    """One line of a phase table."""

    store: str
    cell_id: str
    series: str
    config: str
    label: str
    phase: int | None
    tp: int | None
    concurrency: int | None
    workload: str
    status: str
    output_throughput: float | None
    ttft_p50: float | None
    ttft_p99: float | None
    tpot_p50: float | None
    tpot_p99: float | None
    tpot_mean: float | None
    itl_p50: float | None
    itl_p99: float | None
    accept_length: float | None
    speedup: float | None
    speedup_source: str  # "store" | "computed" | "baseline" | "no-baseline" | ""
    ar_throughput: float | None  # the AR cell's output_throughput at the same baseline key
    note: str
    log_file: str | None = None  # relative to the report folder, when the cell stored a log
    # with `repeats`: the 95% intervals (metrics_json.spread; speedup: the stored speedup_ci95, load/spread.py::ratio)
    repeats: int | None = None
    throughput_ci: tuple[float, float] | None = None
    speedup_ci: tuple[float, float] | None = None
    noisy: str = ""  # load/spread.py noisy_note, "" when not noisy
    simulated: float | None = None  # server_json.simulated_accept_len: the acceptance is the engine's simulation
    draft_tokens: int | None = None
    ttft_mean: float | None = None
    e2e_p50: float | None = None
    e2e_p99: float | None = None
    goodput: float | None = None
    draft_rate: float | None = None  # metrics_json.draft_acceptance_rate
    acceptance_per_pos: tuple[float, ...] = ()  # metrics_json.acceptance_per_pos (vLLM counters)
    # load/speedup.py: the decision of the throughput interval, the latency speedups (AR / this cell: TPOT mean, E2E
    # p50) with their intervals, which speedup leads (closed loop: throughput; rate cells: tpot) and its decision
    speedup_decision: str | None = None
    tpot_speedup: float | None = None
    tpot_speedup_ci: tuple[float, float] | None = None
    e2e_speedup: float | None = None
    e2e_speedup_ci: tuple[float, float] | None = None
    speedup_lead: str = "throughput"
    decision: str | None = None
    throughput_cv: float | None = None  # CV of the per-repeat output throughputs
    workload_full: str = ""  # every workload axis of the cell (the fastest tables' workload column)
    section: str = ""  # model · GPU of the cell's store (report/sections.py)
    # metrics_json.gpu_telemetry (matrix/telemetry.py), over the cell's GPUs: the highest peak memory used (MiB),
    # the mean utilization (%) and the summed mean power (W)
    gpu_memory_max: float | None = None
    gpu_util_mean: float | None = None
    gpu_power_mean: float | None = None
    # report/integrity.py: what the cell's numbers rest on, and the warnings a decision carries beside its name
    integrity: Integrity | None = None
    warnings: tuple[str, ...] = ()
    # decide/: the verdict against the AR cell per metric ("throughput", "tpot", "e2e" -> faster / slower / tie /
    # undecided) and against the best configuration of its question (report/decisions.py: "best" for the best)
    vs_ar: Mapping[str, str] = field(default_factory=dict)
    vs_best: Mapping[str, str] = field(default_factory=dict)
    rank: int | None = None  # its place in its question on the lead metric (1: the best)
    # every metric of load/metric_table.py that the cell tables show, by its metrics_json key (pooled over repeats)
    values: Mapping[str, float | None] = field(default_factory=dict)
    aa_twin: bool = False  # the A/A twin of the AR server (algorithm "ar-aa", matrix `aa_check`): AR against itself

    @property
    def lead_speedup(self) -> float | None:
        return self.tpot_speedup if self.speedup_lead == "tpot" else self.speedup

    @property
    def lead_speedup_ci(self) -> tuple[float, float] | None:
        return self.tpot_speedup_ci if self.speedup_lead == "tpot" else self.speedup_ci


@dataclass(frozen=True)
class PhaseTable:
    phase: int | None
    tp: int | None
    rows: tuple[CellRow, ...]
    section: str = ""  # model · GPU when the report has several (report/sections.py)

    @property
    def title(self) -> str:
        tp = f"TP{self.tp}" if self.tp is not None else "TP ?"
        text = f"Phase {self.phase} · {tp}" if self.phase is not None else tp
        return f"{self.section} · {text}" if self.section else text


@dataclass(frozen=True)
class FailedRun:
    """A failed or skipped cell, or a failed server, with a one-line diagnosis and its log file."""

    store: str
    kind: str  # "cell" | "server"
    ident: str
    series: str
    tp: int | None
    concurrency: int | None
    status: str
    diagnosis: str
    log_file: str | None  # relative to the report folder


@dataclass(frozen=True)
class LogFile:
    relpath: str
    text: str


@dataclass(frozen=True)
class MemoryRow:
    """The planner's memory plan of one server tuple, GiB per GPU (servers.plan_json)."""

    store: str
    server_id: str
    series: str
    tp: int | None
    status: str
    plan_status: str | None
    verdict: str | None  # servers.verdict: launch | fixed | skipped
    weights: float | None
    draft: float | None
    mamba: float | None
    kv: float | None
    headroom: float | None
    total: float | None
    kv_tokens: int | None
    max_running_requests: int | None
    mem_fraction_static: float | None

    @property
    def plan_text(self) -> str:
        """'ok', 'fails', 'ok (fixed)': the planner's status and, when not a plain launch, the runner's verdict."""
        text = str(self.plan_status) if self.plan_status else "–"
        return f"{text} ({self.verdict})" if self.verdict and self.verdict != "launch" else text

    @property
    def parts(self) -> tuple[tuple[str, float], ...]:
        named = (("weights", self.weights), ("draft", self.draft), ("Mamba", self.mamba), ("KV", self.kv),
                 ("headroom", self.headroom))
        return tuple((name, v) for name, v in named if v is not None and v > 0)


@dataclass(frozen=True)
class Best:
    """The fastest configuration at one TP, workload and concurrency (highest output_throughput, done cells)."""

    tp: int | None
    workload: str
    concurrency: int | None
    series: str
    output_throughput: float
    speedup: float | None
    ar_throughput: float | None
    is_baseline: bool = False
    best_spec: str | None = None  # the fastest speculative configuration at this point
    best_spec_speedup: float | None = None
    lead: str = "throughput"  # what "fastest" and the speedup mean here: throughput (closed loop) or tpot (rate)
    speedup_ci: tuple[float, float] | None = None
    decision: str | None = None  # of the fastest configuration's lead speedup: faster / slower / undecided
    cv: float | None = None  # CV of the fastest cell's per-repeat output throughput
    tpot_mean: float | None = None
    section: str = ""
    workload_full: str = ""
    best_spec_decision: str | None = None
    headline: str = ""  # the question's answer on its lead metric (decide/question.py: one of four statements)
    headline_kind: str = ""  # decided | tie | undecided | single | none

    @property
    def best_spec_text(self) -> str:
        """'<config> <speedup>×' of the fastest speculative configuration here, when AR won."""
        if not self.is_baseline or self.best_spec is None:
            return ""
        sp = f" {self.best_spec_speedup:.2f}×" if self.best_spec_speedup is not None else ""
        return f"{self.best_spec}{sp}"

    @property
    def speedup_text(self) -> str:
        if self.is_baseline:
            return "1.00× (AR is fastest)"
        if self.speedup is None:
            return "–"
        ci = f" [{self.speedup_ci[0]:.2f}, {self.speedup_ci[1]:.2f}]" if self.speedup_ci is not None else ""
        return f"{self.speedup:.2f}×{ci}"


@dataclass(frozen=True)
class Summary:
    state: str  # "empty" | "all-failed" | "partial" | "complete"
    headline: str
    counts: Mapping[str, int]
    n_cells: int


@dataclass(frozen=True)
class CategoryRow:
    """One speculative cell's results on the requests of one dataset category (requests.category).

    rate: mean per-request output tokens / E2E s; speedup: that over the AR cell's on the same category at the same
    baseline key; with repeats, the log-ratio interval of the per-repeat mean rates (load/spread.py::ratio)."""

    store: str
    series: str
    tp: int | None
    concurrency: int | None
    category: str
    requests: int
    accept_length: float | None
    rate: float | None
    ar_rate: float | None
    speedup: float | None
    speedup_ci: tuple[float, float] | None
    simulated: float | None


@dataclass(frozen=True)
class Question:
    """One question of the report (report/decisions.py) and its decision; `rows` are its cells' rows in rank order
    (with `rank` and `vs_best` set)."""

    section: str
    tp: int | None
    workload: str
    concurrency: int | None
    lead: Metric
    decision: Decision
    rows: tuple[CellRow, ...]

    def row(self, name: str) -> CellRow:
        return next(r for r in self.rows if r.series == name)


@dataclass(frozen=True)
class Tables:
    summary: Summary
    phases: tuple[PhaseTable, ...]
    best: tuple[Best, ...]
    failures: tuple[FailedRun, ...]
    memory: tuple[MemoryRow, ...]
    logs: tuple[LogFile, ...]
    warnings: tuple[str, ...]
    categories: tuple[CategoryRow, ...] = ()
    sections: tuple[str, ...] = ()  # "model · GPU" of each section, in order (one: no section headings)
    questions: tuple[Question, ...] = ()  # report/decisions.py: one per section · TP · workload · concurrency
