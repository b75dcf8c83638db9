"""SGLang memory formulas shared by every rule set. Pure functions; each names the engine source it mirrors.

Paths are inside the `sglang` package (wheels 0.5.12.post1, 0.5.15.post1 and 0.5.23 read for this module).
"GB" in SGLang's logs is GiB (memory_pool.py: GB = 1024**3).
"""

from __future__ import annotations

from dataclasses import dataclass

from specbench.engines import versions
from specbench.engines.sglang.args import SglangArgs
from specbench.errors import FlagError
from specbench.specs import dtypes
from specbench.specs.gpu import GpuSpec
from specbench.specs.model_types import ModelSpec

MIB = float(1 << 20)

Version = versions.Version


# the releases the rule sets were read from (module docstring); a newer release is planned with the newest
SGLANG_RULE_SETS = ("0.5.12", "0.5.15", "0.5.23")
NEWEST_SGLANG = SGLANG_RULE_SETS[-1]


# --------------------------------------------------------------------------------------------- dtypes
def _sglang_dtype(n: str) -> str:
    """SGLang's spellings onto specs/dtypes.py: `auto` is the bf16 default; any fp8*/float8*/mxfp8* is one byte and
    any fp4*/nvfp4*/float4* (fp4_e2m1, ...) one byte per packed pair
    (sglang/srt/model_executor/model_runner.py::ModelRunner.configure_kv_cache_dtype@0.5.15.post1: torch.float8_*,
    torch.float4_e2m1fn_x2)."""
    if n == "auto":
        return "bfloat16"
    if n.startswith(("fp8", "float8", "mxfp8")):
        return "fp8"
    if n.startswith(("fp4", "nvfp4", "float4")):
        return "fp4"
    return n


def dtype_bytes(name: str) -> float:
    n = dtypes.canonical(name)
    spelled = _sglang_dtype(n)
    return dtypes.dtype_bytes(name, {n: spelled} if spelled != n else None)


def kv_dtype(args: SglangArgs, m: ModelSpec) -> str:
    """--kv-cache-dtype; `auto` is the model dtype, or fp8_e4m3 when the checkpoint's kv_cache_quant_algo is FP8
    (sglang/srt/mem_cache/kv_cache_dtype.py; ModelOpt exports)."""
    d = (args.kv_cache_dtype or "auto").lower()
    if d == "auto":
        if (m.quant.kv_cache_quant_algo or "").upper() == "FP8":
            return "fp8_e4m3"
        return "bfloat16" if m.dtype in ("bfloat16", "bf16", "auto") else m.dtype
    if d in ("fp8", "fp8_e4m3", "fp8_e5m2", "mxfp8", "fp4_e2m1", "nvfp4", "bf16", "bfloat16", "fp16", "float16"):
        return d
    raise FlagError(f"--kv-cache-dtype: unknown value {args.kv_cache_dtype!r}")


# --------------------------------------------------------------------------------------------- defaults
@dataclass(frozen=True)
class Defaults:
    chunked_prefill_size: int
    decode_max_bs: int
    prefill_buckets: int
    mem_fraction_static: float
    reserved_mb: float
    graph_reserve_mb: float


def prefill_capture_sizes(max_tokens: int) -> list[int]:
    """server_args.py::_generate_piecewise_cuda_graph_tokens (0.5.12) = _generate_prefill_cuda_graph_batch_sizes
    (0.5.15) = arg_groups/cuda_graph_hook.py::generate_prefill_cuda_graph_batch_sizes (0.5.23)."""
    sizes = (list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32))
             + list(range(576, 1025, 64)) + list(range(1280, 4097, 256)) + list(range(4608, max_tokens + 1, 512)))
    return [x for x in sizes if x <= max_tokens]


