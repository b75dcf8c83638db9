"""Quantization schemes of a checkpoint and the bytes each weight costs.

Sources:
- `quantization_config` in config.json (HF transformers convention; quant_method fp8 / mxfp4 / modelopt /
  compressed-tensors / awq / gptq) and ModelOpt's `hf_quant_config.json` (`quantization.quant_algo`,
  `exclude_modules`, `quantized_layers`, `kv_cache_quant_algo`).
- Storage layouts: FP8 block quant keeps one fp32 scale per 128x128 block (DeepSeek-V3 / Qwen3-FP8
  `weight_block_size`); NVFP4 packs two e2m1 values per byte plus one fp8-e4m3 scale per 16 values and a
  per-tensor fp32 global scale (ModelOpt NVFP4); MXFP4 packs two e2m1 per byte plus one e8m0 scale per 32
  values (OCP MX spec, gpt-oss); int4 group quant (AWQ/GPTQ/compressed-tensors pack-quantized) packs eight
  int4 per int32, with a 16-bit scale per group and, only where the engine keeps one, a packed zero point per group.
- What the engine allocates for an int-N group checkpoint (read in SGLang 0.5.15.post1; its schemes are ports of
  vLLM's, which were not booted):
  - AWQ (awq_marlin on Hopper/Ampere): qweight int32 [in, out/8], qzeros int32 [in/g, out/8], scales fp16 [in/g, out];
    the zero points are repacked for Marlin and kept
    (sglang/srt/layers/quantization/awq/schemes/awq_marlin.py::AWQMarlinLinearScheme.create_weights@0.5.15.post1);
  - GPTQ (gptq_marlin for `sym: true`, the exllama `gptq` kernel otherwise): qweight int32 [in/8, out], qzeros,
    scales and g_idx int32 [in] are all created (gptq/schemes/gptq_marlin.py::create_weights@0.5.15.post1). Marlin
    then replaces qzeros and (without desc_act) g_idx by empty tensors (hardware_backend/gpu/quantization/
    gptq_kernels.py::GPTQMarlinLinearKernel.process_weights_after_loading), but the H200 boots show the freed
    bytes stay reserved by PyTorch's allocator: symmetric GPTQ logs the same `mem usage=5.74 GB` as AWQ for
    Qwen3-8B (tests/data/sglang-0.5.15.post1/qwen3_8b_gptq_mrr48.log, qwen3_8b_awq_mrr48.log), so they are counted;
  - compressed-tensors pack-quantized wNa16: weight_packed + weight_scale, a weight_zero_point only when
    `symmetric: false` (compressed_tensors/schemes/compressed_tensors_wNa16.py::create_weights@0.5.15.post1): the
    boots log 5.72 GB symmetric vs 5.74 GB asymmetric (tests/data/sglang-0.5.15.post1/qwen3_8b_w4a16*_mrr48.log).
  Not counted: g_idx + g_idx_sort_indices of act-order checkpoints (2 x int32 per input row: 8/out bytes a
  parameter, about +0.2% of a 4096-wide layer) and the Marlin workspace (one int32 per SM). The Marlin repack's
  allocator residue is SGLang's measurement, added by engines/sglang/plan_stages.py (INT_MARLIN_ALLOCATOR_RESIDUE).
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from specbench.errors import ConfigError
from specbench.specs.dtypes import DTYPE_BYTES, canonical


@dataclass(frozen=True)
class Scheme:
    """How one linear weight is stored."""

    name: str  # "bf16", "fp8", "fp8-block128", "nvfp4", "mxfp4", "int4-g128", "int8"
    bytes_per_param: float
    int_group_bits: int = 0  # int-N weight-only group quant (`int_group`): N; 0 otherwise

    @staticmethod
    def dense(dtype: str) -> Scheme:
        if isinstance(dtype, str):
            return _dense(dtype)  # frozen: one per dtype name (a fix search asks ~40,000 times)
        return Scheme(dtype if dtype in ("bf16", "fp16", "fp32") else _short(dtype),
                      DTYPE_BYTES.get(canonical(dtype), 2.0))


@functools.lru_cache(maxsize=64)
def _dense(dtype: str) -> Scheme:
    return Scheme(dtype if dtype in ("bf16", "fp16", "fp32") else _short(dtype), DTYPE_BYTES.get(canonical(dtype), 2.0))


def _short(dtype: str) -> str:
    return {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(dtype, dtype)


FP8 = Scheme("fp8", 1.0)
FP8_BLOCK128 = Scheme("fp8-block128", 1.0 + 4.0 / (128 * 128))
NVFP4 = Scheme("nvfp4", 0.5 + 1.0 / 16)
MXFP4 = Scheme("mxfp4", 0.5 + 1.0 / 32)
INT8 = Scheme("int8", 1.0)


def int_group(bits: int, group: int | None, *, zero_point: bool) -> Scheme:
    """Integer weight-only group quant as the engine keeps it: bits/8 a parameter, one 16-bit scale per group and
    (`zero_point`) one packed bits-wide zero point per group. group <= 0 is per output channel (one scale a row:
    negligible per parameter). Sources: the module docstring."""
    g = int(group) if group is not None else 128
    per_group = 2.0 + (bits / 8.0 if zero_point else 0.0)
    name = f"int{bits}-" + (f"g{g}" if g > 0 else "ch") + ("" if zero_point else "-sym")
    return Scheme(name, bits / 8.0 + (per_group / g if g > 0 else 0.0), int_group_bits=bits)


def int4_group(group: int, *, zero_point: bool = True) -> Scheme:
    return int_group(4, group if group and group > 0 else 128, zero_point=zero_point)


def _scheme_from_algo(algo: str, group: int | None = None) -> Scheme | None:
    a = (algo or "").upper()
    if "NVFP4" in a:
        return NVFP4
    if "MXFP4" in a:
        return MXFP4
    if "W4A16" in a or a in ("INT4", "W4A8_AWQ", "INT4_AWQ"):
        return int4_group(group or 128)
    if "FP8" in a:
        return FP8
    if "INT8" in a or "W8A8" in a:
        return INT8
    return None


@dataclass(frozen=True)
class QuantSpec:
    """The checkpoint's quantization: a default scheme for quantized linears, per-module exceptions."""

    method: str | None = None                  # None = unquantized
    default: Scheme | None = None              # scheme of linears that are quantized
    excluded: tuple[str, ...] = ()             # fnmatch patterns of modules kept in model dtype
    per_module: Mapping[str, Scheme] = field(default_factory=dict)  # normalised module name -> scheme
    kv_cache_quant_algo: str | None = None     # "FP8" makes --kv-cache-dtype auto resolve to fp8_e4m3
    quantize_only_experts: bool = False        # gpt-oss MXFP4: only MoE experts are quantized
    lists_exclusions: bool = True              # hf_quant_config.json has an `exclude_modules` key (SGLang may index it)
    source: str = "none"

    @property
    def label(self) -> str:
        if self.method is None:
            return "unquantized"
        if self.per_module:
            names = sorted({s.name for s in self.per_module.values()})
            return f"{self.method} ({'+'.join(names)})"
        return f"{self.method} ({self.default.name if self.default else '?'})"

    def scheme_for(self, module: str, model_dtype: str, *, is_expert: bool = False) -> Scheme:
        """Storage scheme of linear `module` (HF name, any prefix)."""
        dense = Scheme.dense(model_dtype)
        if self.method is None:
            return dense
        norm = normalise_module_name(module)
        if self.per_module:
            return self.per_module.get(norm, dense) if not self._excluded(module, norm) else dense
        if self._excluded(module, norm):
            return dense
        if self.quantize_only_experts and not is_expert:
            return dense
        return self.default or dense

    def excluded_any(self, prefix: str) -> bool:
        """True when an exclude pattern covers modules under `prefix` (e.g. ModelOpt's `mtp*`)."""
        return any(p.startswith(prefix) for p in self.excluded)

    def _excluded(self, module: str, norm: str) -> bool:
        return _exclusion(self.excluded).matches(module, norm)


