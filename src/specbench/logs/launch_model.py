"""The model behind a log's argument dump, resolved as `specbench plan` resolves it (specs/resolve.py): the dumped
path itself (a file, a folder, the HF cache, the Hub), or the bundled config the name rules give it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specbench.errors import UserError
from specbench.logs.facts import LogFacts
from specbench.specs.model_types import ModelSpec
from specbench.specs.resolve import load_model_spec, resolve_model


def model_source(args: dict[str, Any]) -> str | None:
    """What `specbench.specs.resolve` loads for the dumped model_path (SGLang) / model (vLLM), as `specbench plan`
    would: the path itself, or the name of the bundled config resolve's name rules give it; None otherwise."""
    path = args.get("model_path") or args.get("model")
    if not isinstance(path, str) or not path:
        return None
    try:
        origin = resolve_model(path)
    except (UserError, ValueError, OSError):
        return None
    # the bundled config's own name when that is what the path came to (the doctor says so in its notes)
    return Path(origin.location).stem if origin.source.startswith("bundled") else path


def facts_model_source(facts: LogFacts) -> str | None:
    """`--model-config` when the user gave one, else what the dumped model path resolves to."""
    return facts.model_config or model_source(facts.server_args)


def model_spec_of(facts: LogFacts) -> ModelSpec | None:
    """The ModelSpec behind the boot; None when unknown."""
    args = facts.server_args
    src = facts_model_source(facts)
    if src is None:
        return None
    try:
        return load_model_spec(src, name=str(args.get("model_path") or args.get("model")))
    except (UserError, ValueError, KeyError, TypeError, OSError):
        return None
