"""vLLM's start checks of the speculative config that the short forms (`--spec-tokens` without `--spec-method`,
engine/arg_utils.py::EngineArgs.create_speculative_config@0.32.0) make easy to hit: the engine's own error text."""

from __future__ import annotations

from specbench.engines.vllm.args import VllmArgs


def spec_start_failure(args: VllmArgs) -> str | None:
    """config/speculative.py::SpeculativeConfig.__post_init__@0.32.0: a token count with neither a method nor a
    draft model names no proposer."""
    s = args.speculative
    if s is not None and not s.method and not s.model:
        return "ValueError: num_speculative_tokens was provided but without speculative model."
    return None