@dataclass(frozen=True)
class _Exclusion:
    """An exclude list compiled once (a 480B FP8 checkpoint lists ~560 modules; matched pattern by pattern, every
    tensor of every plan of a fix search took 72-89 s). Same rules as pattern by pattern: fnmatch of the module or
    of its normalised name; a pattern without '*' also matches the normalised name or a dotted prefix of it; any
    pattern matches as the normalised name's final dotted component(s) ("lm_head")."""

    globs: tuple[tuple[re.Pattern[str], re.Pattern[str]], ...]
    whole: frozenset[str]        # plain patterns: equal to the module
    whole_norm: frozenset[str]   # their normalised forms: equal to the normalised name
    prefixes: frozenset[str]     # normalised patterns without '*': the name or a dotted prefix of it
    suffixes: frozenset[str]     # every pattern: the name or its final dotted component(s)

    def matches(self, module: str, norm: str) -> bool:
        if module in self.whole or norm in self.whole_norm:
            return True
        parts = norm.split(".")
        for i in range(1, len(parts) + 1):
            if ".".join(parts[:i]) in self.prefixes or ".".join(parts[-i:]) in self.suffixes:
                return True
        return any(a.match(module) or b.match(norm) for a, b in self.globs)


_EXCLUSIONS: dict[tuple[str, ...], _Exclusion] = {}


