"""What vLLM measures on a GPU at start, fitted to what public vLLM GPU logs print (tests/data/vllm-gpu-corpus/).

Three rules, each with the logs it rests on:

- `vllm_total_bytes`: the GPU's total as vLLM sees it (torch.cuda.mem_get_info's total, the `b` of "Free memory on
  device (a/b GiB)"), which is below nvidia-smi's memory.total (specs/gpu.py) by the driver's reservation: a 5090
  is 31.39 GiB there, not 31.84. Cards with a public vLLM log use its number; the others use nvidia-smi's total less
  the median gap of those cards (`DRIVER_GAP_MIB`).
- `capture_sizes` / `cudagraph_estimate_bytes`: the CUDA-graph estimate vLLM >= 0.20 subtracts from the budget
  (v1/worker/gpu_worker.py::Worker.determine_available_memory@0.32.0 -> gpu_model_runner.py::profile_cudagraph_memory:
  per mode, the second graph's memory x (N - 1) plus the shared pool), as a price per captured graph times the
  number of graphs the release captures (config/vllm.py::VllmConfig._set_cudagraph_sizes@0.32.0).
- the price `GRAPH_SHARED_GIB` + `GRAPH_GIB_PER_GRAPH` x (N - 1): least squares over the corpus logs that print
  both "Profiling CUDA graph memory: PIECEWISE=N[, FULL=M]" and "Estimated CUDA graph memory: X GiB" (the
  engine's own shape: a shared pool plus the second graph's memory per further graph). The logs spread widely per
  graph (vllm#45178 explains why: the linear extrapolation over a shared pool, and the cost is the model's), so
  the estimate is good to ~2x on the graph term alone; the term is 0.1-1.6 GiB in every dense/MoE log of the
  corpus and moves the available KV memory by less than 5% there. The few logs whose estimate runs to tens of GiB
  (vllm#53013, 118.65 GiB; vllm#57936, 57.45 GiB) are outside the fit and named in its README.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from specbench.contracts import GIB
from specbench.engines.vllm.common import Version
from specbench.specs.gpu import GpuSpec, find_gpu


@dataclass(frozen=True)
class VllmTotal:
    gib: float
    source: str
    logs: int = 1  # the corpus logs the fitted total rests on (fit_vllm_totals' readings of the card)


# ------------------------------------------------------------------------------------- the fitting rules
# Each fitted constant below is what one of these pure functions gives on the whole corpus (tests/data/vllm-gpu-
# corpus/logs.json; tests/golden/test_vllm_gpu_kfold.py checks it), so benchmarks/vllm_gpu_kfold.py can refit them
# with a log (and its thread, its card) held out and score that log with the refitted numbers.


def thread_of(log: Mapping[str, Any]) -> str:
    """'owner/repo#N' of a corpus record's GitHub thread: logs of one thread are one boot setup, not independent."""
    m = re.search(r"github\.com/([^/]+/[^/]+)/(?:issues|pull|discussions)/(\d+)", str(log.get("url") or ""))
    return f"{m.group(1)}#{m.group(2)}" if m else str(log.get("url") or log.get("id"))


def total_reading(log: Mapping[str, Any]) -> float | None:
    """T in GiB as one log prints it: R / u of "Desired GPU memory utilization is (u, R GiB)" (R = ceil(T u) to
    0.01 GiB over u: finer than T itself), else the b of "Free memory on device (a/b GiB)"; None for a log that
    does not name its card (`gpu_note`) or is not scored (`score: false`)."""
    if not log.get("gpu") or log.get("gpu_note") or log.get("score") is False:
        return None
    lg = log.get("logged") or {}
    if lg.get("requested_gib") and log.get("u"):
        return float(lg["requested_gib"]) / float(log["u"])
    return float(lg["total_gib"]) if lg.get("total_gib") else None


