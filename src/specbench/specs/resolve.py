"""Where a model config comes from: a config.json path, a model folder, the local HF cache, or a bundled name.

Bundled configs live in `specbench/data/configs/` (copies of real upstream files; see SOURCES.md there), named
`<org>__<name>.json`; `Qwen/Qwen3.5-27B`, `Qwen__Qwen3.5-27B` and `qwen3.5-27b` all find the same file.
"""

from __future__ import annotations

import functools
import os
from importlib import resources
from pathlib import Path

from specbench.errors import ConfigError, UserError
from specbench.specs.model import ModelSpec, load_config_file, model_spec_from_dict


def bundled_dir() -> Path:
    return Path(str(resources.files("specbench") / "data" / "configs"))


@functools.lru_cache(maxsize=1)
def _bundled_names() -> tuple[str, ...]:
    # the package's data folder does not change while we run: list it once, not on every plan of a search
    return tuple(sorted(p.stem for p in bundled_dir().glob("*.json") if not p.stem.endswith("__hf_quant_config")))


def bundled_names() -> list[str]:
    return list(_bundled_names())


def _bundled_match(name: str) -> Path | None:
    key = name.strip().replace("/", "__").lower()
    if key.endswith(".json"):
        key = key[:-5]
    by_lower = {n.lower(): n for n in bundled_names()}
    if key in by_lower:
        return bundled_dir() / f"{by_lower[key]}.json"
    tails = [n for n in bundled_names() if n.lower().split("__", 1)[-1] == key.split("__", 1)[-1]]
    if len(tails) == 1:
        return bundled_dir() / f"{tails[0]}.json"
    # "Qwen/Qwen3.6-27B" -> the bundled "Qwen__Qwen3.6-27B-bf16-derived" when that is the only longer name
    pref = [n for n in bundled_names() if n.lower().startswith(key + "-")]
    if len(pref) == 1:
        return bundled_dir() / f"{pref[0]}.json"
    return None


def hf_cache_config(repo_id: str) -> Path | None:
    if "/" not in repo_id:
        return None
    home = os.environ.get("HF_HUB_CACHE") or os.path.join(
        os.environ.get("HF_HOME", os.path.expanduser("~/.cache/huggingface")), "hub")
    snap = Path(home) / ("models--" + repo_id.replace("/", "--")) / "snapshots"
    if not snap.is_dir():
        return None
    for d in sorted(snap.iterdir(), key=lambda p: p.stat().st_mtime, reverse=True):
        if (d / "config.json").is_file():
            return d / "config.json"
    return None


def resolve_config_path(source: str) -> Path:
    """Find the config.json meant by `source`; ConfigError naming what was tried."""
    p = Path(source).expanduser()
    if p.is_file():
        return p
    if p.is_dir():
        if (p / "config.json").is_file():
            return p / "config.json"
        raise ConfigError(f"{source}: folder has no config.json")
    hit = hf_cache_config(source)
    if hit is not None:
        return hit
    hit = _bundled_match(source)
    if hit is not None:
        return hit
    raise ConfigError(
        f"cannot find a config for {source!r}: not a file, not a model folder, not in the HF cache, "
        f"not a bundled name (see `specbench plan --list-models`); pass --model-config PATH")


def load_model_spec(source: str, *, name: str | None = None) -> ModelSpec:
    path = resolve_config_path(source)
    data, hq = load_config_file(str(path))
    return model_spec_from_dict(data, name=name or source, hf_quant_config=hq)



def load_spec_for(explicit: str | None, from_command: str | None, what: str, flag: str) -> ModelSpec | None:
    """The ModelSpec of `explicit` (a --model-config / --draft-config value) or else of the model the launch
    command names; a command's model that cannot be found says which option to pass instead."""
    src = explicit or from_command
    if not src:
        return None
    try:
        return load_model_spec(src)
    except UserError as exc:
        if explicit is None:
            raise UserError(f"{exc} (for {what}; pass {flag} PATH)") from None
        raise
