"""Tiny local models for the CPU engine: random weights and a locally trained tokenizer, no hub, no torch.

    from specbench.models_gen import build_all, ALL_MODELS
    build_all(Path(".cache/models"))      # -> tiny-target, tiny-draft, tiny-hybrid folders

Modules: `corpus` (deterministic training text), `tokenizer` (byte-level BPE + HF tokenizer files),
`shapes` (the models as frozen specs), `weights` (numpy state dicts), `configs` (config.json dicts),
`build` (writes folders).
"""

from specbench.models_gen.build import (
                                        MODEL_FILES,
                                        BuiltModel,
                                        build_all,
                                        build_model,
                                        fingerprint,
                                        is_complete,
                                        is_current,
)
from specbench.models_gen.shapes import ALL_MODELS, TINY_DRAFT, TINY_HYBRID, TINY_TARGET, TinyModelSpec, by_name

__all__ = ["ALL_MODELS", "MODEL_FILES", "TINY_DRAFT", "TINY_HYBRID", "TINY_TARGET", "BuiltModel", "TinyModelSpec",
           "build_all", "build_model", "by_name", "fingerprint", "is_complete", "is_current"]