def resolve_defaults(args: SglangArgs, m: ModelSpec, gpu: GpuSpec, version: Version) -> Defaults:
    """server_args.py::_handle_gpu_memory_settings (0.5.12, 0.5.15) / arg_groups/memory_hook.py::
    handle_gpu_memory_settings (0.5.23).

    Chunked prefill and decode cuda-graph max_bs by GPU memory (MiB; the 20-35 GiB row changed from 2048 / 24|80 to
    4096 / 48|160 in the 0.5.18+ code); then, if mem_fraction_static is unset, reserved (MB) = 512 + 1.5·max(cps,2048)
    + 2·decode_max_bs (decode graphs on) + tp·pp/8·1024 + DP-attention terms + 8·#prefill buckets (prefill graphs
    on; 1536 for MLA), floored at 10 GiB on > 60 GiB cards; up to 0.5.13 a speculative server adds 4096 MB
    (6144 STANDALONE, none for NGRAM) after the floor. f = round((gpu_mem − reserved)/gpu_mem, 3), then the VLM
    factor (adjust_mem_fraction_for_vlm).
    """
    g = gpu.total_mib
    tp, pp = args.tp, args.pp
    if g < 20 * 1024:
        cps, bs = 2048, (8, 8)
    elif g < 35 * 1024:
        cps, bs = ((4096, (48, 160)) if version >= (0, 5, 18) else (2048, (24, 80)))
    elif g < 60 * 1024:
        cps, bs = 4096, (32, 160)
    elif g < 160 * 1024:
        cps, bs = 8192, (256, 512)
    else:
        cps, bs = 16384, (512, 512)
    if args.chunked_prefill_size is not None:
        cps = args.chunked_prefill_size
    max_bs = bs[0] if tp < 4 else bs[1]
    if args.cuda_graph_max_bs is not None:
        max_bs = args.cuda_graph_max_bs
    elif args.max_running_requests is not None:
        max_bs = min(max_bs, args.max_running_requests)
    spec = args.spec_algorithm is not None
    decode_graphs = not args.disable_cuda_graph and (args.cuda_graph_backend_decode or "") != "disabled"
    prefill_graphs = not args.disable_piecewise_cuda_graph and not args.disable_cuda_graph \
        and (args.cuda_graph_backend_prefill or "") != "disabled"
    if m.is_mla:
        pmax = min(8192, cps) if version >= (0, 5, 18) else 2048
    else:
        pmax = cps
    if args.max_total_tokens is not None:
        pmax = min(pmax, args.max_total_tokens)
    if args.context_length is not None:
        pmax = min(pmax, args.context_length)
    prefill_bs = len(prefill_capture_sizes(max(pmax, 0)))
    graph = 0.0
    if decode_graphs:
        graph += 2 * max_bs
    if args.enable_dp_attention:
        graph += 3 * max_bs * args.dp + (1.5 * max_bs * args.dp if max_bs > 300 else 0)
    if prefill_graphs:
        graph += 1536 if m.is_mla else 8 * prefill_bs
    act = max(cps if cps > 0 else (args.max_prefill_tokens or 16384), 2048)
    reserved = 512 + 1.5 * act + tp * pp / 8 * 1024 + graph
    if g > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    if version <= (0, 5, 13) and spec and args.spec_algorithm != "NGRAM":
        reserved += 6144 if args.spec_algorithm == "STANDALONE" else 4096
    f = round((g - reserved) / g, 3)
    if m.is_multimodal and not args.language_only:
        v = m.raw.get("vision_config") or {}
        lv = int(v.get("num_hidden_layers", 24))  # getattr(vision_config, "num_hidden_layers", 24): `depth` is not read
        hv = int(v.get("hidden_size", 1024))
        factor = min(max(1 - 0.1 * (lv * hv * hv / (24 * 1024 * 1024) - 1), 0.8), 1.05)
        f = f * 0.95 * factor  # adjust_mem_fraction_for_vlm; not re-rounded
    return Defaults(cps, max_bs, prefill_bs, f, reserved, graph)


