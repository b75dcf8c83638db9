"""The repo-id rule `plan` applies without importing huggingface_hub (specs/resolve.py::_valid_repo_id) is the
library's own (huggingface_hub.utils.validate_repo_id), id for id."""

from __future__ import annotations

import pytest
from huggingface_hub.utils import HFValidationError, validate_repo_id

from specbench.specs.resolve import _valid_repo_id

IDS = ["Qwen/Qwen3-8B", "Qwen/Qwen3-30-A3B.", "gpt2", "a/b/c", "org/name.git", "org--x/y", "org/x..y", ".hidden/x",
       "org/-x", "org/x-", "z-lab/Qwen3.6-27B-DFlash", "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8", "a" * 96,
       "a" * 97, "org/" + "b" * 96, "café/x", "org/x_y.z", "", "/", "org/", "meta-llama/Llama-3.1-8B-Instruct",
       "RedHatAI/Qwen3-8B-FP8-dynamic", "x y/z", "org/na me", "under_score/ok", "1/2", "org/x.", "-org/x"]


def _library(repo_id: str) -> bool:
    try:
        validate_repo_id(repo_id)
    except HFValidationError:
        return False
    return True


@pytest.mark.parametrize("repo_id", IDS)
def test_the_rule_is_huggingface_hubs(repo_id: str):
    assert _valid_repo_id(repo_id) == _library(repo_id)
