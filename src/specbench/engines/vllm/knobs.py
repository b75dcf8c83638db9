"""THE vLLM flag table: every `vllm serve` argument that shapes the memory plan, once.

One row per knob: the `VllmArgs` field, its spellings (the long one first, then vLLM's short forms; names of
vllm/engine/arg_utils.py::EngineArgs.add_cli_args@0.32.0), its type (vllm/utils/argparse_utils.py converters, in
values.py), the key of the engine's own `non-default args: {...}` dump (EngineArgs field), the matrix axis a fix of
it maps to, whether it is a BooleanOptionalAction (`--no-X` sets False), and whether the doctor's re-launch from a
dump carries it. Everything else reads this table: the argv parser (args.py), flag rewriting (launch.py), the
doctor's re-launch (`PLAN_KEYS`, `__init__.py`) and the runner's auto-fix (`fix_axis`, through VllmEngine).

The flags of a release that do NOT shape memory are the release's whole list (cli_flags/<release>.txt, written by
tools/engine/vllm_cli_flags.py from vLLM's own parser) minus this table; a flag in neither is unknown.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from specbench.engines.cli_flags import BaseKnob, FlagList, flag_list
from specbench.engines.vllm.values import human_readable_int, human_readable_int_or_auto, parse_speculative_config


@dataclass(frozen=True)
class Knob(BaseKnob):
    """A vLLM knob: `field` is the VllmArgs attribute, `dump_key` the EngineArgs name of its `non-default args` dump."""

    negatable: bool = False  # argparse.BooleanOptionalAction: `--no-<flag>` sets False
    replan: bool = False  # carried by the doctor's re-launch rebuilt from a dump (PLAN_KEYS)
    retired: bool = False  # not in the 0.32.0 list (an older release's flag): taken by its exact spelling

    @property
    def negations(self) -> tuple[str, ...]:
        return tuple("--no-" + f[2:] for f in self.flags if f.startswith("--")) if self.negatable else ()


# The order is the canonical command's (VllmArgs.to_argv: the values in this order, then the switches).
KNOBS: tuple[Knob, ...] = (
    Knob("model", ("--model",), str),
    Knob("tp", ("--tensor-parallel-size", "-tp"), int, "tensor_parallel_size", "tp", replan=True),
    Knob("pp", ("--pipeline-parallel-size", "-pp"), int, "pipeline_parallel_size", replan=True),
    Knob("dp", ("--data-parallel-size", "-dp"), int, "data_parallel_size"),
    Knob("gpu_memory_utilization", ("--gpu-memory-utilization",), float, axis="mem_fraction_static", replan=True),
    Knob("kv_cache_memory_bytes", ("--kv-cache-memory-bytes",), human_readable_int, replan=True),
    Knob("max_model_len", ("--max-model-len",), human_readable_int_or_auto, axis="context_length", replan=True),
    Knob("max_num_seqs", ("--max-num-seqs",), int, axis="max_running_requests", replan=True),
    Knob("max_num_batched_tokens", ("--max-num-batched-tokens",), human_readable_int, replan=True),
    Knob("block_size", ("--block-size",), int, replan=True),
    Knob("kv_cache_dtype", ("--kv-cache-dtype",), str, replan=True),
    Knob("dtype", ("--dtype",), str, replan=True),
    Knob("quantization", ("--quantization", "-q"), str, replan=True),
    Knob("speculative", ("--speculative-config", "-sc"), parse_speculative_config, "speculative_config"),
    # the short forms of three --speculative-config keys (engine/arg_utils.py::EngineArgs.add_cli_args@0.32.0,
    # merged by EngineArgs.create_speculative_config); args.py folds them into `speculative`
    Knob("spec_method", ("--spec-method",), str),
    Knob("spec_model", ("--spec-model",), str),
    Knob("spec_tokens", ("--spec-tokens",), int),
    Knob("mamba_cache_dtype", ("--mamba-cache-dtype",), str),
    Knob("mamba_ssm_cache_dtype", ("--mamba-ssm-cache-dtype",), str),
    Knob("mamba_cache_mode", ("--mamba-cache-mode",), str, replan=True),
    Knob("mamba_block_size", ("--mamba-block-size",), int, replan=True),
    Knob("num_gpu_blocks_override", ("--num-gpu-blocks-override",), int),
    # the device was chosen by `--device cpu` in older releases; 0.32.0 picks it from the platform
    Knob("device", ("--device",), str, retired=True),
    Knob("performance_mode", ("--performance-mode",), str),
    Knob("compilation_config", ("--compilation-config", "-cc"), str),
    # -O / -O0..3 / --optimization-level (config/vllm.py::OptimizationLevel@0.32.0: O0 no CUDA graphs, O1 piecewise
    # only, O2/O3 full and piecewise)
    Knob("optimization_level", ("--optimization-level",), str),
    # ModelConfig.hf_overrides (JSON): its rope / max_position_embeddings keys move the derived max model length
    Knob("hf_overrides", ("--hf-overrides",), str, replan=True),
    # CompilationConfig.max_cudagraph_capture_size's own flag (engine/arg_utils.py@0.32.0): the capture-list ceiling
    Knob("max_cudagraph_capture_size", ("--max-cudagraph-capture-size",), int),
    # the CPU swap space of older releases (gone from 0.32.0's parser)
    Knob("swap_space", ("--swap-space",), float, retired=True),
    Knob("cpu_offload_gb", ("--cpu-offload-gb",), float),
    Knob("enforce_eager", ("--enforce-eager",), None, negatable=True, replan=True),
    Knob("enable_prefix_caching", ("--enable-prefix-caching",), None, negatable=True, replan=True),
    Knob("enable_chunked_prefill", ("--enable-chunked-prefill",), None, negatable=True),
    Knob("disable_hybrid_kv_cache_manager", ("--disable-hybrid-kv-cache-manager",), None, negatable=True),
    Knob("language_model_only", ("--language-model-only",), None, negatable=True),
    Knob("enable_expert_parallel", ("--enable-expert-parallel",), None, negatable=True, replan=True),
)

# flag -> (knob, the value a switch spelling sets: True, or False for `--no-X`; None for a value flag)
BY_FLAG: dict[str, tuple[Knob, bool | None]] = {
    **{f: (k, None if k.type else True) for k in KNOBS for f in k.flags},
    **{f: (k, False) for k in KNOBS for f in k.negations},
}
BY_FIELD: dict[str, Knob] = {k.field: k for k in KNOBS}
_BY_KEY: dict[str, Knob] = {**{k.key: k for k in KNOBS}, **BY_FIELD}



def knob_for_key(key: str) -> Knob | None:
    """The knob an EngineArgs name of the engine's `non-default args` dump (or a VllmArgs field) belongs to."""
    return _BY_KEY.get(key)


# Engine arguments that shape memory; the launch argv rebuilt from a log's dump carries only these.
PLAN_KEYS: tuple[str, ...] = tuple(k.key for k in KNOBS if k.replan)

# Fix keys that are not flags but keys inside one (vllm/config/speculative.py::SpeculativeConfig).
_SUB_AXES = {"num_speculative_tokens": "num_draft_tokens"}

FLAG_LISTS = Path(__file__).with_name("cli_flags")


def release_flags(release: str | None = None) -> FlagList:
    """Every flag `vllm serve` of that release accepts (the newest list at or below it)."""
    return flag_list(FLAG_LISTS, release)


def spellings(flag: str) -> tuple[str, ...]:
    """Every spelling of the knob `flag` names, its `--no-` forms included (the flag alone when it is not a knob)."""
    hit = BY_FLAG.get(flag)
    return hit[0].flags + hit[0].negations if hit else (flag,)


def fix_axis(key: str) -> str | None:
    """The matrix axis a fix's key (a flag, an EngineArgs name or a VllmArgs field) sets; None: a plain flag."""
    name = key.lstrip("-").replace("-", "_")
    knob = _BY_KEY.get(name)
    return knob.axis if knob else _SUB_AXES.get(name)
