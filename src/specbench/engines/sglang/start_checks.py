"""SGLang's non-memory start checks: what ends a boot before (or while) the weights load, whatever the memory.

Each check returns the engine's own error text (or None); `first_failure` runs them in the engine's order. Read
from sglang 0.5.12.post1 and 0.5.15.post1 (server_args.py, arg_groups/speculative_hook.py, configs/model_config.py,
speculative/spec_info.py, models/*.py); releases after 0.5.17 are assumed to keep them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from specbench.engines import versions
from specbench.engines.sglang import registry
from specbench.engines.sglang.args import KV_CACHE_DTYPE_CHOICES, SglangArgs
from specbench.specs import assumed as A
from specbench.specs.model import draft_vocab_warning, moe_without_experts_warning
from specbench.specs.model_types import ModelSpec
from specbench.specs.quant import awq_bits

# speculative/spec_info.py::SpeculativeAlgorithm members; NEXTN is rewritten to EAGLE by the speculative hook
# before from_string; DDTREE is the unreleased PR #29907 this planner also follows
SPEC_ALGORITHMS = ("DFLASH", "EAGLE", "EAGLE3", "FROZEN_KV_MTP", "STANDALONE", "NGRAM", "NEXTN", "DDTREE")
MAMBA_TRACK_INTERVAL = 256  # server_args.py default --mamba-track-interval (0.5.12.post1, 0.5.15.post1)
# keys of utils/hf_transformers/common.py::CONTEXT_LENGTH_KEYS@0.5.15.post1, in the engine's order
CONTEXT_LENGTH_KEYS = ("max_sequence_length", "seq_length", "max_seq_len", "model_max_length",
                       "max_position_embeddings")


@dataclass(frozen=True)
class StartFailure:
    error: str
    check: str     # which check: context_length, draft_context_length, dflash_block, divisibility, ...


def derived_context_length(config: Mapping[str, Any]) -> int:
    """utils/hf_transformers/common.py::get_context_length@0.5.15.post1 on the text config: the first of
    CONTEXT_LENGTH_KEYS, times rope_scaling.factor unless the scaling has original_max_position_embeddings or is
    llama3; 2048 when none is set."""
    text = config.get("text_config")
    cfg: Mapping[str, Any] = {**config, **text} if isinstance(text, Mapping) else config
    rs = cfg.get("rope_scaling")
    factor = 1.0
    if isinstance(rs, Mapping) and rs:
        factor = float(rs.get("factor", 1) or 1)
        if "original_max_position_embeddings" in rs or rs.get("rope_type") == "llama3":
            factor = 1.0
    for k in CONTEXT_LENGTH_KEYS:
        if cfg.get(k) is not None:
            return int(factor * int(cfg[k]))
    return 2048


def _env_on(args: SglangArgs, name: str) -> bool:
    return dict(args.env).get(name, "").lower() in ("1", "true", "yes")


def _context_msg(reason: str, asked: int, derived: int) -> str:
    """configs/model_config.py::ModelConfig._derive_context_length@0.5.15.post1 (same text in 0.5.12.post1)."""
    return (f"ValueError: Warning: {reason} context_length ({asked}) is greater than the derived context_length "
            f"({derived}). This may lead to incorrect model outputs or CUDA errors. Note that the derived "
            f"context_length may differ from max_position_embeddings in the model's config. To allow overriding "
            f"this maximum, set the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1")


def check_choices(args: SglangArgs, dtypes: bool = True, release: str | None = None) -> StartFailure | None:
    """argparse `choices=` (server_args.py): the server exits before anything starts. `dtypes=False` checks the
    speculative algorithm only (the dtype lists of releases not read here may be longer). --dtype is refused by the
    argv parser already (args.py::_check_choices: a user's typo, one line), so only --kv-cache-dtype is here."""
    value = args.kv_cache_dtype
    if dtypes and value is not None and value not in KV_CACHE_DTYPE_CHOICES:
        opts = ", ".join(f"'{c}'" for c in KV_CACHE_DTYPE_CHOICES)
        return StartFailure(f"error: argument --kv-cache-dtype: invalid choice: '{value}' (choose from {opts})",
                            "choices")
    algo = args.spec_algorithm
    known = registry.spec_algorithms(release)
    if algo is not None and algo not in SPEC_ALGORITHMS and known.refuses(algo):
        names = ", ".join(sorted(known.names - {"DDTREE"}))
        return StartFailure(f"ValueError: Unknown speculative algorithm name: {args.speculative_algorithm} "
                            f"(sglang {known.release} knows: {names})", "speculative_algorithm")
    return check_quantization_choice(args, release)


def check_quantization_choice(args: SglangArgs, release: str | None) -> StartFailure | None:
    """argparse `choices=QUANTIZATION_CHOICES` of --quantization (server_args.py@0.5.12.post1 / 0.5.15.post1,
    arg_groups/choices.py@0.5.23; the per-release lists in engines/sglang/quant_methods/)."""
    q = args.quantization
    known = registry.quant_methods(release)
    if q is None or not known.refuses(q):
        return None
    opts = ", ".join(f"'{c}'" for c in sorted(known.names))
    return StartFailure(f"error: argument --quantization: invalid choice: '{q}' (choose from {opts})", "choices")


# `--quantization` values a quantized checkpoint of method M accepts besides M itself: configs/model_config.py::
# ModelConfig._verify_quantization@0.5.15.post1 (`compatible_quantization_methods`, and the `override_quantization_method`
# of AWQMarlinConfig / GPTQMarlinConfig / ModelOptFp4Config, which turn awq / gptq / modelopt checkpoints into their
# Marlin / FP4 methods)
COMPATIBLE_QUANTIZATION = {
    "awq": ("awq_marlin", "marlin", "moe_wna16"), "gptq": ("gptq_marlin", "marlin", "moe_wna16"),
    "modelopt": ("modelopt_fp8", "modelopt_fp4", "modelopt_mixed", "petit_nvfp4"), "fp8": ("nvfp4_online",),
    "compressed-tensors": ("w8a8_int8", "w8a8_fp8", "auto-round-int8"),
    "compressed_tensors": ("w8a8_int8", "w8a8_fp8", "auto-round-int8"), "auto-round": ("auto-round-int8",),
}
# `--quantization` values whose config class reads a file of the checkpoint (get_config_filenames non-empty in
# layers/quantization/*.py@0.5.15.post1): on a checkpoint without it, model_loader/weight_utils.py::get_quant_config
# raises "Cannot find the config file for X"
NEEDS_QUANT_FILE = ("awq", "awq_marlin", "gptq", "gptq_marlin", "marlin", "moe_wna16", "auto-round", "petit_nvfp4",
                    "qoq")


def check_quantization(args: SglangArgs, m: ModelSpec) -> StartFailure | None:
    """--quantization against the checkpoint's own quantization (configs/model_config.py::_verify_quantization and
    model_loader/weight_utils.py::get_quant_config@0.5.15.post1, their texts)."""
    q = (args.quantization or "").lower()
    if not q or q == "unquant":
        return None
    method = (m.quant.method or "").lower()
    if method and q != method and q not in COMPATIBLE_QUANTIZATION.get(method, ()):
        return StartFailure("ValueError: Quantization method specified in the model config "
                            f"({method}) does not match the quantization method specified in the `quantization` "
                            f"argument ({q}).", "quantization")
    if not method and q in NEEDS_QUANT_FILE:
        return StartFailure(f"ValueError: Cannot find the config file for {q}", "quantization")
    return None


def check_architecture(m: ModelSpec, release: str | None) -> StartFailure | None:
    """The release's model registry (sglang/srt/models/*.py EntryClass, listed in engines/sglang/architectures/): an
    architecture it has no class for falls back to the Transformers implementation, which SGLang refuses unless
    that class is backend-compatible (model_loader/utils.py::resolve_transformers_arch@0.5.15.post1, its text)."""
    known = registry.architectures(release)
    if not m.architecture or m.architecture == "unknown" or not known.refuses(m.architecture):
        return None
    return StartFailure(f"ValueError: {m.architecture} has no SGlang implementation and the Transformers "
                        "implementation is not compatible with SGLang.", "architecture")


def check_context(args: SglangArgs, m: ModelSpec, draft: ModelSpec | None) -> StartFailure | None:
    """--context-length above the target's derived length, then the drafter's derived length below the target's
    context (speculative workers build the drafter's ModelConfig with the target's context_len:
    speculative/eagle_worker_v2.py / dflash_worker_v2.py@0.5.15.post1; model_runner.py builds it first for EAGLE/
    DFLASH KV sizing). SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 (or SGLANG_IS_IN_CI) turns both into warnings."""
    if _env_on(args, "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN") or _env_on(args, "SGLANG_IS_IN_CI"):
        return None
    derived = derived_context_length(m.raw)
    if args.context_length is not None and args.context_length > derived:
        return StartFailure(_context_msg("User-specified", args.context_length, derived), "context_length")
    target_ctx = args.context_length or derived
    if draft is not None and args.spec_algorithm in ("EAGLE", "EAGLE3", "STANDALONE", "DFLASH", "DDTREE",
                                                      "FROZEN_KV_MTP"):
        d = derived_context_length(draft.raw)
        if target_ctx > d:
            return StartFailure(_context_msg("Target model's", target_ctx, d), "draft_context_length")
    return None


def check_dflash_block(args: SglangArgs) -> StartFailure | None:
    """arg_groups/speculative_hook.py::_handle_dflash@0.5.15.post1."""
    if args.spec_algorithm != "DFLASH" or args.speculative_dflash_block_size is None:
        return None
    b = int(args.speculative_dflash_block_size)
    if b <= 0:
        return StartFailure(f"ValueError: DFLASH requires --speculative-dflash-block-size to be positive, got {b}.",
                            "dflash_block")
    d = args.speculative_num_draft_tokens
    if d is not None and int(d) != b:
        return StartFailure(
            "ValueError: Both --speculative-num-draft-tokens and --speculative-dflash-block-size are set but they "
            f"differ. For DFLASH they must match. speculative_num_draft_tokens={d}, speculative_dflash_block_size={b}.",
            "dflash_block")
    return None


def check_divisibility(args: SglangArgs, m: ModelSpec, draft: ModelSpec | None) -> StartFailure | None:
    """DP attention needs tp % dp == 0 (server_args.py::_handle_data_parallelism); the attention layers assert
    heads % attn_tp == 0 and KV heads % attn_tp == 0 (or attn_tp % KV heads == 0 when fewer)
    (models/qwen3.py / llama.py / qwen2.py::*Attention.__init__, bare asserts); a DFLASH drafter the same
    with its own message (models/dflash.py::DFlashAttention.__init__@0.5.15.post1)."""
    tp = max(1, args.tp)
    if args.enable_dp_attention and tp % max(1, args.dp):
        return StartFailure(f"AssertionError (assert self.tp_size % self.dp_size == 0): --tp {tp}, --dp {args.dp}",
                            "divisibility")
    attn_tp = tp // (args.dp if args.enable_dp_attention else 1) or 1
    for who, spec in (("target", m), ("draft", draft)):
        if spec is None or not spec.num_attention_heads or spec.mla is not None:
            continue
        h, kv = spec.num_attention_heads, spec.num_kv_heads or spec.num_attention_heads
        dflash = who == "draft" and spec.draft is not None and spec.draft.kind == "dflash"
        if h % attn_tp:
            text = (f"DFlashAttention requires total_num_heads divisible by tp_size. total_num_heads={h}, "
                    f"tp_size={attn_tp}.") if dflash else "assert self.total_num_heads % tp_size == 0"
            return StartFailure(f"AssertionError: {text} ({spec.name}: {h} attention heads, attention TP {attn_tp})",
                                "divisibility")
        if (kv >= attn_tp and kv % attn_tp) or (kv < attn_tp and attn_tp % kv):
            text = "assert self.total_num_kv_heads % tp_size == 0" if kv >= attn_tp \
                else "assert tp_size % self.total_num_kv_heads == 0"
            return StartFailure(f"AssertionError: {text} ({spec.name}: {kv} KV heads, attention TP {attn_tp})",
                                "divisibility")
    return None


def check_expert_parallel(args: SglangArgs, m: ModelSpec) -> StartFailure | None:
    """MoE sharding under --ep-size / --tp-size, for the target's FusedMoE layers:
    - the expert groups are built from moe_tp_size = tp_size // ep_size (distributed/parallel_state.py::
      initialize_model_parallel@0.5.15.post1); server_args.py has no check of its own, so an ep_size that does
      not divide tp_size is refused here, as the planner's reading (no engine message to quote);
    - layers/moe/fused_moe_triton/layer.py::FusedMoE.__init__@0.5.15.post1: `assert (num_experts -
      num_shared_slots) % self.moe_ep_size == 0` and `assert intermediate_size % self.moe_tp_size == 0`;
    - server_args.py::_handle_model_specific_adjustments@0.5.15.post1: gpt-oss on the triton_kernel MoE backend
      (the Hopper default, arg_groups/overrides.py::_gpt_oss_overrides) asserts ep_size == 1."""
    if m.moe is None:
        return None
    tp, ep = max(1, args.tp), max(1, args.ep)
    if ep > 1 and (ep > tp or tp % ep):
        return StartFailure(f"--ep-size {ep} does not divide --tp-size {tp}: SGLang builds the expert groups from "
                            f"moe_tp_size = tp_size // ep_size = {tp // ep}", "expert_parallel")
    if ep > 1 and m.architecture == "GptOssForCausalLM":
        return StartFailure("AssertionError: Triton kernel MoE is only supported when ep_size == 1",
                            "expert_parallel")
    moe_tp = tp // ep
    if m.moe.num_experts % ep:
        return StartFailure(f"AssertionError (assert (num_experts - num_shared_slots) % self.moe_ep_size == 0): "
                            f"{m.name}: {m.moe.num_experts} experts, ep_size {ep}", "expert_parallel")
    if m.moe.moe_intermediate_size % moe_tp:
        return StartFailure(f"AssertionError (assert intermediate_size % self.moe_tp_size == 0): {m.name}: "
                            f"moe_intermediate_size {m.moe.moe_intermediate_size}, moe_tp_size {moe_tp}",
                            "expert_parallel")
    return None


# model classes with a `remap_prefix` (model_loader/loader.py::_get_quantization_config@0.5.15.post1 passes it on)
REMAP_PREFIX_ARCHS = ("NemotronHForCausalLM", "NemotronHPuzzleForCausalLM")


def check_quant_config(m: ModelSpec) -> StartFailure | None:
    """model_loader/weight_utils.py::get_quant_config@0.5.15.post1: for a model class with `remap_prefix`
    (NemotronH) it rewrites `config["quantization"]["exclude_modules"]` of hf_quant_config.json, a KeyError when
    the file has no such key (seen on the H200: tests/data/quant-configs/README.md, the trimmed bundled copy)."""
    q = m.quant
    if q.source == "hf_quant_config.json" and not q.lists_exclusions and m.architecture in REMAP_PREFIX_ARCHS:
        return StartFailure("KeyError: 'exclude_modules' (hf_quant_config.json has no `exclude_modules` list; "
                            "SGLang remaps it for this model class)", "quant_config")
    return None


def check_mamba(args: SglangArgs, m: ModelSpec, strategy: str | None, draft_tokens: int) -> StartFailure | None:
    """server_args.py::_validate_mamba_no_buffer / _validate_mamba_extra_buffer@0.5.15.post1 (0.5.12.post1: the
    same rules in _handle_mamba_radix_cache) for a hybrid model whose radix cache is on."""
    if not m.linear_layers or strategy is None or args.disable_radix_cache:
        return None
    page = args.page_size
    if strategy == "no_buffer" and page not in (None, 1):
        return StartFailure(f"AssertionError: no_buffer only supports page_size=1. (--page-size {page})",
                            "mamba_page_size")
    if strategy.startswith("extra_buffer"):
        if draft_tokens and strategy == "extra_buffer_lazy":
            return StartFailure("AssertionError: extra_buffer_lazy unsupported with spec.", "mamba_strategy")
        if draft_tokens and MAMBA_TRACK_INTERVAL < draft_tokens:
            return StartFailure(f"AssertionError (assert view.mamba_track_interval >= view.speculative_num_draft_"
                                f"tokens): {MAMBA_TRACK_INTERVAL} < {draft_tokens}", "mamba_track_interval")
        if page and MAMBA_TRACK_INTERVAL % page:
            return StartFailure(f"AssertionError: mamba_track_interval {MAMBA_TRACK_INTERVAL} must be divisible by "
                                f"page_size {page}", "mamba_page_size")
    return None


@dataclass(frozen=True)
class StartOutcome:
    failure: StartFailure | None                # the first check that stops the start
    assumed: tuple[str, ...] = ()               # failures of checks that read a stand-in's assumption: warnings


# the field groups each model check reads (specs/assumed.py): a failure of one of them on an assumed field is a
# warning, not the verdict
_READS: dict[str, tuple[str, ...]] = {
    "quantization": (A.QUANTIZATION,), "context": (A.CONTEXT,), "divisibility": (A.SHAPES,),
    "architecture": (A.ARCHITECTURE,), "expert_parallel": (A.SHAPES,), "quant_config": (A.QUANTIZATION,),
    "awq_bits": (A.QUANTIZATION,), "draft_model": (A.SHAPES, A.ARCHITECTURE),
}


def start_outcome(args: SglangArgs, m: ModelSpec, draft: ModelSpec | None,
                  version_text: str | None = None) -> StartOutcome:
    """The checks that run before any weight (argparse, server_args, model configs), in the engine's order. The
    `choices=` lists were read in 0.5.12.post1 / 0.5.15.post1 only: releases after 0.5.17 skip that check. A model
    check whose failure rests on a field a stand-in assumed gives a warning and the next check runs."""
    rel = versions.parse_release(version_text)
    read = rel is None or rel <= (0, 5, 17)
    checks = (("flags", lambda: check_choices(args, dtypes=read, release=version_text)),
              ("flags", lambda: check_dflash_block(args)), ("quantization", lambda: check_quantization(args, m)),
              ("context", lambda: check_context(args, m, draft)),
              ("divisibility", lambda: check_divisibility(args, m, draft)),
              ("architecture", lambda: check_architecture(m, version_text)),
              ("expert_parallel", lambda: check_expert_parallel(args, m)),
              ("quant_config", lambda: check_quant_config(m)), ("awq_bits", lambda: check_awq_bits(m)),
              ("draft_model", lambda: check_draft_model(args, m, draft)))
    assumed: list[str] = []
    for kind, check in checks:
        f = check()
        if f is None:
            continue
        warning = A.demoted(f.error, _READS.get(kind, ()), (m, draft))
        if warning is None:
            return StartOutcome(f, tuple(assumed))
        assumed.append(warning)
    return StartOutcome(None, tuple(assumed))


def first_failure(args: SglangArgs, m: ModelSpec, draft: ModelSpec | None,
                  version_text: str | None = None) -> StartFailure | None:
    return start_outcome(args, m, draft, version_text).failure


# -- the model's own config and the drafter against its target (#23). Read from sglang 0.5.15.post1.

def check_awq_bits(m: ModelSpec) -> StartFailure | None:
    """srt/layers/quantization/awq/awq.py::AWQConfig.__init__@0.5.15.post1: only 4-bit AWQ."""
    bits = awq_bits(m.raw)
    if bits is not None and bits != 4:
        return StartFailure("ValueError: Currently, only 4-bit weight quantization is supported for AWQ, but got "
                            f"{bits} bits.", "awq_bits")
    return None


def _eagle(args: SglangArgs) -> bool:
    return (args.speculative_algorithm or "").upper() in ("EAGLE", "EAGLE3", "NEXTN")


def check_draft_model(args: SglangArgs, m: ModelSpec, draft: ModelSpec | None) -> StartFailure | None:
    """An EAGLE / EAGLE3 drafter takes the target's embedding (and, for EAGLE, its lm_head) whatever its own
    width: speculative/eagle_worker_v2.py::EAGLEWorkerV2 calls `set_embed_and_head` (EAGLE) or `set_embed`
    (EAGLE3) with the target's tensors@0.5.15.post1. A drafter whose hidden size differs cannot read them; a draft
    class without those methods (a non-EAGLE architecture) ends the boot with Python's AttributeError."""
    if draft is None or not _eagle(args):
        return None
    if draft.hidden_size != m.hidden_size:
        return StartFailure(f"the drafter's hidden_size {draft.hidden_size} is not the target's {m.hidden_size}: "
                            "SGLang gives an EAGLE drafter the target's embedding (eagle_worker_v2.py: set_embed / "
                            "set_embed_and_head), which the drafter's layers cannot read", "draft_hidden_size")
    arch = draft.architecture
    if not (arch.endswith("ForCausalLM") or "Eagle" in arch or "MTP" in arch or "NextN" in arch):
        method = "set_embed" if (args.speculative_algorithm or "").upper() == "EAGLE3" else "set_embed_and_head"
        return StartFailure(f"AttributeError: '{arch}' object has no attribute '{method}' (the drafter is no "
                            "EAGLE draft model)", "draft_architecture")
    return None


def model_warnings(args: SglangArgs, m: ModelSpec, draft: ModelSpec | None) -> tuple[str, ...]:
    """What SGLang serves without a word but the operator should hear: MoE top-k 0 (no start check reads
    `num_experts_per_tok`: srt/layers/moe/topk.py::TopK takes it as given@0.5.15.post1) and a drafter whose
    vocabulary is not the target's (EAGLE3 drafters map theirs through `d2t`; any other gets the target's
    lm_head)."""
    out = []
    if m.moe is not None and m.moe.experts_per_tok <= 0:
        out.append(f"the config routes each token to {m.moe.experts_per_tok} experts (num_experts_per_tok): SGLang "
                   "starts, but every MoE layer adds nothing; the config is wrong")
    vocab = draft_vocab_warning(m, draft)
    if (no_experts := moe_without_experts_warning(m)) is not None:
        out.append(no_experts)
    return (*out, vocab) if vocab else tuple(out)
