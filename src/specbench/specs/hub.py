"""The Hugging Face Hub and its local cache, as the engines reach them (I/O only; the rules are in resolve.py).

The engines load a model named `org/name` with `huggingface_hub` (sglang/srt/utils/hf_transformers_utils.py::
get_config -> transformers' cached_file; vllm/transformers_utils/config.py::get_config -> hf_hub_download), so
this module does the same: the HF cache first (`cached_file`, try_to_load_from_cache's lookup), then the Hub (`hf_hub_download`,
which also fills the cache), honouring at *call* time (huggingface_hub reads them once at import):

- `HF_HUB_OFFLINE` (1/true/yes/on): the cache only, never the network;
- `HF_ENDPOINT`: another Hub (a mirror, or the tests' stand-in on 127.0.0.1);
- `HF_TOKEN`: the token sent (else huggingface_hub's saved token);
- `HF_HUB_CACHE` / `HF_HOME`: where the cache lives.

Safetensors headers are read without the weights: the first bytes of each shard by HTTP range request
(`HfApi.parse_safetensors_file_metadata`, the per-shard half of `get_safetensors_metadata`), or straight from the
files of a local folder or cache snapshot. Headers fetched from the Hub are kept as JSON under
`$SPECBENCH_CACHE_DIR` (default `~/.cache/specbench`) `/safetensors-headers/<org>--<name>/<commit>.json`, so a
second plan works offline.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from specbench.errors import ConfigError

DEFAULT_ENDPOINT = "https://huggingface.co"
INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"

Tensor = tuple[str, str, tuple[int, ...]]  # (name, dtype as safetensors writes it, shape)


class HubUnreachable(Exception):
    """The Hub endpoint did not answer (no network, DNS failure, refused)."""


class RepoNotOnHub(Exception):
    """The Hub answered that the repository (or revision) does not exist or is not accessible."""


@dataclass(frozen=True)
class HubSettings:
    endpoint: str
    token: str | None
    offline: bool
    cache_dir: Path
    header_cache: Path


def settings() -> HubSettings:
    env = os.environ
    offline = env.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
    home = Path(env.get("HF_HOME") or os.path.join(env.get("XDG_CACHE_HOME") or "~/.cache", "huggingface"))
    cache = Path(env.get("HF_HUB_CACHE") or home / "hub").expanduser()
    own = Path(env.get("SPECBENCH_CACHE_DIR") or "~/.cache/specbench").expanduser()
    return HubSettings(endpoint=(env.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/"),
                       token=env.get("HF_TOKEN") or None, offline=offline, cache_dir=cache,
                       header_cache=own / "safetensors-headers")


_REACHABLE: dict[str, bool] = {}


def reachable(endpoint: str, timeout_s: float = 3.0) -> bool:
    """One TCP connect to the endpoint (remembered per process): huggingface_hub retries a dead network for ~25 s
    per file, a plan should say at once that the Hub is out of reach."""
    if endpoint not in _REACHABLE:
        u = urlparse(endpoint)
        port = u.port or (443 if u.scheme == "https" else 80)
        try:
            with socket.create_connection((u.hostname or "", port), timeout=timeout_s):
                _REACHABLE[endpoint] = True
        except OSError:
            _REACHABLE[endpoint] = False
    return _REACHABLE[endpoint]


def repo_cache_dir(s: HubSettings, repo: str) -> Path:
    """A model's folder in the HF cache: `models--<org>--<name>` (huggingface_hub/file_download.py::
    repo_folder_name@2.4.0)."""
    return s.cache_dir / ("models--" + repo.replace("/", "--"))


def cached_file(s: HubSettings, repo: str, filename: str, revision: str | None) -> Path | None:
    """The file from the HF cache at `revision` (a branch, tag or commit the cache has a ref for), else None.

    The lookup of huggingface_hub/file_download.py::try_to_load_from_cache@2.4.0 on the cache layout it writes:
    `refs/<branch or tag>` holds a commit, `snapshots/<commit>/<file>` is the file, `.no_exist/<commit>/<file>`
    records a file the Hub does not have; read here without importing huggingface_hub (tens of milliseconds on
    every plan, tests/process/test_cli_lazy.py)."""
    folder = repo_cache_dir(s, repo)
    if not folder.is_dir():
        return None
    commit = revision or "main"
    ref = folder / "refs" / commit
    if ref.is_file():
        commit = ref.read_text().strip()
    if (folder / ".no_exist" / commit / filename).is_file():
        return None
    hit = folder / "snapshots" / commit / filename
    return hit if hit.is_file() else None


def snapshot_commit(path: Path) -> str:
    """The commit of a file inside `.../snapshots/<commit>/...` (the cache layout of huggingface_hub)."""
    parts = path.parts
    return parts[parts.index("snapshots") + 1] if "snapshots" in parts else path.parent.name


def download(s: HubSettings, repo: str, filename: str, revision: str | None) -> Path | None:
    """hf_hub_download into the HF cache; None when the repo has no such file; RepoNotOnHub / HubUnreachable.
    huggingface_hub is imported only once the endpoint answers."""
    if not reachable(s.endpoint):
        raise HubUnreachable(s.endpoint)
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    try:
        return Path(hf_hub_download(repo, filename, revision=revision, cache_dir=str(s.cache_dir),
                                    endpoint=s.endpoint, token=s.token))
    except (RepositoryNotFoundError, RevisionNotFoundError, GatedRepoError) as exc:
        raise RepoNotOnHub(str(exc).splitlines()[0]) from None
    except LocalEntryNotFoundError:  # the connection failed after all: a subclass of EntryNotFoundError
        raise HubUnreachable(s.endpoint) from None
    except EntryNotFoundError:
        return None
    except HfHubHTTPError as exc:
        raise RepoNotOnHub(str(exc).splitlines()[0]) from None
    except OSError:
        raise HubUnreachable(s.endpoint) from None


def read_header(path: Path) -> list[Tensor]:
    """The tensors of one local safetensors file from its header (the weights are not read: safetensors maps the
    file). A damaged or truncated file is a one-line ConfigError naming it."""
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), "np") as fh:
            return [(k, str(fh.get_slice(k).get_dtype()), tuple(int(d) for d in fh.get_slice(k).get_shape()))
                    for k in fh.keys()]
    except (SafetensorError, OSError) as exc:
        raise ConfigError(f"{path}: not a readable safetensors file ({str(exc).splitlines()[0]})") from None


def folder_headers(folder: Path) -> list[Tensor] | None:
    """Every tensor of the *.safetensors files in a folder (a model folder or a cache snapshot), else None."""
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        return None
    out: list[Tensor] = []
    for f in files:
        if f.exists():  # a cache snapshot's symlink may point at a blob that was never downloaded
            out += read_header(f)
    return out or None


def _header_cache_file(s: HubSettings, repo: str, commit: str) -> Path:
    return s.header_cache / repo.replace("/", "--") / f"{commit}.json"


def cached_headers(s: HubSettings, repo: str, commit: str) -> list[Tensor] | None:
    p = _header_cache_file(s, repo, commit)
    if not p.is_file():
        return None
    try:
        return [(n, d, tuple(sh)) for n, d, sh in json.loads(p.read_text())]
    except (OSError, ValueError, TypeError):
        return None


def hub_headers(s: HubSettings, repo: str, revision: str | None, commit: str) -> list[Tensor] | None:
    """The tensors of every shard, by HTTP range requests for the headers only; kept on disk by commit.
    None when the repo has no safetensors (a .bin or GGUF checkpoint)."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import SafetensorsParsingError

    api = HfApi(endpoint=s.endpoint, token=s.token)
    rev = commit or revision
    index = download(s, repo, INDEX_FILE, rev)
    if index is not None:
        shards = sorted(set(json.loads(index.read_text()).get("weight_map", {}).values()))
    elif _exists(s, repo, SINGLE_FILE, rev):
        shards = [SINGLE_FILE]
    else:
        return None
    out: list[Tensor] = []
    for shard in shards:
        try:
            meta = api.parse_safetensors_file_metadata(repo, shard, revision=rev)
        except SafetensorsParsingError as exc:
            raise ConfigError(f"{repo}/{shard}: not a readable safetensors header ({exc})") from None
        out += [(k, str(t.dtype), tuple(int(d) for d in t.shape)) for k, t in meta.tensors.items()]
    p = _header_cache_file(s, repo, commit)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(".tmp")
    tmp.write_text(json.dumps([[n, d, list(sh)] for n, d, sh in out]))
    tmp.replace(p)
    return out


def _exists(s: HubSettings, repo: str, filename: str, revision: str | None) -> bool:
    from huggingface_hub import HfApi

    return bool(HfApi(endpoint=s.endpoint, token=s.token).file_exists(repo, filename, revision=revision))
