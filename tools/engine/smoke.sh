#!/usr/bin/env bash
# Smoke test of the embedded engine: boot vLLM CPU once on tiny-target, send 4 requests, read /v1/models and
# /metrics back, stop it. Prints one line (ready time, tokens, KV size) and keeps the whole log in a temp folder.
#   bash tools/engine/smoke.sh [--draft]        (needs `make engine`; builds the tiny models if missing)
set -euo pipefail
cd "$(dirname "$0")/../.."
M="${SPECBENCH_MODELS:-.cache/models}"
OUT="$(mktemp -d /tmp/specbench-smoke.XXXXXX)"
.venv/bin/specbench models build --out "$M" > /dev/null
extra=()
[[ "${1:-}" == "--draft" ]] && extra=(--draft "$M/tiny-draft" --num-spec 3)
.venv/bin/python tools/engine/record_boot.py smoke --model "$M/tiny-target" --kv-space 1 --max-model-len 2048 \
    --max-num-seqs 4 --out-dir "$OUT" "${extra[@]}"
echo "whole log: $OUT/smoke.log"
