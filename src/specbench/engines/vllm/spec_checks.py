"""vLLM's start checks of the speculative config that the short forms (`--spec-tokens` without `--spec-method`,
engine/arg_utils.py::EngineArgs.create_speculative_config@0.32.0) make easy to hit: the engine's own error text."""

from __future__ import annotations

from specbench.engines.vllm.args import VllmArgs

# methods whose proposer needs no draft model: config/speculative.py::SpeculativeConfig.__post_init__@0.32.0 fills
# `model` for these (the target itself for MTP / DSpark, a name for the model-free proposers); every other method
# without a model ends in "num_speculative_tokens was provided but without speculative model."
MODEL_FREE = ("mtp", "dspark", "ngram", "[ngram]", "ngram_gpu", "suffix", "extract_hidden_states")


def spec_start_failure(args: VllmArgs) -> str | None:
    """config/speculative.py::SpeculativeConfig.__post_init__@0.32.0: a token count with neither a method nor a
    draft model names no proposer; a method that needs a draft model (eagle, eagle3, draft_model, dflash, ...) given
    none fails the same way. MTP model types (`deepseek_mtp`, `qwen3_next_mtp`, ...) are folded into `mtp` first."""
    s = args.speculative
    if s is None or s.model:
        return None
    method = (s.method or "").lower()
    if not method or not (method in MODEL_FREE or method.endswith("_mtp") or method == "custom_class"):
        return "ValueError: num_speculative_tokens was provided but without speculative model."
    return None
