"""specs/hub.py::cached_file reads the HF cache without importing huggingface_hub: on the same cache folder it
answers what huggingface_hub's own try_to_load_from_cache answers, for every kind of revision and file."""

from pathlib import Path

import pytest
from huggingface_hub import try_to_load_from_cache

from specbench.specs import hub

SHA_MAIN, SHA_OLD = "a" * 40, "b" * 40


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    """One repo as huggingface_hub lays it out: refs/main and a tag, two snapshots, a recorded absence."""
    repo = tmp_path / "models--org--Model-8B"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(SHA_MAIN)
    (repo / "refs" / "v1").write_text(SHA_OLD)
    for sha in (SHA_MAIN, SHA_OLD):
        (repo / "snapshots" / sha).mkdir(parents=True)
        (repo / "snapshots" / sha / "config.json").write_text("{}")
    (repo / "snapshots" / SHA_MAIN / "tokenizer.json").write_text("{}")
    (repo / ".no_exist" / SHA_MAIN).mkdir(parents=True)
    (repo / ".no_exist" / SHA_MAIN / "hf_quant_config.json").write_text("")
    (tmp_path / "models--org--NoSnapshots" / "refs").mkdir(parents=True)
    (tmp_path / "models--org--NoSnapshots" / "refs" / "main").write_text(SHA_MAIN)
    return tmp_path


@pytest.mark.parametrize("repo", ["org/Model-8B", "org/NoSnapshots", "org/Absent"])
@pytest.mark.parametrize("filename", ["config.json", "tokenizer.json", "hf_quant_config.json", "missing.json"])
@pytest.mark.parametrize("revision", [None, "main", "v1", SHA_MAIN, SHA_OLD, "c" * 40, "no-such-branch"])
def test_same_answer_as_huggingface_hub(cache: Path, repo: str, filename: str, revision: str | None) -> None:
    s = hub.HubSettings(endpoint=hub.DEFAULT_ENDPOINT, token=None, offline=True, cache_dir=cache,
                        header_cache=cache / "headers")
    theirs = try_to_load_from_cache(repo, filename, cache_dir=str(cache), revision=revision)
    ours = hub.cached_file(s, repo, filename, revision)
    assert ours == (Path(theirs) if isinstance(theirs, str) else None)


def test_the_layout_read_is_the_one_written(cache: Path) -> None:
    s = hub.HubSettings(hub.DEFAULT_ENDPOINT, None, True, cache, cache / "headers")
    assert hub.cached_file(s, "org/Model-8B", "config.json", None) == (
        cache / "models--org--Model-8B" / "snapshots" / SHA_MAIN / "config.json")
    assert hub.cached_file(s, "org/Model-8B", "config.json", "v1").parent.name == SHA_OLD
