#!/usr/bin/env bash
# Device side (issue 35): several context_runs.sh steps in one call, each given what is left of TOTAL_S, the order
# chosen by the GPU the call got: `bash tools/gpu/steps.sh TOTAL_S "H100 STEPS" "H200 STEPS"`, e.g.
#   bash tools/gpu/steps.sh 540 "moe" "dflash tree8 context"
# A step cut by its deadline leaves its store under /tmp/runs; the next call resumes it.
set -uo pipefail
total=$1; h100=$2; h200=$3
t0=$(date +%s)
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
steps=$h100; case "$name" in *H200*) steps=$h200;; esac
for s in $steps; do
  left=$(( total - ($(date +%s) - t0) ))
  [ "$left" -gt 60 ] || { echo "[steps] $s not started: ${left}s left"; break; }
  echo "[steps] $s with ${left}s left on $name"
  bash tools/gpu/context_runs.sh "$s" "$left"
done