def _exclusion(patterns: tuple[str, ...]) -> _Exclusion:
    hit = _EXCLUSIONS.get(patterns)
    if hit is not None:
        return hit
    globs, whole, whole_norm, prefixes, suffixes = [], set(), set(), set(), set()
    for pat in patterns:
        p = pat.rstrip(".")
        np_ = normalise_module_name(p)
        suffixes.add(p)
        if "*" not in p:
            prefixes.add(np_)
        if any(c in p for c in "*?["):
            globs.append((re.compile(fnmatch.translate(p)), re.compile(fnmatch.translate(np_))))
        else:
            whole.add(p)
            whole_norm.add(np_)
    got = _Exclusion(tuple(globs), frozenset(whole), frozenset(whole_norm), frozenset(prefixes), frozenset(suffixes))
    _EXCLUSIONS[patterns] = got
    return got


_PREFIXES = ("model.language_model.", "language_model.model.", "language_model.", "model.", "backbone.")


def normalise_module_name(name: str) -> str:
    """`model.language_model.layers.3.mlp.up_proj` -> `layers.3.mlp.up_proj` (prefix conventions differ)."""
    for p in _PREFIXES:
        if name.startswith(p):
            return name[len(p):]
    return name


def parse_quant(config: Mapping[str, Any], hf_quant_config: Mapping[str, Any] | None = None) -> QuantSpec:
    """Read `quantization_config` (config.json) and/or ModelOpt's `hf_quant_config.json`.

    `hf_quant_config.json` wins where both exist: SGLang's ModelOpt loader reads it first
    (sglang/srt/configs/model_config.py::_parse_quant_hf_config).
    """
    if hf_quant_config:
        q = hf_quant_config.get("quantization", hf_quant_config) if isinstance(hf_quant_config, Mapping) else None
        if not isinstance(q, Mapping) or not isinstance(q.get("quantized_layers") or {}, Mapping):
            raise ConfigError("hf_quant_config.json: 'quantization' must be a JSON object "
                              "(with 'quantized_layers' an object of layer -> {quant_algo})")
        algo = str(q.get("quant_algo") or "")
        per: dict[str, Scheme] = {}
        for name, spec in (q.get("quantized_layers") or {}).items():
            if not isinstance(spec, Mapping):
                raise ConfigError(f"hf_quant_config.json: quantized_layers[{name!r}] must be an object")
            s = _scheme_from_algo(str(spec.get("quant_algo", "")), spec.get("group_size"))
            if s is not None:
                per[normalise_module_name(name)] = s
        default = _scheme_from_algo(algo, q.get("group_size"))
        if default is None and not per and algo.upper() not in ("MIXED_PRECISION", ""):
            # never planned as fp8 silently: an algorithm the table does not know is named
            raise ConfigError(f"hf_quant_config.json: unknown quant_algo {algo!r} "
                              "(known: NVFP4, MXFP4, W4A16/INT4/W4A8_AWQ, FP8, INT8/W8A8, MIXED_PRECISION)")
        return QuantSpec(
            method="modelopt",
            default=default,
            excluded=tuple(q.get("exclude_modules") or ()),
            per_module=per,
            kv_cache_quant_algo=q.get("kv_cache_quant_algo"),
            lists_exclusions="exclude_modules" in q,
            source="hf_quant_config.json",
        )
    qc = config.get("quantization_config")
    if not qc:
        return QuantSpec()
    method = str(qc.get("quant_method", "")).lower()
    excluded = tuple(qc.get("modules_to_not_convert") or qc.get("ignore") or qc.get("exclude_modules") or ())
    kv_algo = qc.get("kv_cache_quant_algo")
    if method == "fp8":
        block = qc.get("weight_block_size")
        return QuantSpec("fp8", FP8_BLOCK128 if block else FP8, excluded, kv_cache_quant_algo=kv_algo,
                         source="config.json quantization_config")
    if method == "mxfp4":
        return QuantSpec("mxfp4", MXFP4, excluded, quantize_only_experts=True, kv_cache_quant_algo=kv_algo,
                         source="config.json quantization_config")
    if method in ("awq", "gptq", "awq_marlin", "gptq_marlin", "auto-round"):
        return _parse_awq_gptq(method, qc, excluded)
    if method in ("modelopt", "modelopt_fp4", "modelopt_fp8", "compressed-tensors", "compressed_tensors"):
        return _parse_config_groups(method, qc, excluded, kv_algo)
    if method in ("bitsandbytes",):
        return QuantSpec(method, Scheme("nf4", 0.5 + 4.0 / 64), excluded, source="config.json quantization_config")
    # Unknown method: an error naming it (config_fields.py refuses it first; never planned as fp8 silently)
    raise ConfigError(f"config.json: unknown quantization method {method!r}")


