"""The expected error of config-estimated weights, per kind of checkpoint, with the boots each bound rests on.

A plan whose weights came from config.json (no `--weights-gib`, no reachable safetensors header) reports
`weights_estimate_error` (a fraction of the weights) and `weights_estimate_error_basis` (what the bound rests on):
the largest |estimate - engine| / engine seen on the H200 boots of SGLang 0.5.15.post1 (tests/data/sglang-0.5.15.post1/,
the tables of benchmarks/RESULTS.md), rounded up; "not boot-checked" bounds are the planner's guess and say so.
vLLM loads the same tensors for these checkpoints (SGLang's loaders are ports of vLLM's); its GPU loader was not
booted here.
"""

from __future__ import annotations

from dataclasses import dataclass

from specbench.specs.model_types import ModelSpec


@dataclass(frozen=True)
class EstimateError:
    fraction: float
    basis: str


def _kind(m: ModelSpec) -> str:
    q = m.quant
    if q.method is None:
        return "moe" if m.moe is not None else "dense"
    if q.default is not None and q.default.int_group_bits:
        return "int_group"
    if q.method == "modelopt" and "nvfp4" in q.label:
        return "modelopt_nvfp4"
    return str(q.method)


# kind -> (bound, basis). Dense/hybrid bf16: Llama-3.1-8B 15.02 exact, Qwen3.5-27B -0.2 %, Qwen3-8B 15.276 vs 15.28.
_TABLE: dict[str, tuple[float, str]] = {
    "dense": (0.005, "bf16 dense/hybrid boots: Llama-3.1-8B, Qwen3-8B, Qwen3.5-27B, Qwen3.6-27B within 0.3 %"),
    "moe": (0.005, "bf16 MoE boots: Qwen3.6-35B-A3B 65.45 vs 65.49 GiB, Nemotron-3-Nano-30B 58.82 vs 58.92 "
                   "(within 0.2 %)"),
    "int_group": (0.005, "AWQ / GPTQ / compressed-tensors int4 boots (Qwen3-8B x4, Qwen3-30B-A3B) within 0.2 % "
                         "after the Marlin residue fit"),
    "mxfp4": (0.005, "gpt-oss-20b MXFP4 on Hopper: 15.017 vs 15.02 (two boots); other GPUs not boot-checked"),
    "fp8": (0.02, "FP8 checkpoints: not boot-checked (bytes per parameter and block scales exact; excluded "
                  "modules from the config)"),
    "modelopt": (0.01, "ModelOpt FP8 boot: Nemotron-3-Super-120B-A12B 113.46 vs 113.11 GiB (+0.3 %)"),
    "modelopt_nvfp4": (0.02, "ModelOpt NVFP4: not boot-checked (the H200 has no FP4 kernels); bytes per parameter "
                             "exact, per-module exclusions from hf_quant_config.json"),
}
# drafter kind -> (bound, basis): specs/weights.py::draft_model_bytes / mtp_draft_bytes against the H200 boots
_DRAFT: dict[str, tuple[float, str]] = {
    "eagle3": (0.01, "EAGLE3 drafter boots: Llama-3.1-8B 2.146 vs 2.15, Qwen3-8B +0.9 %"),
    "dflash": (0.03, "DFlash drafter boot: Qwen3.6-27B SpecForge drafter within 3 %"),
    "mtp": (0.005, "built-in MTP / NEXTN boot: Qwen3.5-27B 5.527 vs 5.53"),
}
_LATENT = (0.005, "latent MoE boot: Nemotron-3-Super-120B-A12B FP8 113.46 vs 113.11 GiB (+0.3 %); at a high "
                  "--mem-fraction-static the KV pool moves by weights error x weights / the rest (-2.5 % there)")
_OTHER = (0.05, "this quantization was not boot-checked: the scheme's bytes per parameter only")


def weights_estimate_error(m: ModelSpec) -> EstimateError:
    """The bound for a config estimate of `m`'s weights."""
    if m.moe is not None and m.moe.latent_size:
        return EstimateError(*_LATENT)
    bound, basis = _TABLE.get(_kind(m), _OTHER)
    return EstimateError(bound, basis)


def draft_estimate_error(m: ModelSpec, draft: ModelSpec | None) -> EstimateError | None:
    """The bound for a config estimate of the drafter: a separate drafter by its kind, else the target's built-in
    MTP layers; None when there is no drafter to weigh (NGRAM)."""
    if draft is not None and draft is not m:
        kind = draft.draft.kind if draft.draft is not None else "separate"
    elif m.mtp_layers:
        kind = "mtp"
    else:
        return None
    return EstimateError(*_DRAFT.get(kind, (0.05, f"{kind} drafter: not boot-checked")))


def estimate_error_keys(m: ModelSpec, draft: ModelSpec | None, weights_source: str,
                        draft_source: str | None, draft_gib: float | None) -> dict[str, object]:
    """The plan keys (docs/contracts.md): null where the weights were measured or read from headers, and for the
    drafter also where it weighs nothing."""
    out: dict[str, object] = {"weights_estimate_error": None, "weights_estimate_error_basis": None,
                              "draft_weights_estimate_error": None, "draft_weights_estimate_error_basis": None}
    if "estimated" in (weights_source or ""):
        e = weights_estimate_error(m)
        out.update(weights_estimate_error=e.fraction, weights_estimate_error_basis=e.basis)
    d = draft_estimate_error(m, draft) if draft_gib and "estimated" in (draft_source or "") else None
    if d is not None:
        out.update(draft_weights_estimate_error=d.fraction, draft_weights_estimate_error_basis=d.basis)
    return out
