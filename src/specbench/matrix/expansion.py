"""A `MatrixSpec` -> its server tuples (one boot each, in phase order) and their cells (one client run each).

Ids are stable hashes of the settings, so a re-run of the same matrix finds its finished cells in the store. The
optional client keys (workload shape and sampling, load/results.py OPTIONAL_CLIENT_KEYS) enter a cell's settings only
when the matrix sets them, and its identity only when they differ from what the client did before they existed
(load/results.py CLIENT_DEFAULTS): the cells of a matrix that does not use them keep their ids.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from specbench.engines.server_base import SPEC_V2_ENV
from specbench.errors import UserError
from specbench.load import speedup as speedups
from specbench.load.results import OPTIONAL_CLIENT_KEYS, is_default
from specbench.matrix import client_checks as cc
from specbench.matrix.client_checks import stop_axis
from specbench.matrix.schema import CLIENT_AXES, SERVER_SCALARS, MatrixSpec, SpecVariant
from specbench.matrix.schema_base import as_axis
from specbench.redact import redact_obj

if TYPE_CHECKING:
    from specbench.matrix.visits import Visit


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
    # what the boot it is handed to does for it (matrix/visits.py); None: all its planned repeats from the start
    visit: Visit | None = None

    @property
    def baseline_key(self) -> tuple[Any, ...]:
        """Cells with the same key compare against the same autoregressive baseline (load/speedup.py)."""
        return speedups.baseline_key(self.tp, self.client["concurrency"], self.client)


# the per-variant axes of a [[server.spec]] (each a list expands into one variant per value)
SPEC_AXES = ("num_draft_tokens", "num_steps", "eagle_topk", "ddtree_budget", "simulated_accept_len")


@dataclass(frozen=True)
class _Variant:
    """One [[server.spec]] entry with one value per spec axis: the server settings it adds."""

    label: str
    algorithm: str | None
    params: dict[str, object]  # the spec axes' values (SPEC_AXES) and draft_model
    flags: dict[str, object]
    env: dict[str, object]


def _expand_variants(v: SpecVariant) -> list[_Variant]:
    if v.is_ar:
        return [_Variant(v.label or "ar", "ar", {}, dict(v.flags), dict(v.env))]
    axes = [(n, as_axis(getattr(v, n))) for n in SPEC_AXES if getattr(v, n) is not None]
    out = []
    for combo in itertools.product(*(vals for _, vals in axes)) if axes else [()]:
        params: dict[str, object] = {n: val for (n, _), val in zip(axes, combo)}
        if v.draft_model is not None:
            params["draft_model"] = v.draft_model
        label = v.label or _default_label(v.algorithm or "", params)
        try:
            label = label.format(**params)
        except (KeyError, IndexError, ValueError) as exc:
            raise UserError(f"spec label {v.label!r}: cannot fill {exc}; known names: {sorted(params)}") from None
        out.append(_Variant(label, v.algorithm, params, dict(v.flags), dict(v.env)))
    return out


def _default_label(algorithm: str, params: dict[str, object]) -> str:
    label = algorithm.lower()
    if "ddtree_budget" in params:
        label += "-b{ddtree_budget}"
    elif "num_draft_tokens" in params:
        label += "-d{num_draft_tokens}"
    return label


def _flag_axes(flags: dict[str, Any]) -> list[tuple[str, tuple[Any, ...]]]:
    """A list value is an axis, except a list of strings under a list (several argv words)."""
    return [(k, as_axis(v)) for k, v in flags.items()]


def _matches(when: dict[str, Any], settings: dict[str, Any]) -> bool:
    for k, want in when.items():
        have = settings["label"] if k == "spec" else settings.get(k)
        wants = as_axis(want)
        if k == "algorithm":
            if str(have).lower() not in {str(w).lower() for w in wants}:
                return False
        elif have not in wants:
            return False
    return True


# Hard caps on a matrix's size, checked on the product of the axis lengths BEFORE anything is expanded
# (a 2^20-tuple or 2 M-cell product would otherwise hang or run out of memory building its lists).
MAX_SERVER_TUPLES = 1_000
MAX_CELLS = 10_000


def size_problem(spec: MatrixSpec) -> tuple[str, tuple[Any, ...]] | None:
    """(a one-line problem, the key path of the longest axis) when the matrix expands to nothing or past the caps.

    The bound is the product of the axis lengths (overrides counted at their longest client axis): an upper bound
    of what `expand` builds, computed without building it."""
    s = spec.server
    axes: list[tuple[tuple[Any, ...], int]] = [(("server", k), len(as_axis(getattr(s, k)))) for k in SERVER_SCALARS]
    axes += [(("server", "flags", k), len(as_axis(v))) for k, v in s.flags.items()]
    axes += [(("server", "env", k), len(as_axis(v))) for k, v in s.env.items()]
    n_variants = sum(math.prod(len(as_axis(getattr(v, n))) for n in SPEC_AXES if getattr(v, n) is not None)
                     for v in s.spec)
    axes.append((("server", "spec"), n_variants))
    n_tuples = math.prod(n for _, n in axes)
    client_axes = list(CLIENT_AXES) + list(OPTIONAL_CLIENT_KEYS)
    per_key = {k: len(_optional_axis(k, getattr(spec.client, k)))
               for k in client_axes if getattr(spec.client, k) is not None}
    for ov in spec.override:
        for k, v in ov.client.items():
            if k in client_axes and v is not None:
                per_key[k] = max(per_key.get(k, 1), len(_optional_axis(k, v)))
    caxes = [(("client", k), n) for k, n in per_key.items()]
    n_cells = n_tuples * math.prod(n for _, n in caxes)
    longest = max(axes + caxes, key=lambda a: a[1])[0]
    empty = next((k for k, n in axes + caxes if n == 0), None)
    if empty is not None:
        return f"{'.'.join(empty)}: an axis with no values expands to no cells", empty
    if n_tuples > MAX_SERVER_TUPLES:
        return (f"the server axes give {n_tuples:,} server tuples, over the cap of {MAX_SERVER_TUPLES:,} "
                f"(longest axis: {'.'.join(longest)})"), longest
    if n_cells > MAX_CELLS:
        return (f"the axes give {n_cells:,} cells, over the cap of {MAX_CELLS:,} "
                f"(longest axis: {'.'.join(longest)})"), longest
    return None


def expand(spec: MatrixSpec) -> tuple[list[ServerTuple], list[Cell]]:
    """All server tuples (phase order) and their cells; ids are stable hashes of the settings."""
    problem = size_problem(spec)
    if problem is not None:
        raise UserError(f"matrix {spec.name!r}: {problem[0]}")
    settled = [_apply_overrides(spec, idx, settings) for idx, settings in enumerate(_server_settings(spec))]
    uniq = _dedupe(spec, settled)

    def phase_key(item: tuple[str, int, dict[str, Any], dict[str, Any]]) -> tuple[Any, ...]:
        st = item[2]
        return tuple(_sortable(st["label"] if a == "spec" else st.get(a)) for a in spec.phases)

    uniq.sort(key=lambda it: (phase_key(it), it[1]))
    phase_of: dict[tuple[Any, ...], int] = {}
    tuples: list[ServerTuple] = []
    cells: list[Cell] = []
    for item in uniq:
        sid, _, settings, client = item
        phase = phase_of.setdefault(phase_key(item), len(phase_of) + 1)
        st = ServerTuple(server_id=sid, phase=phase, index=len(tuples), settings=settings, client_axes=client)
        tuples.append(st)
        cells.extend(_cells_of(st, client, sid))
        if spec.client.aa_check and st.is_ar:  # the A/A twin, right after its AR server, in its phase
            twin = aa_twin(spec, st, len(tuples))
            tuples.append(twin)
            cells.extend(_cells_of(twin, client, twin.server_id))
    _check_merged_clients(spec, cells)
    return tuples, cells


AA_SUFFIX = "-aa"


def aa_twin(spec: MatrixSpec, st: ServerTuple, index: int) -> ServerTuple:
    """The A/A twin of an autoregressive server tuple (`[client] aa_check = true`): the same settings, so the same
    launch, under the label `<label>-aa` with `aa_of` = the AR server's id; its cells carry the algorithm
    load/speedup.py::AA_ALGORITHM, so they are never the baseline of a speedup."""
    settings = {**st.settings, "label": st.label + AA_SUFFIX, "aa_of": st.server_id}
    ident = {"engine": spec.engine, "command": spec.command, "model": spec.model}
    sid = stable_id("srv", redact_obj({**ident, **{k: v for k, v in settings.items() if k != "notes"}}))
    return ServerTuple(server_id=sid, phase=st.phase, index=index, settings=settings, client_axes=st.client_axes)


def _check_merged_clients(spec: MatrixSpec, cells: list[Cell]) -> None:
    """The client checks that need a partner key (category and length forms against the dataset, multi_turn
    against prompt_len) on each cell's merged client: an override that sets only `category` was checked without its
    dataset (client_checks.SKIP) and would otherwise fail only after its server booted."""

    seen: set[tuple[Any, ...]] = set()
    for cell in cells:
        c = cell.client
        key = tuple(repr(c.get(k)) for k in ("dataset", "category", "prompt_len", "output_len", "multi_turn"))
        if key in seen:
            continue
        seen.add(key)
        try:
            if c.get("category") is not None:
                cc.category(c["category"], c.get("dataset"), spec.matrix_dir)
            for k in ("prompt_len", "output_len"):
                if c.get(k) is not None:
                    cc.length(k, c[k], c.get("dataset"))
            if c.get("multi_turn"):
                cc.multi_turn(c.get("prompt_len"), c.get("dataset"))
        except ValueError as exc:
            raise UserError(f"matrix {spec.name!r}: cell {cell.label!r} ({cell.cell_id}): client: {exc}") from None


def _server_settings(spec: MatrixSpec) -> list[dict[str, Any]]:
    """The cartesian product of the server axes: scalars x spec variants x flag axes x env axes."""
    s = spec.server
    variants = [x for v in s.spec for x in _expand_variants(v)]
    flag_axes = _flag_axes(s.flags)
    env_axes = [(k, as_axis(v)) for k, v in s.env.items()]
    scalar_axes = [(k, as_axis(getattr(s, k))) for k in SERVER_SCALARS]
    raw: list[dict[str, Any]] = []
    for scal in itertools.product(*(vals for _, vals in scalar_axes)):
        for var in variants:
            for fl in itertools.product(*(vals for _, vals in flag_axes)) if flag_axes else [()]:
                for en in itertools.product(*(vals for _, vals in env_axes)) if env_axes else [()]:
                    settings: dict[str, Any] = {k: v for (k, _), v in zip(scalar_axes, scal)}
                    settings.update(label=var.label, algorithm=var.algorithm, **var.params)
                    flags = {k: v for (k, _), v in zip(flag_axes, fl)}
                    flags.update(var.flags)
                    env = {k: v for (k, _), v in zip(env_axes, en)}
                    env.update(var.env)
                    settings["flags"] = flags
                    settings["env"] = env
                    raw.append(settings)
    return raw


def _apply_overrides(spec: MatrixSpec, idx: int,
                     settings: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, Any]]:
    """(idx, settings, client axes) after the matching overrides (later ones win); drops SPEC_V2 from AR servers."""
    client = {k: getattr(spec.client, k) for k in type(spec.client).model_fields}
    for ov in spec.override:
        if _matches(ov.when, settings):
            for k, v in ov.server.items():
                if k in ("flags", "env"):
                    settings[k] = {**settings[k], **v}
                else:
                    settings[k] = v
            client.update(ov.client)
    # neither the matrix nor a matching override chose how many requests: several waves at high concurrency
    client[AUTO_REQUESTS] = ("num_requests" not in spec.client.model_fields_set
                             and not any("num_requests" in ov.client for ov in spec.override
                                         if _matches(ov.when, settings))
                             and client.get("requests_per_concurrency") is None)
    notes = []
    if settings["algorithm"] == "ar" and SPEC_V2_ENV in settings["env"]:
        settings["env"] = {k: v for k, v in settings["env"].items() if k != SPEC_V2_ENV}
        notes.append(f"{SPEC_V2_ENV} dropped: never set for an autoregressive server")
    settings["notes"] = notes
    return idx, settings, client


def _dedupe(spec: MatrixSpec, tuples_pre: list[tuple[int, dict[str, Any], dict[str, Any]]]
            ) -> list[tuple[str, int, dict[str, Any], dict[str, Any]]]:
    """(server id, idx, settings, client) of the first of each set of equal tuples (overrides can make two equal)."""
    ident_base = {"engine": spec.engine, "command": spec.command, "model": spec.model}
    seen: dict[str, int] = {}
    uniq = []
    for idx, settings, client in tuples_pre:
        # the identity hashes the redacted form (specbench/redact.py): a secret never shapes an id, a new key keeps it
        sid = stable_id("srv", redact_obj({**ident_base, **{k: v for k, v in settings.items() if k != "notes"}}))
        if sid in seen:
            continue
        seen[sid] = idx
        uniq.append((sid, idx, settings, client))
    return uniq


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


# A matrix that sets neither `num_requests` nor `requests_per_concurrency` measures at least DEFAULT_WAVES requests per
# unit of concurrency (the default 8 requests are less than one wave at c=64: the ramp-up and the drain would be the
# measurement); the cells this raises carry `requests_per_concurrency` (so their ids are new), the others stay.
DEFAULT_WAVES = 4
AUTO_REQUESTS = "_auto_requests"  # the marker _apply_overrides leaves for _cells_of (never in a cell)

# client keys that never enter a cell's identity: how the result is judged, not what is measured
NOT_IDENTITY = ("noisy_cv", "allow_early_stop")
# fixed client keys a cell carries only when set, so that the ids of matrices without them stay
DROPPED_WHEN_UNSET = ("requests_per_concurrency", "repeats", "noisy_cv", "max_failed_fraction", "allow_early_stop",
                      "trim_warmup", "trim_cooldown", "repeats_max", "repeat_across_boots")
# [client] keys that shape the matrix, not a cell (expand: the A/A twins)
NEVER_IN_CELL = (AUTO_REQUESTS, "aa_check")


def repeat_keys(client: dict[str, Any]) -> dict[str, Any]:
    """A cell's repeat settings as it carries them (matrix/visits.py): `repeats` = the planned count (a range's min),
    `repeats_max` with a range, `repeat_across_boots` only when true."""
    from specbench.matrix.visits import parse_repeats

    lo, hi = parse_repeats(client.get("repeats"))
    return {"repeats": lo, "repeats_max": hi, "repeat_across_boots": True if client.get("repeat_across_boots") else None}


def cell_identity(client: dict[str, Any]) -> dict[str, Any]:
    """The client settings a cell id hashes: all but the optional keys left at their defaults (and NOT_IDENTITY).

    `repeats` is part of it when set: a cell measured once is not the same result as one measured three times."""
    return {k: v for k, v in client.items()
            if not (k in OPTIONAL_CLIENT_KEYS and is_default(k, v)) and k not in NOT_IDENTITY}


def _optional_axis(key: str, value: Any) -> tuple[Any, ...]:
    if key == "stop":
        return tuple(list(x) for x in stop_axis(value))
    return as_axis(value)


def _cells_of(st: ServerTuple, client: dict[str, Any], sid: str) -> list[Cell]:
    axes = [(k, as_axis(client[k])) for k in CLIENT_AXES]
    axes += [(k, _optional_axis(k, client[k])) for k in OPTIONAL_CLIENT_KEYS if client.get(k) is not None]
    fixed = {k: v for k, v in {**client, **repeat_keys(client)}.items()
             if k not in CLIENT_AXES and k not in OPTIONAL_CLIENT_KEYS
             and not (k in DROPPED_WHEN_UNSET and v is None) and k not in NEVER_IN_CELL}  # ids without them stay
    out = []
    server_view = {k: v for k, v in st.settings.items() if k != "notes"}
    for combo in itertools.product(*(vals for _, vals in axes)):
        c = {k: v for (k, _), v in zip(axes, combo)}
        c["request_rate"] = "inf" if math.isinf(_rate(c["request_rate"])) else float(c["request_rate"])
        c.update(fixed)
        if client.get(AUTO_REQUESTS) and DEFAULT_WAVES * int(c["concurrency"]) > int(c["num_requests"]):
            c["requests_per_concurrency"] = DEFAULT_WAVES  # only then: the ids of the other cells stay
        cid = stable_id("cell", {"server": sid, "client": cell_identity(c)})
        out.append(
            Cell(
                cell_id=cid,
                server_id=sid,
                phase=st.phase,
                tp=st.tp,
                algorithm=(speedups.AA_ALGORITHM if st.settings.get("aa_of") else st.algorithm) if st.is_ar
                else str(st.algorithm),
                label=st.label,
                server=server_view,
                client=c,
            )
        )
    return out