# --------------------------------------------------------------------------------------------- speculative
@dataclass(frozen=True)
class SpecSetup:
    algorithm: str | None        # EAGLE, EAGLE3, NEXTN->EAGLE, DFLASH, DDTREE, STANDALONE, NGRAM
    num_draft_tokens: int        # D (0 without spec)
    steps: int
    topk: int
    draft_layers: int            # Ld for the KV cell
    unreleased: bool = False     # DDTREE follows an open upstream PR


def resolve_spec(args: SglangArgs, m: ModelSpec, draft: ModelSpec | None) -> SpecSetup:
    """arg_groups/speculative_hook.py (0.5.14+) / server_args.py::_handle_speculative_decoding (<= 0.5.13)."""
    algo = args.spec_algorithm
    if algo is None:
        return SpecSetup(None, 0, 0, 0, 0)
    if algo == "NEXTN":
        algo = "EAGLE"
    if algo in ("EAGLE", "EAGLE3", "STANDALONE", "FROZEN_KV_MTP"):
        steps, topk, d = args.speculative_num_steps, args.speculative_eagle_topk, args.speculative_num_draft_tokens
        if steps is None:
            # _auto_choose_speculative_params: (5,4,8) for Llama/Grok EAGLE, else (3,1,4)
            steps, topk, d = (5, 4, 8) if m.architecture.startswith(("Llama", "Grok")) and algo != "STANDALONE" \
                else (3, 1, 4)
        topk = topk or 1
        if topk == 1:
            d = steps + 1
        d = d or steps + 1
        if draft is not None:
            ld = max(draft.num_layers, len(draft.attention_layers))
        else:  # MTP: the target's own NextN layers (spec_aux_hidden_state.py: num_nextn_predict_layers)
            ld = max(1, m.mtp_layers)
        return SpecSetup(algo, d, steps, topk, ld)
    if algo in ("DFLASH", "DDTREE"):
        if algo == "DDTREE":
            if args.speculative_ddtree_budget is None:
                raise FlagError("--speculative-algorithm DDTREE needs --speculative-ddtree-budget B")
            d = args.speculative_ddtree_budget + 1  # verify width = budget + 1 (SGLang PR #29907)
        else:
            a, b = args.speculative_dflash_block_size, args.speculative_num_draft_tokens
            # a != b is a start check (start_checks.py::check_dflash_block) with the engine's ValueError
            d = a or b or (draft.draft.block_size if draft is not None and draft.draft and draft.draft.block_size
                           else None) or 16
        if draft is None:
            raise FlagError(f"{algo} needs --speculative-draft-model-path (or --draft-config PATH)")
        return SpecSetup(algo, d, 1, 1, draft.num_layers, unreleased=(algo == "DDTREE"))
    if algo == "NGRAM":
        d = args.speculative_num_draft_tokens or 12
        return SpecSetup(algo, d, 1, 10, 0)
    raise FlagError(f"unknown --speculative-algorithm {args.speculative_algorithm!r} "
                    "(known: EAGLE, EAGLE3, NEXTN, STANDALONE, DFLASH, DDTREE, NGRAM)")


