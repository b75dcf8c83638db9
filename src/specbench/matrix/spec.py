"""The benchmark matrix: a TOML file -> a validated `MatrixSpec` -> server tuples and cells.

A matrix names one engine and its base launch command, server-side axes (one boot each), client-side
axes (cells on one boot), per-axis overrides and the axes that order phases. Every list value is an
axis; the cartesian product of the server axes gives the server tuples, the product of the client
axes gives the cells of each tuple. Ids are stable hashes of the settings, so a re-run of the same
matrix finds its finished cells in the store.

    name = "incident"
    engine = "sglang"                    # sglang | vllm | local (embedded vLLM CPU) | openai (any server)
    command = ["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3.6-27B"]
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
    [client]    concurrency, prompt_tokens, output_tokens, num_requests, dataset, request_rate ("inf" or
                req/s, Poisson), warmup_requests, slo_ttft_ms, slo_tpot_ms
    [[override]] when = {tp = 1}  server = {max_running_requests = 4}  client = {concurrency = [1, 2]}

See examples/demo.toml and examples/qwen36-27b-dflash-ddtree.toml. Errors name the file, the line and
the key: pydantic gives the key path, `key_lines` finds its line in the TOML text.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from specbench.errors import UserError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

Scalar = bool | int | float | str
# A flag value: a scalar, `true` (a bare switch), `false` (left out), or a list of strings passed
# as several argv words after the flag (written as a list inside a list when it is also an axis).
FlagValue = Scalar | list[str]

AR_NAMES = frozenset({"", "ar", "none", "autoregressive"})
SPEC_V2_ENV = "SGLANG_ENABLE_SPEC_V2"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _as_axis(value: Any) -> tuple[Any, ...]:
    """A scalar is an axis of one value; a list is an axis of its values."""
    if isinstance(value, (list, tuple)):
        return tuple(value)
    return (value,)


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
    flags: dict[str, FlagValue | list[FlagValue]] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)

    @property
    def is_ar(self) -> bool:
        return (self.algorithm or "").strip().lower() in AR_NAMES

    @model_validator(mode="after")
    def _check(self) -> SpecVariant:
        if self.is_ar:
            for name in ("draft_model", "num_draft_tokens", "num_steps", "eagle_topk", "ddtree_budget"):
                if getattr(self, name) is not None:
                    raise ValueError(f"`{name}` needs an `algorithm` (this variant is autoregressive)")
            if SPEC_V2_ENV in self.env:
                raise ValueError(f"{SPEC_V2_ENV} must not be set for an autoregressive variant")
        for name in ("num_draft_tokens", "num_steps", "eagle_topk", "ddtree_budget"):
            for v in _as_axis(getattr(self, name)):
                if v is not None and v < 1:
                    raise ValueError(f"`{name}` must be >= 1, got {v}")
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
        for t in _as_axis(v):
            if t < 1:
                raise ValueError(f"tp must be >= 1, got {t}")
        return v

    @field_validator("mem_fraction_static")
    @classmethod
    def _frac(cls, v: float | list[float] | None) -> float | list[float] | None:
        for f in _as_axis(v):
            if f is not None and not 0.0 < f <= 1.0:
                raise ValueError(f"mem_fraction_static must be in (0, 1], got {f}")
        return v

    @field_validator("max_running_requests", "context_length")
    @classmethod
    def _positive(cls, v: int | list[int] | None) -> int | list[int] | None:
        for n in _as_axis(v):
            if n is not None and n < 1:
                raise ValueError(f"must be >= 1, got {n}")
        return v

    @field_validator("spec")
    @classmethod
    def _spec_nonempty(cls, v: list[SpecVariant]) -> list[SpecVariant]:
        if not v:
            raise ValueError("at least one [[server.spec]] variant is needed (an empty one is autoregressive)")
        return v


# "random": distinct prompts of exact token length, words of the tokenizer's own vocabulary
# (specbench.load.prompts.build_prompts); the only dataset the load generator builds today.
DATASETS = frozenset({"random"})


class ClientAxes(_Strict):
    """Client-side axes: each combination is one cell on the running server."""

    concurrency: int | list[int] = 1
    prompt_tokens: int | list[int] = 256
    output_tokens: int | list[int] = 64
    num_requests: int | list[int] = 8
    dataset: str | list[str] = "random"
    # requests per second (Poisson arrivals); "inf" = all at once, capped by concurrency (closed loop)
    request_rate: float | str | list[float | str] = "inf"
    warmup_requests: int = 1
    slo_ttft_ms: float | None = None  # goodput: a request counts when it meets every SLO given
    slo_tpot_ms: float | None = None

    @field_validator("concurrency", "prompt_tokens", "output_tokens", "num_requests")
    @classmethod
    def _positive(cls, v: int | list[int]) -> int | list[int]:
        for n in _as_axis(v):
            if n < 1:
                raise ValueError(f"must be >= 1, got {n}")
        return v

    @field_validator("dataset")
    @classmethod
    def _dataset(cls, v: str | list[str]) -> str | list[str]:
        for d in _as_axis(v):
            if d not in DATASETS:
                raise ValueError(f"unknown dataset {d!r}; supported: {sorted(DATASETS)}")
        return v

    @field_validator("request_rate")
    @classmethod
    def _rate(cls, v: Any) -> Any:
        for r in _as_axis(v):
            if isinstance(r, str):
                if r.strip().lower() not in ("inf", "infinity"):
                    raise ValueError(f'request_rate must be a number or "inf", got {r!r}')
            elif r <= 0:
                raise ValueError(f"request_rate must be > 0, got {r}")
        return v

    @field_validator("warmup_requests")
    @classmethod
    def _warm(cls, v: int) -> int:
        if v < 0:
            raise ValueError(f"must be >= 0, got {v}")
        return v


SERVER_SCALARS = ("tp", "mem_fraction_static", "max_running_requests", "context_length")
CLIENT_AXES = ("concurrency", "prompt_tokens", "output_tokens", "num_requests", "dataset", "request_rate")


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
    def _client(cls, v: dict[str, Any]) -> dict[str, Any]:
        allowed = set(CLIENT_AXES) | {"warmup_requests", "slo_ttft_ms", "slo_tpot_ms"}
        for k in v:
            if k not in allowed:
                raise ValueError(f"unknown `client` key {k!r}; use one of {sorted(allowed)}")
        ClientAxes.model_validate({k: val for k, val in v.items()})  # same checks as [client]
        return v


class Timeouts(_Strict):
    ready_s: float = 900.0  # health + first generation
    request_s: float = 600.0  # one request
    stop_s: float = 30.0  # SIGTERM grace before SIGKILL of the group
    port_free_s: float = 60.0
    gpu_free_s: float = 120.0


class PlanSettings(_Strict):
    """What the planner needs besides the launch command (see `specbench.plan.api.PlanOptions`)."""

    model_config_: str | None = Field(default=None, alias="model_config")
    draft_config: str | None = None
    gpu: str | None = None
    gpu_mem_gib: float | None = None
    engine_version: str | None = None
    avail_before_load_gib: float | None = None
    weights_gib: float | None = None
    draft_weights_gib: float | None = None
    non_kv_gib: float | None = None

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, protected_namespaces=())


class MatrixSpec(_Strict):
    name: str = "matrix"
    engine: str  # a server kind of the engine registry: sglang | vllm | local | openai (any OpenAI-compatible server)
    command: list[str] = Field(default_factory=list)  # base launch command (argv), without the axes' flags
    model: str | None = None  # local engine: a model name under SPECBENCH_MODELS (default tiny-target)
    served_model_name: str | None = None  # the "model" field of requests; default: what /v1/models answers
    tokenizer: str | None = None  # folder with tokenizer.json (+ chat template) for exact-length prompts
    # request endpoint: auto = /v1/chat/completions when the tokenizer has a chat template (else
    # /v1/completions), SGLang's /generate with token ids for --skip-tokenizer-init servers
    api: Literal["auto", "chat", "completions", "generate"] = "auto"
    host: str = "127.0.0.1"
    port: int = 30000
    auto_fix: bool = False
    phases: list[str] = Field(default_factory=lambda: ["tp"])  # axes ordering the phases
    timeouts: Timeouts = Field(default_factory=Timeouts)
    plan: PlanSettings = Field(default_factory=PlanSettings)
    server: ServerAxes = Field(default_factory=ServerAxes)
    client: ClientAxes = Field(default_factory=ClientAxes)
    override: list[Override] = Field(default_factory=list)

    @field_validator("port")
    @classmethod
    def _port(cls, v: int) -> int:
        if not 1 <= v <= 65535:
            raise ValueError(f"port must be in 1..65535, got {v}")
        return v

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


# ----------------------------------------------------------------------------- loading and errors


_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")


def _split_key(text: str) -> list[str]:
    """`a."b.c".d` -> ["a", "b.c", "d"]."""
    parts, cur, quote = [], "", None
    for ch in text:
        if quote:
            if ch == quote:
                quote = None
            else:
                cur += ch
        elif ch in "\"'":
            quote = ch
        elif ch == ".":
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    parts.append(cur.strip())
    return parts


def _key_part(line: str) -> str | None:
    """The key of a `key = value` line, or None."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "=":
            return line[:i].strip() or None
        elif ch == "#":
            return None
    return None


