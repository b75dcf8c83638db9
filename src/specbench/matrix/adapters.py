"""The runner's view of the engines: the server adapter a matrix names (`engine = "..."`), found in the engine
registry (`specbench.engines.base.server_adapter`), and the model/tokenizer folder of a matrix's launch."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from specbench.engines.base import ServerAdapter, server_adapter
from specbench.matrix.schema import MatrixSpec

__all__ = ["adapter_for", "command_model", "local_tokenizer_dir"]


def adapter_for(spec: MatrixSpec) -> ServerAdapter:
    return server_adapter(spec.engine, spec.plan.engine_version)


def local_tokenizer_dir(spec: MatrixSpec) -> str | None:
    """Where the model's tokenizer.json is: `tokenizer`, the local model, or the launch command's model
    (a folder, or its snapshot in the local Hugging Face cache). None when none of them has one."""
    if spec.tokenizer:
        return spec.tokenizer
    local = adapter_for(spec).local_model_dir(spec.target())
    if local is not None:
        return local
    model = command_model(spec.command)
    if not model:
        return None
    if (Path(model) / "tokenizer.json").is_file():
        return model
    from specbench.specs.resolve import hf_cache_config

    cfg = hf_cache_config(model)
    if cfg is not None and (cfg.parent / "tokenizer.json").is_file():
        return str(cfg.parent)
    return None


def command_model(argv: Sequence[str]) -> str | None:
    """The model of a launch command: `--model-path X` / `--model X` / `--model=X`, or `vllm serve X`."""
    for i, word in enumerate(argv):
        head, sep, tail = word.partition("=")
        if head in ("--model-path", "--model"):
            if sep:
                return tail
            if i + 1 < len(argv):
                return argv[i + 1]
        if word == "serve" and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            return argv[i + 1]
    return None
