#!/usr/bin/env bash
# Device side (issue 35), after `bash tools/gpu/run_boots.sh .devwhl-b 0` on a warm machine: the quick calibration of
# examples/h100-sglang-qwen3-8b-context.toml, the predictions it gives (written before the validation runs start),
# then the validation matrices, each store resumed by the next call if the deadline cuts it.
# usage: bash tools/gpu/context_runs.sh STEP DEADLINE_S      STEP: quick | context | dflash | dflash8 | fp8kv | c64 |
#   tree8 | moe (examples/h100-sglang-qwen3-moe-eagle3.toml: the Qwen3-30B-A3B target, its folders written here) |
#   moeu (examples/h100-sglang-qwen3-moe-uniform.toml: the same with SGLANG_SIMULATE_UNIFORM_EXPERTS=1) |
#   hybrid (examples/h100-sglang-qwen36-27b-hybrid.toml: Qwen3.6-27B and its DFlash drafter, the folders
#   `run_boots.sh .devwhl-b 0` writes with the stand-in processor) |
#   q32 (examples/h100-sglang-qwen3-32b-eagle3.toml: Qwen3-32B and its SpecForge EAGLE3 drafter, folders written here) |
#   moel (examples/h100-sglang-qwen3-moe-uniform-long.toml: the uniform-routing MoE at 2,048 / 8,192-token prompts)
# The matrices name gpu = "H100"; on an H200 the copies under /tmp/mx name "H200" (nvidia-smi says which).
set -uo pipefail
step=$1; deadline=$2
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/mx
export PYTHONPATH=/tmp/site:src:tools/gpu/shims PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 \
  NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
bash tools/gpu/q3_8b_models.sh
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
gpu=H100; case "$name" in *H200*) gpu=H200;; esac
for m in context dflash dflash8 fp8kv c64 tree8; do
  sed "s/^gpu = \"H100\"/gpu = \"$gpu\"/" examples/h100-sglang-qwen3-8b-$m.toml > /tmp/mx/$m.toml
done
sed "s/^gpu = \"H100\"/gpu = \"$gpu\"/" examples/h100-sglang-qwen3-moe-eagle3.toml > /tmp/mx/moe.toml
sed "s/^gpu = \"H100\"/gpu = \"$gpu\"/" examples/h100-sglang-qwen3-moe-uniform.toml > /tmp/mx/moeu.toml
sed "s/^gpu = \"H100\"/gpu = \"$gpu\"/" examples/h100-sglang-qwen3-moe-uniform-long.toml > /tmp/mx/moel.toml
sed "s/^gpu = \"H100\"/gpu = \"$gpu\"/" examples/h100-sglang-qwen3-32b-eagle3.toml > /tmp/mx/q32.toml
# the hybrid 27B: c <= 4 on 80 GB, its H200 twin goes to c = 32
if [ $gpu = H200 ]; then cp examples/h200-sglang-qwen36-27b-hybrid.toml /tmp/mx/hybrid.toml
else sed "s/^gpu = \"H100\"/gpu = \"$gpu\"/" examples/h100-sglang-qwen36-27b-hybrid.toml > /tmp/mx/hybrid.toml; fi
mkdir -p /tmp/models/q3_30b /tmp/models/q3_30b_eagle3
cp src/specbench/data/configs/Qwen__Qwen3-30B-A3B.json /tmp/models/q3_30b/config.json
cp src/specbench/data/configs/specforge__qwen3-30B-A3B-eagle3.json /tmp/models/q3_30b_eagle3/config.json
mkdir -p /tmp/models/q3_32b /tmp/models/q3_32b_eagle3
cp src/specbench/data/configs/Qwen__Qwen3-32B.json /tmp/models/q3_32b/config.json
cp src/specbench/data/configs/specforge__qwen3-32b-eagle3.json /tmp/models/q3_32b_eagle3/config.json
echo "[context_runs] $name -> gpu = $gpu; step $step; deadline $deadline s; $(date -u +%FT%TZ)" | tee -a $OUT/steps.txt
sb() { python3 -m specbench "$@"; }
case "$step" in
  quick)
    t0=$(date +%s)
    timeout -s INT "$deadline" python3 -m specbench calibrate --quick /tmp/mx/context.toml --store $OUT/quick.db \
      --out $OUT/quick.calibration.json > $OUT/quick.txt 2>&1; echo "rc=$? wall=$(( $(date +%s) - t0 ))s" >> $OUT/quick.txt
    tail -5 $OUT/quick.txt
    if [ -f $OUT/quick.calibration.json ]; then
      date -u +"predicted at %FT%TZ, before the validation runs" > $OUT/predicted-at.txt
      sb predict /tmp/mx/context.toml --calibration $OUT/quick.calibration.json --json > $OUT/prediction-quick-context.json 2>&1
      sb predict /tmp/mx/dflash.toml --calibration $OUT/quick.calibration.json --accept-len 1.0 --json > $OUT/prediction-quick-dflash.json 2>&1
      sb predict /tmp/mx/context.toml --calibration $OUT/quick.calibration.json > $OUT/prediction-quick-context.txt 2>&1
      head -30 $OUT/prediction-quick-context.txt
    fi ;;
  context|dflash|dflash8|fp8kv|c64|tree8|moe|moeu|moel|hybrid|q32)
    # the store and its logs stay under /tmp (a call brings back a limited number of files); only the checkpointed
    # .db (rollback-journal mode) and the run's text go to $OUT. A store under .devrun/ or /tmp/runs is resumed.
    mkdir -p /tmp/runs; db=/tmp/runs/$step.db
    [ -f $db ] || { [ -f .devrun/$step.db ] && cp .devrun/$step.db $db && chmod u+w $db; }
    timeout -s INT "$deadline" python3 -m specbench run /tmp/mx/$step.toml --store $db --no-progress > /tmp/runs/run-$step.txt 2>&1
    echo "rc=$?" >> /tmp/runs/run-$step.txt; cat /tmp/runs/run-$step.txt >> $OUT/run-$step.txt; tail -25 /tmp/runs/run-$step.txt
    python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()" $db
    cp $db $OUT/$step.db ;;
esac
nvidia-smi --query-gpu=name,memory.used --format=csv,noheader