# --------------------------------------------------------------------------------------------- KV cell
def kv_heads_per_rank(m: ModelSpec, attn_tp: int) -> int:
    """configs/model_config.py::get_num_kv_heads: max(1, H_kv // attn_tp) — replicated when H_kv < tp."""
    return max(1, m.num_kv_heads // attn_tp)


def kv_cell_bytes(m: ModelSpec, attn_tp: int, kv_dt: str) -> int:
    """pool_configurator.py::DefaultPoolConfigurator._compute_cell_size (target only).

    Hybrid models count only full-attention layers; MLA stores the latent (kv_lora_rank + rope) replicated.
    """
    L = len(m.attention_layers)
    size = dtype_bytes(kv_dt)
    if m.mla is not None:
        c = (m.mla.kv_lora_rank + m.mla.qk_rope_head_dim) * L * int(size)
        if kv_dt.startswith(("fp4", "nvfp4")):
            c = c // 2 + ((m.mla.kv_lora_rank + m.mla.qk_rope_head_dim) // 16) * L * int(size)
        return c
    n = kv_heads_per_rank(m, attn_tp)
    c = n * (m.head_dim + m.v_head_dim) * L * int(size)
    if kv_dt.startswith(("fp4", "nvfp4")):
        c = c // 2 + (n * m.head_dim * L * 2 * int(size)) // 16
    return c


def draft_kv_cell_bytes(d: ModelSpec, attn_tp: int, kv_dt: str) -> int:
    """speculative/dflash_utils.py::dflash_draft_cell_size_per_token: n_draft·(hd+vd)·Ld·sizeof(kv dtype)."""
    n = max(1, d.num_kv_heads // attn_tp)
    return n * (d.head_dim + d.v_head_dim) * d.num_layers * int(dtype_bytes(kv_dt))


# --------------------------------------------------------------------------------------------- mamba state
@dataclass(frozen=True)
class MambaState:
    conv_elems: int       # per slot per layer (sum over conv shapes)
    ssm_elems: int        # per slot per layer (temporal)
    conv_dim_rank: int    # conv_dim / t (for the intermediate conv window)
    conv_kernel: int
    layers: int           # mamba layers (this PP stage)
    conv_bytes: int       # itemsize
    ssm_bytes: int

    @property
    def per_slot(self) -> int:
        """configs/mamba_utils.py::Mamba2CacheParams.mamba_cache_per_req = (conv·conv_size + ssm·ssm_size)·layers."""
        return (self.conv_elems * self.conv_bytes + self.ssm_elems * self.ssm_bytes) * self.layers


def mamba_state(m: ModelSpec, tp: int, ssm_dtype_flag: str | None) -> MambaState | None:
    """configs/mamba_utils.py::Mamba2StateShape.create (GDN via Qwen3NextConfig.mamba2_cache_params)."""
    if not m.linear_layers:
        return None
    t = max(1, tp)
    ssm_dt = ssm_dtype_flag or m.mamba_ssm_dtype or "float32"
    conv_b = 2  # SGLANG_MAMBA_CONV_DTYPE default bf16
    ssm_b = int(dtype_bytes(ssm_dt))
    if m.gdn is not None:
        g = m.gdn
        inter, ngroups, heads, hd, state, k = g.value_dim, g.num_key_heads, g.num_value_heads, g.value_head_dim, \
            g.key_head_dim, g.conv_kernel
        version = 2
    else:
        mb = m.mamba
        assert mb is not None
        inter, ngroups, heads, hd, state, k, version = mb.intermediate, mb.n_groups, mb.num_heads, mb.head_dim, \
            mb.state_size, mb.conv_kernel, mb.version
    if version == 1:
        if inter % t:
            raise FlagError(f"TP {t} does not divide the Mamba intermediate size {inter}")
        cd = inter // t
        return MambaState(cd * (k - 1), cd * state, cd, k, len(m.linear_layers), conv_b, ssm_b)
    if ngroups % t:
        ngroups += t - ngroups % t  # n_groups padded to tp when not divisible
    conv_dim = inter + 2 * ngroups * state
    if conv_dim % t or heads % t:
        raise FlagError(f"TP {t} does not divide the linear-attention heads ({heads}) of {m.name}")
    cd = conv_dim // t
    return MambaState(cd * (k - 1), (heads // t) * hd * state, cd, k, len(m.linear_layers), conv_b, ssm_b)


def mamba_ratio(args: SglangArgs, strategy: str, overlap: bool) -> int:
    """_calculate_mamba_ratio: 1 without radix cache; else 3 + (2 extra_buffer+overlap | 1 extra_buffer |
    1 extra_buffer_lazy | 0 no_buffer)."""
    if args.disable_radix_cache:
        return 1
    if strategy == "extra_buffer":
        return 3 + (2 if overlap else 1)
    if strategy == "extra_buffer_lazy":
        return 4
    return 3
