"""What a stand-in assumed (specs/standin.py), and the start checks that read it (issue 36, item 2).

A stand-in's synthesized fields (a quantization written from the checkpoint's name, a renamed release's context, a
SpecForge template's shapes in a published drafter's place) are assumptions: they feed the numbers and are listed,
but a start check of the engine that reads one of them cannot decide the verdict. Its failure is shown as a warning
naming the assumption; only the checkpoint's own config.json (or the user's explicit flag) decides.

The groups of fields a check reads, and a stand-in assumes:
- `quantization`: quantization_config / hf_quant_config.json (method, bits, exclusions);
- `context`: max_position_embeddings and the rope scaling (a rename's native context, a template's);
- `shapes`: layer counts, widths, heads, experts (a template for a published drafter, a rename assumed to keep them);
- `architecture`: the model class (a template's class for a published drafter's).
"""

from __future__ import annotations

from collections.abc import Iterable

from specbench.specs.model_types import ModelSpec

QUANTIZATION = "quantization"
CONTEXT = "context"
SHAPES = "shapes"
ARCHITECTURE = "architecture"
GROUPS = (QUANTIZATION, CONTEXT, SHAPES, ARCHITECTURE)


def assumed_reads(reads: Iterable[str], models: Iterable[ModelSpec | None]) -> tuple[tuple[str, str], ...]:
    """(group, model name) for each group in `reads` that a stand-in assumed for one of `models`."""
    want = set(reads)
    return tuple((g, m.name) for m in models if m is not None for g in GROUPS if g in want and g in m.assumed)


def demoted(error: str, reads: Iterable[str], models: Iterable[ModelSpec | None]) -> str | None:
    """The warning that replaces a start check's failure when the check read a field a stand-in assumed; None when
    every field it read is the checkpoint's own (the failure stands)."""
    hits = assumed_reads(reads, models)
    if not hits:
        return None
    what = "; ".join(f"the {g} of {name}" for g, name in hits)
    return (f"not decided (assumed by the stand-in: {what}): would stop the start only if the checkpoint is as "
            f"assumed: {error}; its own config.json decides")