def key_lines(text: str) -> dict[tuple[Any, ...], int]:
    """Map every key path of a TOML document to its 1-based line (array-of-tables carry their index)."""
    lines: dict[tuple[Any, ...], int] = {}
    table: tuple[Any, ...] = ()
    counts: dict[tuple[Any, ...], int] = {}
    depth = 0  # open brackets of a multi-line value
    for no, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if depth > 0:
            depth += line.count("[") + line.count("{") - line.count("]") - line.count("}")
            continue
        if not line or line.startswith("#"):
            continue
        m = _HEADER.match(line)
        if m and "=" not in line.split("#")[0]:
            path = tuple(_split_key(m.group(2)))
            if m.group(1) == "[[":
                # an array of tables: [[server.spec]] is server.spec[i]; parents may be arrays too
                base = _resolve_parent(path[:-1], counts)
                arr = base + (path[-1],)
                idx = counts.get(arr, 0)
                counts[arr] = idx + 1
                table = arr + (idx,)
                lines.setdefault(arr, no)
            else:
                table = _resolve_parent(path[:-1], counts) + (path[-1],)
            lines.setdefault(table, no)
            continue
        key = _key_part(line)
        if key is None:
            continue
        path = table + tuple(_split_key(key))
        for i in range(len(table) + 1, len(path) + 1):
            lines.setdefault(path[:i], no)
        value = line.split("=", 1)[1]
        depth = value.count("[") + value.count("{") - value.count("]") - value.count("}")
        depth = max(depth, 0)
    return lines