def _parse_awq_gptq(method: str, qc: Mapping[str, Any], excluded: tuple[str, ...]) -> QuantSpec:
    """AWQ creates zero points when `zero_point` (its default); GPTQ always creates qzeros, and what Marlin frees
    stays reserved (the module docstring has the engine code and the boots)."""
    bits = int(qc.get("bits", qc.get("w_bit", 4)))
    group = int(qc.get("group_size", qc.get("q_group_size", 128)) or 128)
    zero_point = bool(qc.get("zero_point", True)) if method.startswith("awq") else True
    scheme = int_group(bits, group, zero_point=zero_point) if bits in (2, 3, 4, 8) else INT8
    return QuantSpec(method, scheme, excluded, source="config.json quantization_config")


def _parse_config_groups(method: str, qc: Mapping[str, Any], excluded: tuple[str, ...], kv_algo: Any) -> QuantSpec:
    """compressed-tensors style `config_groups` with explicit `targets` (ModelOpt exports use it too)."""
    per: dict[str, Scheme] = {}
    default: Scheme | None = None
    algo = str(qc.get("quant_algo") or "")
    for group in (qc.get("config_groups") or {}).values():
        w = group.get("weights") or {}
        bits = w.get("num_bits")
        typ = str(w.get("type", ""))
        gsize = w.get("group_size")
        if bits == 4 and typ == "float":
            scheme = NVFP4 if (gsize in (None, 16)) else MXFP4
        elif (bits in (4, 8) and typ == "int" and w.get("strategy") in ("group", "channel")
              and not group.get("input_activations")):
            # pack-quantized wNa16 (weight-only): compressed_tensors_wNa16.py::create_weights@0.5.15.post1
            g = int(gsize or 128) if w.get("strategy") == "group" else -1
            scheme = int_group(bits, g, zero_point=not w.get("symmetric", True))
        elif bits == 4:
            scheme = int4_group(int(gsize or 128))
        elif bits == 8 and typ == "float":
            scheme = FP8
        elif bits == 8:
            scheme = INT8
        else:
            continue
        for t in group.get("targets") or ():
            if t in ("Linear", "re:.*"):
                default = scheme
            elif t.startswith("re:"):
                default = default or scheme
            else:
                per[normalise_module_name(t)] = scheme
    if default is None and not per:
        default = _scheme_from_algo(algo) or FP8
    kv = kv_algo
    if kv is None and qc.get("kv_cache_scheme"):
        kvs = qc["kv_cache_scheme"]
        if kvs.get("num_bits") == 8 and kvs.get("type") == "float":
            kv = "FP8"
    src = "config.json quantization_config" + (" (config_groups targets)" if per else "")
    return QuantSpec(method, default, excluded, per_module=per if default is None else {},
                     kv_cache_quant_algo=kv, source=src)


