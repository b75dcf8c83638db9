"""`--quantization` against the checkpoint, as vLLM decides it before any weight loads (read in vLLM 0.32.0):

- config/model.py::ModelConfig._verify_quantization@0.32.0: a checkpoint with a quantization config takes the user's
  value only where a config class's `override_quantization_method` turns the checkpoint into it (AutoAWQ: `awq`,
  `awq_marlin`, `auto_awq`, `marlin`; AutoGPTQ: `gptq`, `gptq_marlin`, `auto_gptq`, `marlin`; MoeWNA16 for AWQ / GPTQ
  MoE: `moe_wna16`; ModelOpt FP8 -> `modelopt`; MXFP4 -> `gpt_oss_mxfp4`; Humming); any other value is "Quantization
  method specified in the model config (M) does not match ..."; then a value outside QUANTIZATION_METHODS is
  "Unknown quantization method"; a deprecated one (`fbgemm_fp8`, `fp_quant`) needs --allow-deprecated-quantization;
- model_loader/weight_utils.py::get_quant_config@0.32.0: on a checkpoint without one, a method whose config class
  reads a file (`get_config_filenames`: AutoAWQ / AutoGPTQ / MoeWNA16 `quantize_config.json`, ModelOpt
  `hf_quant_config.json`) ends in "Cannot find the config file for X"; one that reads none but needs the checkpoint's
  config to be built (compressed-tensors, quark) ends in Python's TypeError for the missing arguments.
"""

from __future__ import annotations

# model_executor/layers/quantization/__init__.py::QuantizationMethods@0.32.0
QUANTIZATION_METHODS = (
    "awq", "auto_awq", "fp8", "fbgemm_fp8", "fp_quant", "modelopt", "modelopt_fp4", "modelopt_mxfp8",
    "modelopt_mixed", "auto_gptq", "gptq", "gptq_marlin", "awq_marlin", "humming", "compressed-tensors",
    "experts_int8", "quark", "moe_wna16", "torchao", "inc", "mxfp4", "gpt_oss_mxfp4", "deepseek_v4_fp8", "online",
    "fp8_per_tensor", "fp8_per_block", "fp8_per_channel", "int8_per_channel_weight_only", "nvfp4_per_token", "mxfp8")
DEPRECATED = ("fbgemm_fp8", "fp_quant")
# the checkpoint's quant_method -> the --quantization values that checkpoint accepts (its overrides, itself)
ACCEPTS: dict[str, tuple[str, ...]] = {
    "awq": ("awq", "awq_marlin", "auto_awq", "marlin", "moe_wna16", "humming"),
    "gptq": ("gptq", "gptq_marlin", "auto_gptq", "marlin", "moe_wna16", "humming"),
    "modelopt": ("modelopt", "modelopt_fp4", "modelopt_mxfp8", "modelopt_mixed", "humming"),
    "modelopt_fp4": ("modelopt_fp4", "modelopt", "modelopt_mixed", "humming"),
    "modelopt_fp8": ("modelopt", "modelopt_fp8", "humming"),
    "mxfp4": ("mxfp4", "gpt_oss_mxfp4", "humming"),
    "auto-round": ("inc", "auto-round", "humming"),
    "compressed_tensors": ("compressed-tensors", "humming"),
}
# config classes that read a file of the checkpoint (get_config_filenames non-empty)@0.32.0
NEEDS_FILE = ("awq", "auto_awq", "awq_marlin", "gptq", "auto_gptq", "gptq_marlin", "moe_wna16", "modelopt",
              "modelopt_fp4", "modelopt_mxfp8", "modelopt_mixed", "inc")


# config classes that read no file but cannot be built without the checkpoint's config: get_quant_config then calls
# `quant_cls()` (weight_utils.py@0.32.0) and Python refuses the missing arguments (their __init__@0.32.0)
NO_DEFAULT = {
    "compressed-tensors": "CompressedTensorsConfig.__init__() missing 3 required positional arguments: "
                          "'target_scheme_map', 'ignore', and 'quant_format'",
    "quark": "QuarkConfig.__init__() missing 1 required positional argument: 'quant_config'",
}


def quantization_failure(flag: str | None, checkpoint_method: str | None, allow_deprecated: bool = False) -> str | None:
    """vLLM's own error for `--quantization flag` on a checkpoint quantized with `checkpoint_method` (None:
    unquantized), or None when vLLM takes it."""
    if not flag:
        return None
    q = flag.strip().lower()
    method = (checkpoint_method or "").lower() or None
    if method is not None and q not in ACCEPTS.get(method, (method,)):
        return (f"ValueError: Quantization method specified in the model config ({method}) does not match the "
                f"quantization method specified in the `quantization` argument ({q}).")
    if method is None and q not in QUANTIZATION_METHODS:
        return f"ValueError: Unknown quantization method: {q}. Must be one of {list(QUANTIZATION_METHODS)}."
    if q in DEPRECATED and not allow_deprecated:
        return (f"ValueError: The quantization method {q} is deprecated and will be removed in future versions of "
                "vLLM. To bypass, set `--allow-deprecated-quantization`.")
    if method is None and q in NEEDS_FILE:
        return f"ValueError: Cannot find the config file for {q}"
    if method is None and q in NO_DEFAULT:
        return f"TypeError: {NO_DEFAULT[q]} (--quantization {q} needs a checkpoint quantized with it)"
    return None