def _resolve_parent(path: tuple[Any, ...], counts: dict[tuple[Any, ...], int]) -> tuple[Any, ...]:
    out: tuple[Any, ...] = ()
    for part in path:
        out = out + (part,)
        if out in counts:  # inside the latest element of an array of tables
            out = out + (counts[out] - 1,)
    return out


def line_of(text: str, loc: tuple[Any, ...]) -> int | None:
    """The line of the longest prefix of `loc` that the text names."""
    table = key_lines(text)
    # pydantic names the alias of an aliased field; union members add their type name to the path
    clean = tuple(p for p in loc if not (isinstance(p, str) and ("[" in p or p in _UNION_TAGS)))
    for n in range(len(clean), 0, -1):
        if clean[:n] in table:
            return table[clean[:n]]
    return None


_UNION_TAGS = {"int", "float", "str", "bool", "list", "dict", "none", "function-after", "function-before"}


def _format_loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for p in loc:
        if isinstance(p, int):
            out += f"[{p}]"
        elif isinstance(p, str) and ("[" in p or p in _UNION_TAGS):
            continue
        else:
            out += ("." if out else "") + str(p)
    return out or "(top level)"


def parse_matrix(text: str, source: str = "<matrix>") -> MatrixSpec:
    """Validate TOML text; raise UserError naming `source:line: key: problem`."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{source}: not valid TOML: {exc}") from None
    try:
        return MatrixSpec.model_validate(data)
    except ValidationError as exc:
        problems = []
        seen = set()
        for err in exc.errors():
            loc = tuple(err["loc"])
            key = _format_loc(loc)
            if key in seen:  # a union reports each member; the first is enough
                continue
            seen.add(key)
            line = line_of(text, loc)
            where = f"{source}:{line}" if line else source
            msg = err["msg"].removeprefix("Value error, ")
            problems.append(f"{where}: {key}: {msg}")
        raise UserError("; ".join(problems[:5]) + (f" (+{len(problems) - 5} more)" if len(problems) > 5 else "")) from None


def load_matrix(path: str | Path) -> tuple[MatrixSpec, str]:
    """Read and validate a matrix file; returns the spec and its text (stored with the results)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{p}: no such matrix file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{p}: cannot read: {exc}") from None
    return parse_matrix(text, str(p)), text


