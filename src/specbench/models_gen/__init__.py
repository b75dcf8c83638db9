"""Tiny local models for the CPU engine: random weights and a locally trained tokenizer, no hub, no torch.

    from specbench.models_gen import build_all, ALL_MODELS
    build_all(Path(".cache/models"))      # -> tiny-target, tiny-draft, tiny-hybrid, tiny-swa folders

Modules: `corpus` (deterministic training text), `tokenizer` (byte-level BPE + HF tokenizer files),
`shapes` (the Qwen models as frozen specs), `weights` (numpy state dicts), `configs` (config.json dicts),
`gpt_oss` (tiny-swa, a sliding-window gpt-oss: spec, weights, config), `build` (writes folders).
"""

from specbench.models_gen.build import (
                                        ALL_MODELS,
                                        MODEL_FILES,
                                        BuiltModel,
                                        build_all,
                                        build_model,
                                        fingerprint,
                                        is_complete,
                                        is_current,
)
from specbench.models_gen.gpt_oss import TINY_SWA, GptOssSpec
from specbench.models_gen.shapes import TINY_DRAFT, TINY_HYBRID, TINY_TARGET, TinyModelSpec, by_name

__all__ = ["ALL_MODELS", "MODEL_FILES", "TINY_DRAFT", "TINY_HYBRID", "TINY_SWA", "TINY_TARGET", "BuiltModel",
           "GptOssSpec", "TinyModelSpec",
           "build_all", "build_model", "by_name", "fingerprint", "is_complete", "is_current"]
