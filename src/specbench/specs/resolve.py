"""Where a model config comes from, in the engines' order: a config.json path or a model folder, the HF cache,
the Hub (`specs/hub.py`), and last the bundled configs as the offline fallback.

Each resolution says where it found the model (`ModelOrigin.source`, one of `SOURCES`) and, when it could read
them, the tensors of the checkpoint's safetensors headers (`specs/header_weights.py` turns them into bytes per
GPU). Bundled configs live in `specbench/data/configs/` (copies of real upstream files; see SOURCES.md there),
named `<org>__<name>.json`; `Qwen/Qwen3.5-27B`, `Qwen__Qwen3.5-27B` and `qwen3.5-27b` all find the same file.
A bundled `specforge__*` file is a SpecForge *training template*, not a published drafter, and says so.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from specbench.errors import ConfigError, UserError
from specbench.scoped import scoped
from specbench.specs import hub
from specbench.specs.model import load_config_file, model_spec_from_dict
from specbench.specs.model_types import ModelSpec
from specbench.specs.standin import StandIn, find_stand_in, read_name

SOURCES = ("config file", "local folder", "hf cache", "hub", "bundled (offline fallback)")
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
# the revision each model of the plan is loaded at, by role ("model", "draft"): the launch command's --revision
# (engines/command.py::revisions_of) or `specbench plan --revision`
_REVISIONS: contextvars.ContextVar[Mapping[str, str] | None] = contextvars.ContextVar("revisions", default=None)
_ROLES = {"the model": "model", "the draft model": "draft"}
# the launch command's --quantization: what a checkpoint carries when a stand-in's name does not say (standin.py)
_QUANT_FLAG: contextvars.ContextVar[str | None] = contextvars.ContextVar("quant_flag", default=None)


@dataclass(frozen=True)
class ModelOrigin:
    requested: str
    source: str                    # one of SOURCES
    location: str                  # the config.json read (a path), with the commit for the cache and the Hub
    commit: str | None = None
    tensors: tuple[hub.Tensor, ...] | None = None   # the safetensors headers, when reachable
    tensors_from: str | None = None
    notes: tuple[str, ...] = ()
    quant_method: str | None = None  # the checkpoint's own quantization (set by load_model_spec)
    stand_in: str | None = None      # a bundled sibling planned in the model's place: which, assumed what (standin.py)
    overlay: StandIn | None = None   # what the stand-in changes in the sibling's config (quantization, renamed fields)


def bundled_dir() -> Path:
    # the package's own folder, as engines/*/registry.py reads theirs (importlib.resources would import zipfile
    # and its readers on every plan, for a path that was a plain folder here anyway)
    return _PACKAGE / "data" / "configs"


_PACKAGE = Path(__file__).parent.parent


@functools.lru_cache(maxsize=1)
def _bundled_names() -> tuple[str, ...]:
    # the package's data folder does not change while we run: list it once, not on every plan of a search
    return tuple(sorted(p.stem for p in bundled_dir().glob("*.json") if not p.stem.endswith("__hf_quant_config")))


def bundled_names() -> list[str]:
    return list(_bundled_names())


# words that mark a quantized variant or a drafter: a plain name means the unquantized model
_VARIANT_WORDS = ("nvfp4", "mxfp4", "fp8", "int8", "int4", "awq", "gptq", "dflash", "eagle", "draft")


def _bundled_match(name: str) -> Path | None:
    """The bundled config `name` means: its exact name (`org/name` or `org__name`), else the one config whose model
    name is the basename of `name` (`/models/gpt-oss-20b`: a server's local folder named after the model), else the
    one longer name (`Qwen/Qwen3.6-27B` -> `Qwen__Qwen3.6-27B-bf16-derived`); a plain name never takes a longer
    name that is a quantized variant or a drafter (`Qwen/Qwen3.8-27B` is not `z-lab/Qwen3.8-27B-DFlash2`). The doctor maps a log's model path through the same rules."""
    raw = name.strip().replace("\\", "/").rstrip("/")
    key = raw.replace("/", "__").lower().removesuffix(".json")
    tail = raw.rsplit("/", 1)[-1].lower().removesuffix(".json").split("__", 1)[-1]
    names = bundled_names()
    by_lower = {n.lower(): n for n in names}
    if key in by_lower:
        return bundled_dir() / f"{by_lower[key]}.json"
    pref = [n for n in names if n.lower().startswith(key + "-")]
    if len(pref) == 1:
        return bundled_dir() / f"{pref[0]}.json"
    model = {n: n.lower().split("__", 1)[-1] for n in names}
    exact = [n for n, t in model.items() if t == tail]
    if len(exact) == 1:
        return bundled_dir() / f"{exact[0]}.json"
    longer = [n for n, t in model.items() if t.startswith(tail + "-")]
    if not any(w in tail for w in _VARIANT_WORDS):  # a plain name never means a quantized variant or a drafter,
        longer = [n for n in longer if not any(w in model[n] for w in _VARIANT_WORDS)]  # even the only longer one
    if not exact and len(longer) == 1:
        return bundled_dir() / f"{longer[0]}.json"
    return None


def nearest_bundled(name: str, n: int = 3) -> list[str]:
    """The bundled configs whose model name is closest to `name` (difflib), drafters and quantized variants only when
    `name` is one: what to look at when a model cannot be resolved offline."""
    import difflib

    tail = name.strip().rstrip("/").rsplit("/", 1)[-1].lower()
    variant = any(w in tail for w in _VARIANT_WORDS)
    pool = {n_.split("__", 1)[-1].lower(): n_ for n_ in bundled_names()
            if variant or not any(w in n_.lower().split("__", 1)[-1] for w in _VARIANT_WORDS)}
    hits = difflib.get_close_matches(tail, list(pool), n=n, cutoff=0.6)
    return [pool[h].replace("__", "/", 1) for h in hits]


def is_repo_id(source: str) -> bool:
    return bool(_REPO_ID.match(source)) and not Path(source).expanduser().exists()


def _snapshot_scan(s: hub.HubSettings, repo_id: str) -> Path | None:
    """The newest cache snapshot with a config.json, for a cache that has no ref (copied in by hand)."""
    snap = hub.repo_cache_dir(s, repo_id) / "snapshots"
    if not snap.is_dir():
        return None
    for d in sorted(snap.iterdir(), key=lambda p: p.stat().st_mtime, reverse=True):
        if (d / "config.json").is_file():
            return d / "config.json"
    return None


# huggingface_hub's own rule (utils/_validators.py::validate_repo_id@2.4.0), kept here so that `plan` does not import
# huggingface_hub (tens of milliseconds) to read a name; tests/unit/specs/test_repo_id_rule.py checks it against the
# library.
_HUB_REPO_ID = re.compile(r"(\b[\w\-.]{1,96}\b/)?\b[\w\-.]{1,96}\b", re.ASCII)


def _valid_repo_id(repo_id: str) -> bool:
    """A published typo such as `Qwen/Qwen3-30-A3B.` (a trailing period) is no repo id, so it is never passed on
    to raise in huggingface_hub: one namespace at most, the regex, no `--` / `..`, no `.git` ending."""
    return (repo_id.count("/") <= 1 and _HUB_REPO_ID.fullmatch(repo_id) is not None
            and "--" not in repo_id and ".." not in repo_id and not repo_id.endswith(".git"))


def hf_cache_config(repo_id: str, revision: str | None = None) -> Path | None:
    if not _REPO_ID.match(repo_id) or not _valid_repo_id(repo_id):  # a path ("/no/such/model") is not a repo id
        return None
    s = hub.settings()
    hit = hub.cached_file(s, repo_id, "config.json", revision)
    return hit if hit is not None or revision is not None else _snapshot_scan(s, repo_id)


def _from_path(source: str, p: Path) -> ModelOrigin:
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise ConfigError(f"{source}: folder has no config.json")
        cfg, kind = p / "config.json", "local folder"
    else:
        cfg, kind = p, "config file"
    tensors = hub.folder_headers(cfg.parent)
    return ModelOrigin(source, kind, str(cfg), tensors=_tup(tensors),
                       tensors_from=f"{cfg.parent}/*.safetensors" if tensors else None)


def _tup(tensors: list[hub.Tensor] | None) -> tuple[hub.Tensor, ...] | None:
    return tuple(tensors) if tensors else None


def _from_cache(s: hub.HubSettings, repo: str, revision: str | None, cfg: Path) -> ModelOrigin:
    commit = hub.snapshot_commit(cfg)
    tensors, where = hub.folder_headers(cfg.parent), "the cached safetensors files"
    if tensors is None:
        tensors, where = hub.cached_headers(s, repo, commit), "the header cache (fetched from the Hub before)"
    if tensors is None and not s.offline and hub.reachable(s.endpoint):
        with contextlib.suppress(hub.HubUnreachable, hub.RepoNotOnHub):
            tensors, where = hub.hub_headers(s, repo, revision, commit), f"{s.endpoint} (range requests)"
    return ModelOrigin(repo, "hf cache", str(cfg), commit, _tup(tensors), where if tensors else None)


def _from_hub(s: hub.HubSettings, repo: str, revision: str | None) -> ModelOrigin | None:
    cfg = hub.download(s, repo, "config.json", revision)
    if cfg is None:
        return None
    commit = hub.snapshot_commit(cfg)
    hub.download(s, repo, "hf_quant_config.json", commit)  # ModelOpt checkpoints: read beside config.json
    tensors = hub.hub_headers(s, repo, revision, commit)
    return ModelOrigin(repo, "hub", str(cfg), commit, _tup(tensors),
                       f"{s.endpoint} (range requests)" if tensors else None)


def _bundled(source: str, why: str) -> ModelOrigin | None:
    hit = _bundled_match(source)
    if hit is None:
        return None
    label = hit.stem.replace("__", "/", 1)
    if hit.stem.lower().startswith("specforge__"):
        note = f"using the bundled config of {label}, a SpecForge template, not the published drafter"
    else:
        note = f"using the bundled config of {label} (offline fallback)"
    return ModelOrigin(source, "bundled (offline fallback)", str(hit), notes=(note + (f": {why}" if why else ""),))


@functools.lru_cache(maxsize=64)
def _resolve(source: str, revision: str | None, s: hub.HubSettings, flag: str | None = None) -> ModelOrigin:
    p = Path(source).expanduser()
    if p.exists():
        return _from_path(source, p)
    tried = ["not a file or model folder"]
    why = ""
    if _REPO_ID.match(source) and not _valid_repo_id(source):
        tried.append("not a valid Hub repo id (huggingface_hub refuses it)")
    elif _REPO_ID.match(source):
        cfg = hf_cache_config(source, revision)
        if cfg is not None:
            return _from_cache(s, source, revision, cfg)
        tried.append(f"not in the HF cache ({s.cache_dir})")
        if s.offline:
            why = "HF_HUB_OFFLINE is set"
        else:
            try:
                got = _from_hub(s, source, revision)
                if got is not None:
                    return got
                why = f"{s.endpoint} has no config.json for it"
            except hub.HubUnreachable:
                why = f"the Hub ({s.endpoint}) is out of reach"
            except hub.RepoNotOnHub as exc:
                why = f"the Hub ({s.endpoint}) answered: {exc}"
        tried.append(f"not fetched from the Hub ({why})")
    got = _bundled(source, why)
    if got is not None:
        return got
    si = find_stand_in(source, why, _bundled_match, {n: bundled_dir() / f"{n}.json" for n in bundled_names()}, flag)
    if si is not None:
        note = f"using the bundled config of {si.label} as a stand-in (offline fallback): see model_stand_in"
        return ModelOrigin(source, "bundled (offline fallback)", str(si.path), notes=(note,), stand_in=si.text,
                           overlay=si)
    near = nearest_bundled(source)
    hint = f"; nearest bundled: {', '.join(near)}" if near else ""
    raise ConfigError(f"cannot find a config for {source!r}: {', '.join(tried)}, not a bundled name "
                      f"(see `specbench plan --list-models`){hint}; give its config.json or model folder, put it in "
                      "the HF cache, or set HF_ENDPOINT to a Hub mirror you can reach")


def resolve_model(source: str, revision: str | None = None) -> ModelOrigin:
    """Where `source` (a path, an `org/name` id or a bundled name) is found; ConfigError naming what was tried."""
    return _resolve(source, revision, hub.settings(), _QUANT_FLAG.get())


def origin_for(source: str | None, role: str) -> ModelOrigin | None:
    """The origin of a model the plan loaded in `role` ("model" / "draft"), None when it was not resolved."""
    if not source:
        return None
    try:  # loaded, so the notes of reading it (a trimmed bundled file, a name its config contradicts) come along
        return load_model_spec(source, revision=(_REVISIONS.get() or {}).get(role)).origin
    except UserError:
        return None


def resolve_config_path(source: str) -> Path:
    """The config.json meant by `source`; ConfigError naming what was tried."""
    return Path(resolve_model(source).location)


def revisions(mapping: Mapping[str, str]) -> contextlib.AbstractContextManager[None]:
    """Resolve the model of each role in `mapping` ("model", "draft") at its revision while the block runs."""
    return scoped(_REVISIONS, dict(mapping))


def quantization_flag(value: str | None) -> contextlib.AbstractContextManager[None]:
    """The launch command's --quantization, for the stand-ins resolved while the block runs."""
    return scoped(_QUANT_FLAG, value)


def _with_overlay(data: dict, hq: dict | None, si: StandIn) -> tuple[dict, dict | None]:
    """The sibling's config as the stand-in checkpoint would have it: its quantization, the renamed fields."""
    data = {**data, **si.fields}
    if si.drop_quant:
        return {k: v for k, v in data.items() if k != "quantization_config"}, None
    if si.quantization_config is not None:
        data["quantization_config"] = dict(si.quantization_config)
    if si.hf_quant_config is not None or si.quantization_config is not None:
        hq = dict(si.hf_quant_config) if si.hf_quant_config is not None else None
    return data, hq


def _as_published(origin: ModelOrigin, hq: dict | None) -> tuple[dict | None, tuple[str, ...]]:
    """A bundled hf_quant_config.json is a trimmed copy (data/configs/SOURCES.md: aiconfigurator keeps the algorithms,
    not the lists); the published ModelOpt checkpoints carry `exclude_modules` (ModelOpt's export always writes it,
    with lm_head at least), so the bundled copy is planned with it: [lm_head]. A real folder without the key keeps
    the engine's start check (engines/sglang/start_checks.py::check_quant_config)."""
    q = hq.get("quantization") if isinstance(hq, dict) else None
    if hq is None or origin.source != SOURCES[-1] or not isinstance(q, dict) or "exclude_modules" in q:
        return hq, ()
    note = ("the bundled hf_quant_config.json is a trimmed copy without `exclude_modules`: planned as the published "
            "checkpoint, which lists it (assumed: lm_head only)")
    return {**hq, "quantization": {**q, "exclude_modules": ["lm_head"]}}, (note,)


def load_model_spec(source: str, *, name: str | None = None, revision: str | None = None) -> ModelSpec:
    origin = resolve_model(source, revision)
    data, hq = load_config_file(origin.location)
    if origin.overlay is not None:
        data, hq = _with_overlay(data, hq, origin.overlay)
    hq, notes = _as_published(origin, hq)
    spec = model_spec_from_dict(data, name=name or source, hf_quant_config=hq)
    if origin.overlay is not None and origin.overlay.assumed:
        spec = dataclasses.replace(spec, assumed=origin.overlay.assumed)
    said = read_name(source.strip().rstrip("/").rsplit("/", 1)[-1]).quant
    if said and spec.quant.method is None and not _QUANT_FLAG.get():
        notes += (f"the name says {said.upper()} but its config.json has no quantization_config: the weights are "
                  "planned unquantized (pass --quantization, or the checkpoint's own config.json)",)
    origin = dataclasses.replace(origin, quant_method=spec.quant.method, notes=origin.notes + notes)
    return dataclasses.replace(spec, origin=origin)


def load_spec_for(explicit: str | None, from_command: str | None, what: str, flag: str) -> ModelSpec | None:
    """The ModelSpec of `explicit` (a --model-config / --draft-config value) or else of the model the launch
    command names; a command's model that cannot be found says which option to pass instead."""
    src = explicit or from_command
    if not src:
        return None
    try:
        return load_model_spec(src, revision=None if explicit else (_REVISIONS.get() or {}).get(_ROLES.get(what, what)))
    except UserError as exc:
        if explicit is None:
            raise UserError(f"{exc} (for {what}; pass {flag} PATH)") from None
        raise
