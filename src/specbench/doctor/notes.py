"""The diagnosis's notes on what the log shows beside its failure: memory another process held before the weights
loaded, several boots or ranks in one file, weights that do not match the claimed quantization, the engine's own
notes, load lines that disagree, errors the engine survived and a deliberate stop.
"""

from __future__ import annotations

from specbench.doctor.checks import claimed_quant, weight_check
from specbench.doctor.lastboot import Parsed
from specbench.engines.base import engine
from specbench.errors import UserError
from specbench.logs.facts import LogFacts
from specbench.logs.failures import Failure
from specbench.specs.gpu import find_gpu

# CUDA context + NCCL/cuBLAS workspaces resident before the first weight: about 0.5-1.5 GiB on one GPU. More than this
# already in use at `Load weight begin` means another process (or a previous server still exiting) holds memory.
OTHER_PROCESS_THRESHOLD_GIB = 3.0


def _gpu_total_gib(gpu: str | None) -> float | None:
    if not gpu:
        return None
    try:
        return float(find_gpu(gpu).total_gib)
    except (UserError, AttributeError):
        return None


def boot_notes(facts: LogFacts, claim: str | None, gpu: str | None = None) -> list[str]:
    notes: list[str] = []
    # the GPU's size: the catalog's for --gpu, else what the engine printed beside the free memory (vLLM's
    # "Free memory on device (F/T GiB) on startup", vllm/v1/worker/utils.py::request_memory@0.32.0)
    total = _gpu_total_gib(gpu) or facts.total_gpu_memory_gib
    if total is not None and facts.avail_before_load_gib is not None:
        used = total - facts.avail_before_load_gib
        if used > OTHER_PROCESS_THRESHOLD_GIB:
            notes.append(f"{used:.2f} GiB of the {total:.2f} GiB {gpu or 'GPU'} were already in use before the weights "
                         f"loaded (free {facts.avail_before_load_gib:.2f} GiB): another process, or a previous server "
                         "not yet gone. Check that GPU memory is free before the next launch.")
    if facts.boots > 1:
        notes.append(f"The file holds {facts.boots} boots; this diagnosis is of the last one.")
    if len(facts.ranks) > 1:
        notes.append(f"Ranks {', '.join(map(str, facts.ranks))} are interleaved; numbers are rank {facts.ranks[0]}'s.")
    check = weight_check(facts, claimed_quant(facts, claim))
    if check is not None and not check.consistent:
        notes.append(
            f"Inconsistent weights: the target weighs {check.measured_gib:.2f} GiB on this GPU, but a "
            f"{check.claimed} checkpoint of this model would weigh about {check.expected_gib:.2f} GiB "
            f"(bf16 would be {check.dense_gib:.2f} GiB). The engine did not load the weights you think it did.")
    notes += engine(facts.engine).log_notes(facts)
    if facts.weights_gib is not None and facts.avail_after_load_gib is not None \
            and facts.avail_before_load_gib is not None:
        gap = facts.avail_before_load_gib - facts.avail_after_load_gib - facts.weights_gib
        if abs(gap) > 0.05:
            notes.append(f"Load weight lines disagree by {gap:.2f} GiB (begin − end − usage).")
    return notes


def run_notes(facts: LogFacts, failure: Failure | None, parsed: Parsed) -> list[str]:
    notes: list[str] = []
    if parsed.survived:
        survived = parsed.survived
        notes.append("Errors the engine printed and survived (it went on to serve): " + "; ".join(survived[:3])
                     + (f" (+{len(survived) - 3} more)" if len(survived) > 3 else ""))
    if facts.ready and failure is None and parsed.stopped:
        notes.append("The server was stopped on purpose afterwards (SIGTERM); the exits that follow are that stop.")
    return notes