# ----------------------------------------------------------------------------- expansion


def stable_id(prefix: str, payload: Any) -> str:
    """`prefix-` + 12 hex digits of the SHA-256 of canonical JSON: the same settings give the same id."""
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return f"{prefix}-{hashlib.sha256(blob.encode()).hexdigest()[:12]}"


@dataclass(frozen=True)
class ServerTuple:
    """One server boot: the resolved server-side settings."""

    server_id: str
    phase: int
    index: int  # order within the matrix
    settings: dict[str, Any]  # tp, label, algorithm, spec params, mem/mrr/context, flags, env
    client_axes: dict[str, Any] = field(default_factory=dict)  # the client axes for this tuple (after overrides)

    @property
    def tp(self) -> int:
        return int(self.settings["tp"])

    @property
    def label(self) -> str:
        return str(self.settings["label"])

    @property
    def algorithm(self) -> str:
        return str(self.settings["algorithm"])

    @property
    def is_ar(self) -> bool:
        return self.algorithm == "ar"


@dataclass(frozen=True)
class Cell:
    """One client run on one server tuple."""

    cell_id: str
    server_id: str
    phase: int
    tp: int
    algorithm: str
    label: str
    server: dict[str, Any]
    client: dict[str, Any]

    @property
    def baseline_key(self) -> tuple[Any, ...]:
        """Cells with the same key compare against the same autoregressive baseline."""
        c = self.client
        return (self.tp, c["concurrency"], c["prompt_tokens"], c["output_tokens"], c["request_rate"], c["dataset"])


def _expand_variants(v: SpecVariant) -> list[dict[str, Any]]:
    if v.is_ar:
        return [{"label": v.label or "ar", "algorithm": "ar", "params": {}, "flags": dict(v.flags), "env": dict(v.env)}]
    names = ("num_draft_tokens", "num_steps", "eagle_topk", "ddtree_budget")
    axes = [(n, _as_axis(getattr(v, n))) for n in names if getattr(v, n) is not None]
    out = []
    for combo in itertools.product(*(vals for _, vals in axes)) if axes else [()]:
        params = {n: val for (n, _), val in zip(axes, combo)}
        if v.draft_model is not None:
            params["draft_model"] = v.draft_model
        label = v.label or _default_label(v.algorithm or "", params)
        try:
            label = label.format(**params)
        except (KeyError, IndexError, ValueError) as exc:
            raise UserError(f"spec label {v.label!r}: cannot fill {exc}; known names: {sorted(params)}") from None
        out.append({"label": label, "algorithm": v.algorithm, "params": params, "flags": dict(v.flags), "env": dict(v.env)})
    return out


def _default_label(algorithm: str, params: dict[str, Any]) -> str:
    label = algorithm.lower()
    if "ddtree_budget" in params:
        label += "-b{ddtree_budget}"
    elif "num_draft_tokens" in params:
        label += "-d{num_draft_tokens}"
    return label


def _flag_axes(flags: dict[str, Any]) -> list[tuple[str, tuple[Any, ...]]]:
    """A list value is an axis, except a list of strings under a list (several argv words)."""
    return [(k, _as_axis(v)) for k, v in flags.items()]


def _matches(when: dict[str, Any], settings: dict[str, Any]) -> bool:
    for k, want in when.items():
        have = settings["label"] if k == "spec" else settings.get(k)
        wants = _as_axis(want)
        if k == "algorithm":
            if str(have).lower() not in {str(w).lower() for w in wants}:
                return False
        elif have not in wants:
            return False
    return True


