"""THE SGLang flag table: every server argument that shapes the memory plan, once.

One row per knob: the `SglangArgs` field, its spellings (the canonical one first; aliases of
sglang/srt/server_args.py::ServerArgs@0.5.12/0.5.15; fork-only spellings marked), its type, the key of the engine's
own argument dump (`server_args=ServerArgs(...)`), and the matrix axis a fix of it maps to. Everything else reads
this table: the argv parser (args.py), flag rewriting (launch.py), the doctor's re-launch (`__init__.py`), the
fixes (fixes.py) and the runner's auto-fix (through `SglangEngine.fix_axis`).

The flags of a release that do NOT shape memory are the release's whole list (cli_flags/<release>.txt, written by
tools/engine/sglang_cli_flags.py from the release's server_args.py) minus this table; a flag in neither is unknown.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from specbench.engines.cli_flags import BaseKnob, FlagList, flag_list


@dataclass(frozen=True)
class Knob(BaseKnob):
    """An SGLang knob: `field` is the SglangArgs attribute, `dump_key` the ServerArgs field of its dump."""

    fork_only: bool = False  # in no release whose flag list we hold (DDTree's open PR, a later release's flag)


KNOBS: tuple[Knob, ...] = (
    Knob("model_path", ("--model-path", "--model"), str),
    Knob("tp", ("--tp-size", "--tensor-parallel-size", "--tp"), int, "tp_size", "tp"),
    Knob("dp", ("--dp-size", "--data-parallel-size", "--dp"), int, "dp_size"),
    Knob("pp", ("--pp-size", "--pp"), int, "pp_size"),
    Knob("ep", ("--ep-size", "--expert-parallel-size", "--ep"), int, "ep_size"),
    Knob("mem_fraction_static", ("--mem-fraction-static", "--mem-frac"), float, axis="mem_fraction_static"),
    Knob("max_running_requests", ("--max-running-requests",), int, axis="max_running_requests"),
    Knob("context_length", ("--context-length",), int, axis="context_length"),
    Knob("chunked_prefill_size", ("--chunked-prefill-size",), int),
    Knob("max_prefill_tokens", ("--max-prefill-tokens",), int),
    Knob("max_total_tokens", ("--max-total-tokens",), int),
    Knob("page_size", ("--page-size",), int),
    Knob("kv_cache_dtype", ("--kv-cache-dtype",), str),
    Knob("swa_full_tokens_ratio", ("--swa-full-tokens-ratio",), float),
    Knob("disable_hybrid_swa_memory", ("--disable-hybrid-swa-memory",), None),
    Knob("dtype", ("--dtype",), str),
    Knob("quantization", ("--quantization",), str),
    Knob("load_format", ("--load-format",), str),
    Knob("speculative_algorithm", ("--speculative-algorithm", "--speculative-algo"), str),
    Knob("speculative_num_draft_tokens", ("--speculative-num-draft-tokens",), int, axis="num_draft_tokens"),
    Knob("speculative_dflash_block_size", ("--speculative-dflash-block-size",), int, axis="num_draft_tokens"),
    Knob("speculative_ddtree_budget", ("--speculative-ddtree-budget",), int, axis="ddtree_budget", fork_only=True),
    Knob("speculative_num_steps", ("--speculative-num-steps",), int),
    Knob("speculative_eagle_topk", ("--speculative-eagle-topk",), int),
    Knob("speculative_draft_model_path", ("--speculative-draft-model-path", "--speculative-draft-model",
                                          "--speculative-draft"), str),
    # not in the 0.5.12 or 0.5.15 parsers (a later release's flag): taken by its exact spelling
    Knob("speculative_draft_kv_cache_dtype", ("--speculative-draft-kv-cache-dtype",), str, fork_only=True),
    # renamed in 0.5.14 (`--mamba-radix-cache-strategy`); both spellings set the one strategy
    Knob("mamba_strategy", ("--mamba-scheduler-strategy", "--mamba-radix-cache-strategy"), str,
         "mamba_scheduler_strategy"),
    Knob("mamba_full_memory_ratio", ("--mamba-full-memory-ratio",), float),
    Knob("max_mamba_cache_size", ("--max-mamba-cache-size",), int),
    Knob("mamba_ssm_dtype", ("--mamba-ssm-dtype",), str),
    Knob("cuda_graph_max_bs", ("--cuda-graph-max-bs",), int),
    Knob("attention_backend", ("--attention-backend",), str),
    Knob("linear_attn_backend", ("--linear-attn-backend",), str),
    Knob("cuda_graph_backend_decode", ("--cuda-graph-backend-decode",), str),
    Knob("cuda_graph_backend_prefill", ("--cuda-graph-backend-prefill",), str),
    Knob("enable_dp_attention", ("--enable-dp-attention",), None),
    Knob("disable_radix_cache", ("--disable-radix-cache",), None),
    Knob("disable_overlap_schedule", ("--disable-overlap-schedule",), None),
    Knob("disable_cuda_graph", ("--disable-cuda-graph",), None),
    Knob("enable_linear_replayssm_spec", ("--enable-linear-replayssm-spec",), None, fork_only=True),
    Knob("language_only", ("--language-only", "--language-model-only"), None),
    Knob("skip_tokenizer_init", ("--skip-tokenizer-init",), None),
    Knob("enable_torch_compile", ("--enable-torch-compile",), None),
    Knob("disable_piecewise_cuda_graph", ("--disable-piecewise-cuda-graph",), None),
)

BY_FLAG: dict[str, Knob] = {f: k for k in KNOBS for f in k.flags}

# Dump keys the doctor's re-launch carries: every knob's, plus the renamed strategy's new name.
PLAN_KEYS: tuple[str, ...] = tuple(dict.fromkeys(
    [k.key for k in KNOBS if k.field not in ("language_only", "skip_tokenizer_init",
                                                             "enable_torch_compile", "disable_piecewise_cuda_graph",
                                                             "cuda_graph_backend_decode",
                                                             "cuda_graph_backend_prefill",
                                                             "speculative_ddtree_budget")]
    + ["mamba_radix_cache_strategy"]))

FLAG_LISTS = Path(__file__).with_name("cli_flags")


def release_flags(release: str | None) -> FlagList:
    """Every flag of that SGLang release (the newest list at or below it)."""
    return flag_list(FLAG_LISTS, release)


def spellings(flag: str) -> tuple[str, ...]:
    """Every spelling of the knob `flag` names (the flag alone when it is not a knob)."""
    knob = BY_FLAG.get(flag)
    return knob.flags if knob else (flag,)


def fix_field(flag: str) -> str | None:
    """The SglangArgs field a fix's flag sets."""
    knob = BY_FLAG.get(flag)
    return knob.field if knob else None


def fix_axis(key: str) -> str | None:
    """The matrix axis a fix's key (a flag, or a dump key) sets; None: set it as a plain flag."""
    knob = BY_FLAG.get(key) or BY_FLAG.get("--" + key.replace("_", "-")) or next(
        (k for k in KNOBS if k.key == key), None)
    return knob.axis if knob else None