def _in_catalog(card: str) -> bool:
    try:
        return find_gpu(card).name == card
    except Exception:  # FlagError: a card the catalog (specs/gpu.py) does not list
        return False


def fit_vllm_totals(logs: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Per catalog card: the median over its threads of each thread's median `total_reading`, in GiB to 0.01."""
    by_card: dict[str, dict[str, list[float]]] = {}
    for e in logs:
        r = total_reading(e)
        if r is not None and _in_catalog(str(e["gpu"])):
            by_card.setdefault(str(e["gpu"]), {}).setdefault(thread_of(e), []).append(r)
    return {card: round(statistics.median(statistics.median(v) for v in threads.values()), 2)
            for card, threads in sorted(by_card.items())}


def fit_driver_gap(totals: Mapping[str, float]) -> int:
    """nvidia-smi's total (the catalog, specs/gpu.py) less vLLM's, in MiB: the median over the cards with a fitted
    total and discrete memory (a positive gap: the GB10's unified memory reads above its catalog total)."""
    gaps = []
    for card, gib in totals.items():
        gap = find_gpu(card).total_mib - gib * 1024 if _in_catalog(card) else 0.0
        if gap > 0:
            gaps.append(gap)
    return round(statistics.median(gaps)) if gaps else 0


GRAPH_OUTLIER_GIB = 20.0  # estimates of tens of GiB are vllm#45178's extrapolation outliers, not fitted


def graph_points(logs: Sequence[Mapping[str, Any]]) -> list[tuple[int, float]]:
    """(N graphs, "Estimated CUDA graph memory" GiB) of the logs printing both ("Profiling CUDA graph memory:
    PIECEWISE=N[, FULL=M]", or the capture bars' counts)."""
    out = []
    for e in logs:
        c, est = e.get("capture") or {}, (e.get("logged") or {}).get("cuda_graph_estimate_gib")
        n = int(c.get("piecewise", 0)) + int(c.get("full", 0))
        if n and est is not None and est < GRAPH_OUTLIER_GIB and e.get("score") is not False:
            out.append((n, float(est)))
    return out


def fit_graph_price(logs: Sequence[Mapping[str, Any]]) -> tuple[float, float]:
    """(GRAPH_SHARED_GIB, GRAPH_GIB_PER_GRAPH): least squares of the estimate on N - 1 over `graph_points`, to
    0.0001 and 0.00001 GiB."""
    pts = graph_points(logs)
    if len({n for n, _ in pts}) < 2:
        raise ValueError("the CUDA-graph price needs logs at two capture counts at least")
    fit = statistics.linear_regression([n - 1 for n, _ in pts], [g for _, g in pts])
    return round(fit.intercept, 4), round(fit.slope, 5)


def fit_gdn_copies(points: Sequence[tuple[float, float, float]]) -> int:
    """GDN_FP32_COPIES from (activation at 0 copies, at 1 copy, the log's transient peak) per Gated-DeltaNet log
    (the planner's activation for the log's launch, benchmarks/vllm_gpu_kfold.py::gdn_points): the median copies
    the logs imply, rounded to a whole tensor; 0 without such a log."""
    ks = [(peak - a0) / (a1 - a0) for a0, a1, peak in points if a1 > a0]
    return max(0, round(statistics.median(ks))) if ks else 0


# ------------------------------------------------------------------------------------- the fitted constants
# The total vLLM logs per card (`fit_vllm_totals` on the corpus), keyed by the catalog name (specs/gpu.py).
VLLM_TOTALS: dict[str, VllmTotal] = {
    "RTX 5090": VllmTotal(31.39, "public log: https://github.com/noonghunna/club-3090/issues/1087 (30.27/31.4 GiB; "
                                 "(0.92, 28.88 GiB) -> 31.39)"),
    "RTX 3090": VllmTotal(23.56, logs=4, source="public logs: https://github.com/noonghunna/club-3090/pull/1139 ((0.92, 21.67 GiB) "
                                 "-> 23.55), https://github.com/wtdcode/vllm-backport/issues/34 ((0.935, 22.03 GiB) "
                                 "-> 23.56), https://github.com/vllm-project/vllm/issues/10517 (23.58 GiB): median"),
    "A100 80GB": VllmTotal(79.29, logs=2, source="public logs: https://github.com/vllm-project/vllm-omni/issues/276 (0.49/79.32 GiB; "
                                  "(0.6, 47.59 GiB) -> 79.32), https://github.com/ovg-project/kvcached/issues/110 "
                                  "(67.24/79.25 GiB; (0.9, 71.33 GiB) -> 79.26): median"),
    "L4": VllmTotal(22.04, "public log: https://github.com/pytorch/pytorch/issues/175666 (19.77/22.05 GiB; "
                           "(0.9, 19.84 GiB) -> 22.04)"),
    "DGX Spark GB10": VllmTotal(121.69, logs=4, source="public logs: https://github.com/MiaAI-Lab/GLM-5.3-Flash-EXL3-2x-DGX-Sparks/"
                                        "issues/204 (121.69 GiB) and /issues/47 ((0.87, 105.87 GiB) -> 121.69), "
                                        "https://github.com/MiaAI-Lab/DeepSeek-v4-Flash-One-DGX-Spark/issues/4 "
                                        "(121.63 GiB): median (unified memory)"),
}
# nvidia-smi total minus vLLM's, in MiB (`fit_driver_gap`): 5090 464, 3090 451, L4 465, A100 80GB 727; the median
# is used for a card without a vLLM log (held out, the 5090's 28.88 GiB request is met to 0.1%, vllm_gpu_kfold.py).
DRIVER_GAP_MIB = 464


def vllm_total_bytes(gpu: GpuSpec) -> tuple[int, str]:
    """(T as vLLM reports it, its source) for a catalog GPU; a --gpu-mem-gib GPU (no SMs) is taken as given."""
    hit = VLLM_TOTALS.get(gpu.name)
    if hit is not None:
        return int(hit.gib * GIB), hit.source
    if not gpu.sms:
        return gpu.total_mib << 20, "--gpu-mem-gib (as given)"
    mib = gpu.total_mib - DRIVER_GAP_MIB
    return mib << 20, (f"estimate: nvidia-smi's {gpu.total_mib} MiB less the {DRIVER_GAP_MIB} MiB median gap of the "
                       f"cards with a vLLM log (engines/vllm/gpu_fit.py::VLLM_TOTALS)")


def capture_sizes(max_num_seqs: int, max_num_batched_tokens: int, decode_query_len: int, blackwell_dc: bool,
                  max_capture: int | None = None, explicit: tuple[int, ...] | None = None) -> tuple[int, ...]:
    """The capture sizes vLLM 0.32.0 picks (config/vllm.py::VllmConfig._set_cudagraph_sizes): 1, 2, 4, multiples of
    8 below 256, multiples of 16 up to the ceiling min(max_num_seqs x decode_query_len x 2, 512 (1024 on SM100)),
    or --max-cudagraph-capture-size; then every size above max_num_batched_tokens is dropped."""
    if explicit:
        sizes = sorted(set(explicit))
    else:
        ceiling = max_capture if max_capture is not None else min(max_num_seqs * decode_query_len * 2,
                                                                  1024 if blackwell_dc else 512)
        sizes = [s for s in [1, 2, 4, *range(8, 256, 8), *range(256, ceiling + 1, 16)] if s <= ceiling]
        if max_num_batched_tokens <= ceiling and max_num_batched_tokens not in sizes:
            sizes.append(max_num_batched_tokens)
    return tuple(s for s in sorted(sizes) if s <= max_num_batched_tokens)


def graph_count(sizes: tuple[int, ...], max_num_seqs: int, decode_query_len: int, full_graphs: bool) -> int:
    """Graphs captured under the default FULL_AND_PIECEWISE: one PIECEWISE graph per size, and a FULL decode graph
    per size that a uniform decode batch fills (<= max_num_seqs x decode_query_len); PIECEWISE / FULL_DECODE_ONLY
    modes (full_graphs False) capture the piecewise list only."""
    pw = len(sizes)
    full = sum(1 for s in sizes if s <= max_num_seqs * decode_query_len) if full_graphs else 0
    return pw + full


# The estimate's own shape (gpu_model_runner.py::profile_cudagraph_memory@0.32.0): the pool the first graphs
# share plus the second graph's memory x (N - 1). `fit_graph_price`: least squares over the corpus logs that print
# both the capture count and "Estimated CUDA graph memory" (logs.json, 11 logs: club-3090#1087 / #104 / #434 at 5
# graphs 0.13 / 0.13 / 0.09, club-3090#44 7 -> 0.17, club-3090#758 15 -> 0.40, gpustack#251 16 -> 0.36,
# vllm-windows-build#4 30 -> 0.14, vllm#48214 51 -> 0.44, vllm#39559 86 -> 0.73 and 1.62, LMCache#3430 86 -> 0.52
# GiB). The per-graph cost is the model's: held out, the line misses a log's estimate by a median 38% (max 186%,
# KFOLD["graph_price"]); the term is 0.1-1.6 GiB in these logs and moves the KV budget by under 5%.
GRAPH_SHARED_GIB = 0.0939
GRAPH_GIB_PER_GRAPH = 0.0097


def cudagraph_estimate_bytes(n_graphs: int) -> int:
    if n_graphs <= 0:
        return 0
    return int((GRAPH_SHARED_GIB + GRAPH_GIB_PER_GRAPH * (n_graphs - 1)) * GIB)


# ---------------------------------------------------------------------------------------------- activation peak
# The profile run's forward over T tokens, per token and GPU (bf16 activations, 2 bytes): the MLP's gate/up output
# and its activation (3 x intermediate / tp) plus three hidden-sized tensors (residual, normed input, output). The
# per-token slope is fitted to the one model logged at two token counts: Llama-3.1-8B on a 3090, 20,000 -> 29,000
# tokens = 2.07 -> 2.99 GiB of activation peak, 109.8 KB a token (vllm#10517; tests/data/doctor_corpus/004); the
# formula gives 110.6 KB. MoE layers: fused_moe's three intermediate caches per routed copy (top_k x (2 + 1) x
# moe_intermediate / tp and top_k x hidden: model_executor/layers/fused_moe/fused_moe.py@0.32.0) and the shared
# expert's MLP.
HIDDEN_COPIES = 3
MLP_COPIES = 3
# Gated DeltaNet layers add, once (layers run one after another), the chunked FLA kernels' fp32 buffers: the chunk
# states (T/64 x value heads x key dim x value dim) and value-sized fp32 tensors, `GDN_FP32_COPIES` of them: fitted
# to club-3090#1087 / #1139 (Qwen3.8-27B TP2, 8,192 tokens: 1.46 GiB transient peak, 1.59 - 0.13 and 1.66 - 0.2);
# plus the in_proj_qkvz output (2 x key dim + 2 x value dim, bf16).
GDN_FP32_COPIES = 5
GDN_CHUNK = 64
# The dummy sampler (gpu_model_runner.py::_dummy_sampler_run@0.32.0) runs top-k and top-p over the whole vocabulary
# on every row: fp32 logits (4), their sorted copy (4) with int64 indices (8), the probabilities (4) and the sort's
# scratch (4) = 24 bytes per row and token of the vocabulary. Fitted to vllm#50722 (Qwen3.5-35B-A3B, 1,024 rows x
# 248,320: 5.69 GiB against the 5.66 logged); V0 (< 0.8) computed logits only.
SAMPLER_BYTES_PER_LOGIT = 24


def forward_bytes(m, T: int, tp: int) -> int:
    t = max(1, tp)
    h = m.hidden_size
    if m.moe is not None:
        mo = m.moe
        per_tok = 2 * mo.experts_per_tok * (MLP_COPIES * mo.moe_intermediate_size // t + h)
        per_tok += 2 * MLP_COPIES * (mo.shared_intermediate_size or 0) // t
    else:
        per_tok = 2 * MLP_COPIES * (m.intermediate_size // t)
    per_tok += 2 * HIDDEN_COPIES * h
    total = T * per_tok
    g = getattr(m, "gdn", None)
    if g is not None:
        hv = max(1, g.num_value_heads // t)
        total += -(-T // GDN_CHUNK) * hv * g.key_head_dim * g.value_head_dim * 4
        total += GDN_FP32_COPIES * T * hv * g.value_head_dim * 4
        total += 2 * T * (2 * g.num_key_heads * g.key_head_dim + 2 * g.num_value_heads * g.value_head_dim) // t
    return int(total)


def sampler_bytes(vocab: int, rows: int, v: Version) -> int:
    per = SAMPLER_BYTES_PER_LOGIT if v >= (0, 8, 0) else 4
    return rows * vocab * per


def graph_estimate_applied(v: Version) -> bool:
    """The estimate is subtracted by default from 0.20.0 (vllm/envs.py::VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS
    default "1"; vllm#37296's 0.18 log says it "will become the default in v0.19")."""
    return v >= (0, 20, 0)


# ------------------------------------------------------------------------------------- held-out (k-fold) errors
@dataclass(frozen=True)
class HeldOut:
    """A check's error with the log held out (its thread and card too) and every fitted constant refitted without
    it (benchmarks/vllm_gpu_kfold.py): n checks, the median and largest |error| in %, the share within 5%."""
    n: int
    median_pct: float
    max_pct: float
    within_5pct: float


# BEGIN k-fold (written by benchmarks/vllm_gpu_kfold.py --write)
KFOLD_DATE = "2026-12-06"
KFOLD_COMMAND = "PYTHONPATH=src python benchmarks/vllm_gpu_kfold.py --write"
KFOLD_LOGS = 44
KFOLD: dict[str, HeldOut] = {
    "requested": HeldOut(9, 0.1, 2.0, 1.0),
    "activation": HeldOut(5, 0.5, 3.2, 1.0),
    "budget": HeldOut(5, 0.5, 2.0, 1.0),
    "pool": HeldOut(5, 0.0, 1.1, 1.0),
    "cold": HeldOut(3, 11.2, 41.8, 0.0),
    "graph": HeldOut(3, 18.6, 29.0, 0.33),
    "graph_price": HeldOut(11, 38.2, 185.5, 0.09),
    "kv": HeldOut(10, 0.4, 2.0, 1.0),
    "scored": HeldOut(24, 0.3, 3.2, 1.0),
}
# END k-fold


# ------------------------------------------------------------------------------------- the plan's budget terms
GRAPH_FIT_LOGS = 11   # len(graph_points(corpus)): the logs the CUDA-graph price is fitted to
GDN_FIT_LOGS = 2      # the GDN summary lines GDN_FP32_COPIES is fitted to (vllm_gpu_kfold.py::gdn_points)
MEASURED = "measured (log/flag)"


def _held_out(check: str) -> tuple[float | None, str]:
    k = KFOLD.get(check)
    if k is None:
        return None, "no held-out check covers this term"
    return k.median_pct, (f"k-fold {check}: median |error| {k.median_pct}% (max {k.max_pct}%) over {k.n} held-out "
                          f"checks of {KFOLD_LOGS} logs, {KFOLD_DATE} (benchmarks/vllm_gpu_kfold.py)")


class BudgetTerm(TypedDict):
    """One term of the vLLM GPU budget (plan JSON `budget.terms`), in the order its keys are written."""

    term: str
    budget_field: str | None
    kind: str
    source: str
    expected_error_pct: float | None
    error_basis: str


def budget_terms(gpu: GpuSpec, *, weights_measured: bool, non_kv_measured: bool, graph_applied: bool,
                 gdn: bool, kv_bytes_given: bool) -> list[BudgetTerm]:
    """Per term of the vLLM GPU budget (plan JSON `budget.terms`): where its number comes from ("engine code",
    "measured (log/flag)", "fitted: N logs", "estimate") and the held-out (k-fold) error of that term where a check
    of the corpus covers it (`expected_error_pct`, the median |error| in %; null where none does); `budget_field` names
    the budget number the term is (null for non-torch memory, which is inside `non_kv_gib`)."""
    keys: dict[str, str | None] = {"total": "total_gib", "weights": "weights_gib", "activation": "activation_gib",
            "cuda_graph": "cuda_graph_gib", "non_torch": None, "requested": "requested_gib",
            "available_kv": "available_kv_gib"}

    def term(name: str, kind: str, source: str, check: str | None) -> BudgetTerm:
        if check:
            err, basis = _held_out(check)
        else:
            err, basis = None, ("as given" if kind == MEASURED else "the engine's arithmetic, exact on its inputs"
                                if kind == "engine code" else "no held-out check of the corpus covers this term")
        return {"term": name, "budget_field": keys[name], "kind": kind, "source": source, "expected_error_pct": err,
                "error_basis": basis}

    def fitted(n: int) -> str:
        return f"fitted: {n} log" + ("" if n == 1 else "s")

    hit = VLLM_TOTALS.get(gpu.name)
    if hit is not None:
        total = term("total", fitted(hit.logs), hit.source, "requested")
    elif not gpu.sms:
        total = term("total", MEASURED, "--gpu-mem-gib", None)
    else:
        total = term("total", "estimate", f"nvidia-smi's total less the {DRIVER_GAP_MIB} MiB median driver gap "
                     f"(gpu_fit.py::fit_driver_gap)", "requested")
    requested = term("requested", "engine code", "R = ceil(T x u) (v1/worker/utils.py::request_memory)",
                     "requested" if total["expected_error_pct"] is not None else None)
    weights = (term("weights", MEASURED, "--weights-gib", None) if weights_measured
               else term("weights", "estimate", "the checkpoint's tensors (specs/weights.py)", None))
    if non_kv_measured:
        activation = term("activation", MEASURED, "--non-kv-gib", None)
        graph = term("cuda_graph", MEASURED, "--non-kv-gib", None)
        non_torch = term("non_torch", MEASURED, "--non-kv-gib", None)
    else:
        activation = term("activation", fitted(GDN_FIT_LOGS) if gdn else "engine code",
                          "the profile run's forward or dummy sampler, the larger (gpu_fit.py::forward_bytes, "
                          "sampler_bytes)" + ("; GDN fp32 copies fitted (GDN_FP32_COPIES)" if gdn else ""),
                          "activation")
        graph = (term("cuda_graph", fitted(GRAPH_FIT_LOGS), "graphs captured x the per-graph price "
                      "(gpu_fit.py::fit_graph_price)", "graph_price") if graph_applied
                 else term("cuda_graph", "engine code", "not subtracted by this release / launch "
                           "(VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS, --enforce-eager)", None))
        non_torch = term("non_torch", "estimate", "0.1 GiB, one measured breakdown (gpu.py::NON_TORCH_GIB), inside "
                         "non_kv_gib", None)
    if kv_bytes_given:
        kv = term("available_kv", MEASURED, "--kv-cache-memory-bytes", None)
    else:
        kv = term("available_kv", "engine code", "K = R - weights - non-KV (gpu.py::gpu_budget)",
                  None if weights_measured and non_kv_measured else "budget" if weights_measured else "cold")
    return [total, weights, activation, graph, non_torch, requested, kv]