def expand(spec: MatrixSpec) -> tuple[list[ServerTuple], list[Cell]]:
    """All server tuples (phase order) and their cells; ids are stable hashes of the settings."""
    s = spec.server
    variants = [x for v in s.spec for x in _expand_variants(v)]
    flag_axes = _flag_axes(s.flags)
    env_axes = [(k, _as_axis(v)) for k, v in s.env.items()]
    scalar_axes = [(k, _as_axis(getattr(s, k))) for k in SERVER_SCALARS]

    raw: list[dict[str, Any]] = []
    for scal in itertools.product(*(vals for _, vals in scalar_axes)):
        for var in variants:
            for fl in itertools.product(*(vals for _, vals in flag_axes)) if flag_axes else [()]:
                for en in itertools.product(*(vals for _, vals in env_axes)) if env_axes else [()]:
                    settings: dict[str, Any] = {k: v for (k, _), v in zip(scalar_axes, scal)}
                    settings.update(label=var["label"], algorithm=var["algorithm"], **var["params"])
                    flags = {k: v for (k, _), v in zip(flag_axes, fl)}
                    flags.update(var["flags"])
                    env = {k: v for (k, _), v in zip(env_axes, en)}
                    env.update(var["env"])
                    settings["flags"] = flags
                    settings["env"] = env
                    raw.append(settings)

    base_client = {k: getattr(spec.client, k) for k in type(spec.client).model_fields}
    tuples_pre = []
    for idx, settings in enumerate(raw):
        client = dict(base_client)
        for ov in spec.override:
            if _matches(ov.when, settings):
                for k, v in ov.server.items():
                    if k in ("flags", "env"):
                        settings[k] = {**settings[k], **v}
                    else:
                        settings[k] = v
                client.update(ov.client)
        notes = []
        if settings["algorithm"] == "ar" and SPEC_V2_ENV in settings["env"]:
            settings["env"] = {k: v for k, v in settings["env"].items() if k != SPEC_V2_ENV}
            notes.append(f"{SPEC_V2_ENV} dropped: never set for an autoregressive server")
        settings["notes"] = notes
        tuples_pre.append((idx, settings, client))

    # dedupe (overrides can make two tuples equal) and order into phases
    ident_base = {"engine": spec.engine, "command": spec.command, "model": spec.model}
    seen: dict[str, int] = {}
    uniq = []
    for idx, settings, client in tuples_pre:
        sid = stable_id("srv", {**ident_base, **{k: v for k, v in settings.items() if k != "notes"}})
        if sid in seen:
            continue
        seen[sid] = idx
        uniq.append((sid, idx, settings, client))

    def phase_key(item: tuple[str, int, dict[str, Any], dict[str, Any]]) -> tuple[Any, ...]:
        st = item[2]
        return tuple(_sortable(st["label"] if a == "spec" else st.get(a)) for a in spec.phases)

    uniq.sort(key=lambda it: (phase_key(it), it[1]))
    phase_of: dict[tuple[Any, ...], int] = {}
    tuples: list[ServerTuple] = []
    cells: list[Cell] = []
    for order, item in enumerate(uniq):
        sid, _, settings, client = item
        phase = phase_of.setdefault(phase_key(item), len(phase_of) + 1)
        st = ServerTuple(server_id=sid, phase=phase, index=order, settings=settings, client_axes=client)
        tuples.append(st)
        cells.extend(_cells_of(st, client, sid))
    return tuples, cells


def _sortable(v: Any) -> tuple[int, Any]:
    if v is None:
        return (0, 0)
    if isinstance(v, (int, float)):
        return (1, v)
    return (2, str(v))


def _rate(v: Any) -> float:
    if isinstance(v, str):
        return math.inf
    return float(v)


def _cells_of(st: ServerTuple, client: dict[str, Any], sid: str) -> list[Cell]:
    axes = [(k, _as_axis(client[k])) for k in CLIENT_AXES]
    fixed = {k: v for k, v in client.items() if k not in CLIENT_AXES}
    out = []
    server_view = {k: v for k, v in st.settings.items() if k != "notes"}
    for combo in itertools.product(*(vals for _, vals in axes)):
        c = {k: v for (k, _), v in zip(axes, combo)}
        c["request_rate"] = "inf" if math.isinf(_rate(c["request_rate"])) else float(c["request_rate"])
        c.update(fixed)
        cid = stable_id("cell", {"server": sid, "client": c})
        out.append(
            Cell(
                cell_id=cid,
                server_id=sid,
                phase=st.phase,
                tp=st.tp,
                algorithm=st.algorithm if st.is_ar else str(st.algorithm),
                label=st.label,
                server=server_view,
                client=c,
            )
        )
    return out
