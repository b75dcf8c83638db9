"""The matrix file format and its pydantic models (`MatrixSpec` and its tables), with the checks of each value.

A matrix names one engine and its base launch command, server-side axes (one boot each), client-side
axes (cells on one boot), per-axis overrides and the axes that order phases. Every list value is an
axis; the cartesian product of the server axes gives the server tuples, the product of the client
axes gives the cells of each tuple. Ids are stable hashes of the settings, so a re-run of the same
matrix finds its finished cells in the store.

    name = "incident"
    engine = "sglang"                    # sglang | vllm | local (embedded vLLM CPU) | openai (any server)
    command = ["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3.6-27B"]
    model = "Qwen/Qwen3.6-27B"           # optional: the model the server must serve (/v1/models; see below)
    host = "127.0.0.1"                   # the default; port = 30000 by default
    tokenizer = "path"                   # default: the model folder (or its HF-cache snapshot)
    api = "auto"                         # auto | chat | completions | generate (SGLang token ids)
    auto_fix = true                      # launch the planner's nearest working config instead of skipping
    phases = ["tp"]                      # run all tp=1 servers, then tp=4, ...
    [timeouts]  ready_s, request_s, stop_s, port_free_s, gpu_free_s
    [plan]      model_config, draft_config, gpu, gpu_mem_gib, engine_version, measured *_gib values
    [server]    tp, mem_fraction_static, max_running_requests, context_length (each a value or a list),
                flags = {"--any-flag" = value | [values]}, env = {VAR = "v" | ["v1", "v2"]}
    [[server.spec]]  label ("ddtree-b{ddtree_budget}"), algorithm, draft_model, num_draft_tokens,
                num_steps, eagle_topk, ddtree_budget (lists expand), flags, env
    [client]    concurrency, prompt_tokens, output_tokens, num_requests, request_rate ("inf" or
                req/s, Poisson), warmup_requests, slo_ttft_ms, slo_tpot_ms;
                dataset ("specbench-mini" (default) | "specbench-edit" | "random" | a .json ShareGPT / .jsonl / .csv / .parquet file |
                "hf:NAME[:SPLIT]"), category, prompt_len / output_len ("fixed" | "uniform:LO,HI" |
                "normal:MEAN,STD" | "data"), multi_turn; temperature, top_p, top_k, seed, ignore_eos,
                stop (a list; a list of lists is an axis)
    [[override]] when = {tp = 1}  server = {max_running_requests = 4}  client = {concurrency = [1, 2]}

`model` on the embedded engine (`local`) is the model folder it serves (under SPECBENCH_MODELS). On every other
engine the launch command names the model, and `model` is, as `vllm bench serve --model` and SGLang's
`bench_serving --model` have it, the model the server must serve: the requests name it and `/v1/models` must list it
at boot, else the server's cells fail before anything is measured, naming both (matrix/served_model.py::model_mismatch).
It is `served_model_name` (the "model" field of requests) under its bench-tool name: both given, they must agree.

See examples/demo.toml and examples/qwen36-27b-dflash-ddtree.toml. Errors name the file, the line and
the key: pydantic gives the key path, `toml_load.key_lines` finds its line in the TOML text.

`toml_load.py` reads a file into these models (`load_matrix`, `parse_matrix`) with file:line errors, and
`expansion.py` turns a `MatrixSpec` into server tuples and cells (`expand`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, PrivateAttr, ValidationInfo, field_validator, model_validator

from specbench.contracts_inputs import LaunchTarget, plan_gib_problem
from specbench.engines.server_base import SPEC_V2_ENV
from specbench.load.results import OPTIONAL_CLIENT_KEYS
from specbench.matrix import client_checks
from specbench.matrix.client_schema import ClientAxes
from specbench.matrix.schema_base import AR_NAMES, FlagValue, Scalar, _Strict, as_axis, axis_at_least
from specbench.matrix.schema_label import check_label

# what a speculative variant's label may name (expansion.py fills each axis value, and the draft model)
LABEL_PARAMS = ("num_draft_tokens", "num_steps", "eagle_topk", "ddtree_budget", "simulated_accept_len", "draft_model")


class SpecVariant(_Strict):
    """One value of the speculative axis: autoregressive (no `algorithm`) or one algorithm.

    Any parameter given as a list expands into several variants (e.g. `ddtree_budget = [8, 16, 32]`);
    `label` may name parameters in braces: `"ddtree-b{ddtree_budget}"`.
    """

    label: str | None = None
    algorithm: str | None = None  # engine spelling: SGLang DFLASH/DDTREE/EAGLE3..., vLLM draft_model/eagle3/ngram
    draft_model: str | None = None
    num_draft_tokens: int | list[int] | None = None
    num_steps: int | list[int] | None = None
    eagle_topk: int | list[int] | None = None
    ddtree_budget: int | list[int] | None = None
    # the engine's own simulated-acceptance switch (engines/simulate.py): SGLang SGLANG_SIMULATE_ACC_LEN, vLLM
    # synthetic rejection sampling; an axis; refused with the engine's reason where the release/algorithm does not
    # apply it. Carried in the tuple's settings only when given (ids of other matrices stay as they were).
    simulated_accept_len: float | list[float] | None = None
    flags: dict[str, FlagValue | list[FlagValue]] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)

    @property
    def is_ar(self) -> bool:
        return (self.algorithm or "").strip().lower() in AR_NAMES

    @model_validator(mode="after")
    def _check(self) -> SpecVariant:
        if self.is_ar:
            for name in ("draft_model", "num_draft_tokens", "num_steps", "eagle_topk", "ddtree_budget",
                         "simulated_accept_len"):
                if getattr(self, name) is not None:
                    raise ValueError(f"`{name}` needs an `algorithm` (this variant is autoregressive)")
            if SPEC_V2_ENV in self.env:
                raise ValueError(f"{SPEC_V2_ENV} must not be set for an autoregressive variant")
        if self.label is not None:
            params = [n for n in LABEL_PARAMS if getattr(self, n) is not None]
            check_label(self.label, params, template=not self.is_ar)
        for name in ("num_draft_tokens", "num_steps", "eagle_topk", "ddtree_budget"):
            axis_at_least(getattr(self, name), 1, f"`{name}`")
        for a in as_axis(self.simulated_accept_len):
            if a is not None and (isinstance(a, bool) or not 1.0 <= a < float("inf")):
                raise ValueError(f"`simulated_accept_len` must be a finite number >= 1, got {a}")
        return self


class ServerAxes(_Strict):
    """Server-side axes: each distinct combination is one server boot."""

    tp: int | list[int] = 1
    mem_fraction_static: float | list[float] | None = None  # SGLang mem fraction; vLLM gpu-memory-utilization
    max_running_requests: int | list[int] | None = None  # SGLang --max-running-requests; vLLM --max-num-seqs
    context_length: int | list[int] | None = None  # SGLang --context-length; vLLM --max-model-len
    flags: dict[str, FlagValue | list[FlagValue]] = Field(default_factory=dict)
    env: dict[str, str | list[str]] = Field(default_factory=dict)
    spec: list[SpecVariant] = Field(default_factory=lambda: [SpecVariant()])

    @field_validator("tp")
    @classmethod
    def _tp(cls, v: int | list[int]) -> int | list[int]:
        return axis_at_least(v, 1, "tp")

    @field_validator("mem_fraction_static")
    @classmethod
    def _frac(cls, v: float | list[float] | None) -> float | list[float] | None:
        for f in as_axis(v):
            if f is not None and not 0.0 < f <= 1.0:
                raise ValueError(f"mem_fraction_static must be in (0, 1], got {f}")
        return v

    @field_validator("max_running_requests", "context_length")
    @classmethod
    def _positive(cls, v: int | list[int] | None) -> int | list[int] | None:
        return axis_at_least(v, 1)

    @field_validator("spec")
    @classmethod
    def _spec_nonempty(cls, v: list[SpecVariant]) -> list[SpecVariant]:
        if not v:
            raise ValueError("at least one [[server.spec]] variant is needed (an empty one is autoregressive)")
        return v


# Built-in datasets (load/datasets.py): "specbench-mini" (the default; 48 prompts written for specbench in four
# categories) and "random" (words of the tokenizer's own vocabulary, load/prompts.py build_prompts). A file path
# (.json ShareGPT, .jsonl, .csv, .parquet) or "hf:NAME[:SPLIT]" (the local Hugging Face cache) names any other.
SERVER_SCALARS = ("tp", "mem_fraction_static", "max_running_requests", "context_length")
CLIENT_AXES = ("concurrency", "prompt_tokens", "output_tokens", "num_requests", "dataset", "request_rate")
# [client] keys that shape how the whole matrix is run (matrix/visits.py, matrix/expansion.py): never in an override
WHOLE_MATRIX_CLIENT_KEYS = ("repeat_across_boots", "aa_check")
# the axes a cell carries only when set are load/results.py OPTIONAL_CLIENT_KEYS (the workload's shape, then sampling)


class Override(_Strict):
    """Settings for the tuples that match `when`: e.g. `when = {tp = 1}`, `server = {max_running_requests = 4}`.

    `when` keys: `tp`, `mem_fraction_static`, `max_running_requests`, `context_length`, `spec` (a label),
    `algorithm`; a list value matches any of its values. `server` sets scalars (and merges `flags`, `env`);
    `client` replaces client axes (a list is an axis) for the cells of those tuples. Later overrides win.
    """

    when: dict[str, Scalar | list[Scalar]] = Field(default_factory=dict)
    server: dict[str, Any] = Field(default_factory=dict)
    client: dict[str, Any] = Field(default_factory=dict)

    @field_validator("when")
    @classmethod
    def _when(cls, v: dict[str, Any]) -> dict[str, Any]:
        allowed = set(SERVER_SCALARS) | {"spec", "algorithm"}
        for k in v:
            if k not in allowed:
                raise ValueError(f"unknown `when` key {k!r}; use one of {sorted(allowed)}")
        return v

    @field_validator("server")
    @classmethod
    def _server(cls, v: dict[str, Any]) -> dict[str, Any]:
        allowed = set(SERVER_SCALARS) | {"flags", "env"}
        for k, val in v.items():
            if k not in allowed:
                raise ValueError(f"unknown `server` key {k!r}; use one of {sorted(allowed)}")
            if k in SERVER_SCALARS and isinstance(val, list):
                raise ValueError(f"`server.{k}` in an override must be one value, not a list")
            if k in ("flags", "env") and not isinstance(val, dict):
                raise ValueError(f"`server.{k}` in an override must be a table")
        return v

    @field_validator("client")
    @classmethod
    def _client(cls, v: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        allowed = set(CLIENT_AXES) | set(OPTIONAL_CLIENT_KEYS) | {"warmup_requests", "slo_ttft_ms", "slo_tpot_ms",
                                                             "repeats", "noisy_cv", "max_failed_fraction",
                                                             "allow_early_stop", "trim_warmup", "trim_cooldown"}
        for k in v:
            if k in WHOLE_MATRIX_CLIENT_KEYS:
                raise ValueError(f"`{k}` is a setting of the whole matrix: set it in [client], not in an override")
            if k not in allowed:
                raise ValueError(f"unknown `client` key {k!r}; use one of {sorted(allowed)}")
        ctx = {**(info.context or {}), "partial_keys": set(v)}
        ClientAxes.model_validate({k: val for k, val in v.items()}, context=ctx)  # the checks of [client]
        return v


class Timeouts(_Strict):
    ready_s: float = 900.0  # health + first generation
    request_s: float = 600.0  # one request
    stop_s: float = 30.0  # SIGTERM grace before SIGKILL of the group
    port_free_s: float = 60.0
    gpu_free_s: float = 120.0

    @field_validator("*")
    @classmethod
    def _timeout(cls, v: float) -> float:
        if not 0 < v <= 7 * 86400:
            raise ValueError(f"a timeout must be > 0 and at most a week (604800 s), got {v}")
        return v


class PlanSettings(_Strict):
    """What the planner needs besides the launch command (see `specbench.contracts_inputs.PlanOptions`)."""

    model_config_: str | None = Field(default=None, alias="model_config")
    draft_config: str | None = None
    gpu: str | None = None
    gpu_mem_gib: float | None = None
    engine_version: str | None = None
    avail_before_load_gib: float | None = None
    weights_gib: float | None = None
    draft_weights_gib: float | None = None
    non_kv_gib: float | None = None

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, protected_namespaces=(),
                              strict=True, allow_inf_nan=False)

    @field_validator("gpu_mem_gib", "avail_before_load_gib", "weights_gib", "draft_weights_gib", "non_kv_gib")
    @classmethod
    def _gib(cls, v: float | None, info: ValidationInfo) -> float | None:
        why = plan_gib_problem(str(info.field_name), v)  # the bounds `specbench plan` checks (contracts_inputs.py)
        if why is not None:
            raise ValueError(why)
        return v


class MatrixSpec(_Strict):
    name: str = "matrix"
    engine: str  # a server kind of the engine registry: sglang | vllm | local | openai (any OpenAI-compatible server)
    command: list[str] = Field(default_factory=list)  # base launch command (argv), without the axes' flags
    # local engine: a model name under SPECBENCH_MODELS (default tiny-target); any other engine: the model the server
    # must serve, as `served_model_name` (which it then defaults)
    model: str | None = None
    # the "model" field of requests, checked against /v1/models at boot; default: `model` where the engine does not
    # launch it, else what /v1/models answers
    served_model_name: str | None = Field(default=None, validate_default=True)
    tokenizer: str | None = None  # folder with tokenizer.json (+ chat template) for exact-length prompts
    # request endpoint: auto = /v1/chat/completions when the tokenizer has a chat template (else
    # /v1/completions), SGLang's /generate with token ids for --skip-tokenizer-init servers
    api: Literal["auto", "chat", "completions", "generate"] = "auto"
    host: str = "127.0.0.1"
    port: int = 30000
    api_key: str | None = None  # sent as `Authorization: Bearer` (default: the launch command's --api-key)
    auto_fix: bool = False
    phases: list[str] = Field(default_factory=lambda: ["tp"])  # axes ordering the phases
    timeouts: Timeouts = Field(default_factory=Timeouts)
    plan: PlanSettings = Field(default_factory=PlanSettings)
    server: ServerAxes = Field(default_factory=ServerAxes)
    client: ClientAxes = Field(default_factory=ClientAxes)
    override: list[Override] = Field(default_factory=list)
    # the matrix file's folder: relative dataset paths are read from there (parse_matrix's `base_dir`)
    _matrix_dir: str | None = PrivateAttr(default=None)
    # absolute drafter paths not found on this machine, kept as written (toml_load.py::resolve_paths)
    _remote_paths: tuple[str, ...] = PrivateAttr(default=())

    def model_post_init(self, context: Any) -> None:
        self._matrix_dir = client_checks.base_dir(context)

    @property
    def matrix_dir(self) -> str | None:
        return self._matrix_dir

    @property
    def remote_paths(self) -> tuple[str, ...]:
        return self._remote_paths

    def target(self, port: int | None = None) -> LaunchTarget:
        """What a server adapter launches and where (on `port` instead of the matrix's, for a packed slot)."""
        return LaunchTarget(command=tuple(self.command), host=self.host, port=self.port if port is None else port,
                            model=self.model, served_model_name=self.served_model_name)

    @field_validator("host")
    @classmethod
    def _host(cls, v: str) -> str:
        import ipaddress

        if v != "localhost":
            try:
                ipaddress.ip_address(v)
            except ValueError:
                raise ValueError(f'host must be an IP address or "localhost", got {v!r}') from None
        return v

    @field_validator("port")
    @classmethod
    def _port(cls, v: int) -> int:
        if not 1 <= v <= 65535:
            raise ValueError(f"port must be in 1..65535, got {v}")
        return v

    @field_validator("served_model_name")
    @classmethod
    def _served_model(cls, v: str | None, info: ValidationInfo) -> str | None:
        """`model` where the engine does not launch it (the launch command names the model) is the model the server
        must serve: `served_model_name` unless that names another (a one-line refusal naming both)."""
        from specbench.engines.base import servers

        model, kind = info.data.get("model"), servers().get(str(info.data.get("engine")))
        if not model or kind is None or kind(None).launches_model:
            return v
        if v is not None and v != model:
            raise ValueError(f"`model` = {model!r} and `served_model_name` = {v!r} name different models; engine "
                             f"{info.data.get('engine')!r} does not launch `model` (its command names the model), so "
                             "both name the model the server must serve (/v1/models): give one of them")
        return model

    @field_validator("phases")
    @classmethod
    def _phases(cls, v: list[str]) -> list[str]:
        allowed = set(SERVER_SCALARS) | {"spec", "algorithm"}
        for a in v:
            if a not in allowed:
                raise ValueError(f"unknown phase axis {a!r}; use one of {sorted(allowed)}")
        return v

    @model_validator(mode="after")
    def _command(self) -> MatrixSpec:
        from specbench.engines.base import servers

        kinds = servers()
        if self.engine not in kinds:
            raise ValueError(f"unknown engine {self.engine!r}; use one of {sorted(kinds)}")
        if kinds[self.engine](None).needs_command and not self.command:
            raise ValueError(f"engine {self.engine!r} needs `command`, the base launch command as a list")
        return self