# the quantization_config methods parse_quant reads (config_fields.py refuses any other at the input edge)
KNOWN_METHODS = ("fp8", "mxfp4", "awq", "gptq", "awq_marlin", "gptq_marlin", "auto-round", "modelopt",
                 "modelopt_fp4", "modelopt_fp8", "compressed-tensors", "compressed_tensors", "bitsandbytes")

_QUANT_FLAG = re.compile(r"^(fp8|modelopt_fp8|modelopt_fp4|modelopt|mxfp4|awq|gptq|w8a8_fp8|w8a8_int8|w4afp8|mxfp8|"
                         r"nvfp4_online|quark_mxfp4|bitsandbytes|blockwise_int8|fbgemm_fp8|fp8_per_tensor|"
                         r"fp8_per_channel|fp8_per_block|mxfp4_online)$")
MXFP8 = Scheme("mxfp8", 1.0 + 1.0 / 32)  # e4m3 values + one e8m0 scale per 32 (OCP MX spec)


def scheme_for_flag(flag: str) -> QuantSpec | None:
    """`--quantization X` given on the command line with an unquantized checkpoint (online quantization):
    fp8 / mxfp8 / nvfp4_online / quark_mxfp4 / bitsandbytes quantize at load (their config classes read no file of
    the checkpoint: layers/quantization/*.py::get_config_filenames@0.5.15.post1 returns []); None for a value that
    is not an online scheme (the engine refuses it or it needs a quantized checkpoint: start_checks.py)."""
    f = flag.lower()
    if not _QUANT_FLAG.match(f):
        return None
    if f == "mxfp8":
        return QuantSpec(f, MXFP8, ("lm_head",), source="--quantization")
    if f in ("quark_mxfp4", "mxfp4_online"):
        return QuantSpec(f, MXFP4, ("lm_head",), source="--quantization")
    if f == "bitsandbytes":
        return QuantSpec(f, Scheme("nf4", 0.5 + 4.0 / 64), ("lm_head",), source="--quantization")
    if "fp4" in f:
        return QuantSpec(f, NVFP4, ("lm_head",), source="--quantization")
    if "int8" in f:
        return QuantSpec(f, INT8, ("lm_head",), source="--quantization")
    if f in ("awq", "gptq"):
        return QuantSpec(f, int4_group(128), ("lm_head",), source="--quantization")
    return QuantSpec(f, FP8, ("lm_head",), source="--quantization")


# weight-only FP8 Marlin (SM80-SM88: layers/quantization/fp8_utils.py::can_auto_enable_marlin_fp8@0.5.15.post1 is
# 80 <= sm < 89): prepare_fp8_layer_for_marlin turns 128x128 block scales (fp32, [n/128, k/128]) into group scales
# of the model dtype, [k/128, n] (repeat_interleave over block_n): 2 bytes per 128 weights instead of 4 per 16,384;
# per-tensor / per-channel scales become one per output channel (negligible)
FP8_MARLIN_G128 = Scheme("fp8-marlin-g128", 1.0 + 2.0 / 128)


def as_fp8_marlin(q: QuantSpec) -> QuantSpec:
    """The checkpoint's FP8 linears as the Marlin path keeps them on a GPU without FP8 tensor cores."""
    def swap(s: Scheme | None) -> Scheme | None:
        return FP8_MARLIN_G128 if s is not None and s.name == "fp8-block128" else s

    return replace(q, default=swap(q.default), per_module={k: swap(v) or v for k, v in q.per_module.items()})


def awq_bits(config: Any) -> int | None:
    """The `w_bit` / `bits` of an AWQ checkpoint's quantization_config (SGLang's AWQConfig.from_config reads them in that
    order: srt/layers/quantization/awq/awq.py@0.5.15.post1; vLLM's AWQMarlinConfig alike), None for any other checkpoint."""
    q = config.get("quantization_config") if isinstance(config, Mapping) else None
    if not isinstance(q, Mapping) or str(q.get("quant_method", "")).lower() != "awq":
        return None
    bits = q.get("w_bit", q.get("bits"))
    return bits if isinstance(bits, int) and not isinstance(bits, bool) else None
