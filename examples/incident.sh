#!/usr/bin/env bash
# The seed incident through the planner (no GPU needed): Qwen3.6-27B + DFlash (16 draft tokens) on a 96 GB
# RTX PRO 6000, TP1, --mem-fraction-static 0.75, measured free memory 94.24 GiB and BF16 weights 51.05 GiB.
# 1) the <= 0.5.12 rules at --max-running-requests 4 (started) and 8 (died), with the per-TP table of
#    nearest working configurations; 2) the same setup under the newest rules.
set -euo pipefail
SB="${SPECBENCH:-.venv/bin/specbench}"
CMD=(python -m sglang.launch_server --model-path Qwen/Qwen3.6-27B --tp 1 --mem-fraction-static 0.75
     --context-length 32768 --speculative-algorithm DFLASH --speculative-num-draft-tokens 16
     --speculative-draft-model-path z-lab/Qwen3.6-27B-DFlash --mamba-scheduler-strategy extra_buffer
     --mamba-full-memory-ratio 0.5 --host 0.0.0.0 --port 30000)
COMMON=(--gpu rtx-pro-6000 --model-config Qwen/Qwen3.5-27B --draft-config specforge/qwen3.6-27b-dflash
        --avail-before-load-gib 94.24 --weights-gib 51.05 --draft-weights-gib 3.3)
echo "=== the incident, SGLang <= 0.5.12 rules, --max-running-requests 4 (the working service)"
"$SB" plan "${COMMON[@]}" --engine-version 0.5.12 --no-fixes -- "${CMD[@]}" --max-running-requests 4
echo
echo "=== the same at --max-running-requests 8 (the failing service)"
"$SB" plan "${COMMON[@]}" --engine-version 0.5.12 -- "${CMD[@]}" --max-running-requests 8
echo
echo "=== the same setup under the newest rules (SGLang 0.5.23)"
"$SB" plan "${COMMON[@]}" --engine-version 0.5.23 -- "${CMD[@]}" --max-running-requests 8
