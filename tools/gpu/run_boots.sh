#!/usr/bin/env bash
# Device side, second call (and later calls while the machine is warm): install the parked chunk
# plus the carried one, check that SGLang imports on the GPU, then boot the listed cases.
# usage: [SGL=0512] [BOOT_TMO=S] bash tools/gpu/run_boots.sh CHUNK_DIR[,CHUNK_DIR] DEADLINE_S CASE...
#   CASE (grammar, parts in this order; see args_of below):
#     [v0512_]<model>[_tp2|_tp4|_tp8]_mrr<N>[_mf<NN|NNN|auto|k<K>>][_mtp|_df<D>[_eb05|_eb]]
#       model: q35_27b q36_27b llama31_8b nano30b q36_35b
#       _mfNN / _mfNNN: --mem-fraction-static 0.NN / 0.NNN (default 0.75); _mfauto: not given;
#       _mfk<K>: computed on the device by mf_for_slots.py from the last ready-or-failed boot of the
#               same model and version, so that <=0.5.12 lands on K mamba slots (the incident's assert)
#       _mfprev: the value the case before used (same fraction, other mrr)
#       _mtp: NEXTN, steps 3, topk 1, 4 draft tokens
#       _df<D>: DFLASH with the SpecForge Qwen3.6-27B drafter, D draft tokens (block size),
#               --mamba-scheduler-strategy extra_buffer, _eb05 adds --mamba-full-memory-ratio 0.5
#     A/B: boot A, and B only if A ended before its weights were loaded.
#   Cases run in the given order; none is started after DEADLINE_S seconds of this script.
#   SGL=0512: the carried chunks (.devwhl-12a,.devwhl-12b) go into /tmp/site12, put before the
#   0.5.15.post1 install /tmp/site on PYTHONPATH; that install must already be there (same warm
#   machine), else exit 5.
#   BOOT_TMO: seconds one boot may take before it is stopped (default 300).
# Model configs come from the package: src/specbench/data/configs/.
set -u
here=$(cd "$(dirname "$0")" && pwd); repo=$(cd "$here/../.." && pwd)
CFG=$repo/src/specbench/data/configs
chunks=$1; deadline=$2; shift 2
T0=$(date +%s)
SGL=${SGL:-0515}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; export OUT
# NVLink multicast stays off (device notes): NCCL, PyTorch symmetric memory, NVSHMEM
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
  NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
DRY=${DRY:-0}   # DRY=1: print each case's arguments and boot nothing (runs anywhere)
wheels() { for c in ${chunks//,/ }; do ls "$repo/$c"/*.whl; done; }
if [ "$DRY" = 1 ]; then site=/tmp/dry-site; mkdir -p $site; touch $site/.imports_ok
elif [ "$SGL" = 0515 ]; then
  if [ ! -f /tmp/site/.installed ]; then
    mkdir -p /tmp/stash; cp $(wheels) /tmp/stash/ 2>/dev/null
    n=$(ls /tmp/stash/*.whl | wc -l); echo "[run_boots] wheels: $n"
    ls /tmp/stash/sglang_kernel-*.whl >/dev/null 2>&1 || { echo "[run_boots] first chunk missing: machine went cold, stage it again"; exit 5; }
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site /tmp/stash/*.whl || exit 3
    touch /tmp/site/.installed
  fi
  site=/tmp/site; export PYTHONPATH=/tmp/site
elif [ "$SGL" = 0512 ]; then
  [ -f /tmp/site/.installed ] || { echo "[run_boots] 0.5.15 base install missing: machine went cold; stage + run_boots (0.5.15) first"; exit 5; }
  if [ ! -f /tmp/site12/.installed ]; then
    echo "[run_boots] wheels for 0.5.12: $(wheels | wc -l)"
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site12 $(wheels) || exit 3
    touch /tmp/site12/.installed
  fi
  site=/tmp/site12; export PYTHONPATH=/tmp/site12:/tmp/site
else echo "[run_boots] unknown SGL=$SGL"; exit 2; fi
echo "[run_boots] SGL=$SGL install done at $(( $(date +%s) - T0 )) s"
# Model folders: the bundled config.json (random weights of the real shapes need nothing else);
# the Qwen3.5/3.6 VLM classes also get a stand-in processor (make_fake_processor.py).
M=/tmp/models
[ "$DRY" = 1 ] && M=/tmp/dry-site/models   # a dry run must not leave /tmp/models behind on the CPU machine
declare -A CONF=(
  [q35_27b]=Qwen__Qwen3.5-27B.json
  [q36_27b]=Qwen__Qwen3.6-27B-bf16-derived.json   # = nvidia NVFP4 config minus quantization_config
  [llama31_8b]=meta-llama__Llama-3.1-8B-Instruct.json
  [nano30b]=nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json
  [q36_35b]=Qwen__Qwen3.6-35B-A3B.json
  [q36_27b_dflash]=specforge__qwen3.6-27b-dflash.json
)
for m in "${!CONF[@]}"; do
  mkdir -p $M/$m; cp "$CFG/${CONF[$m]}" $M/$m/config.json
done
for d in q35_27b q36_27b q36_35b; do
  [ -f $M/$d/tokenizer.json ] || [ "$DRY" = 1 ] || python3 "$here/make_fake_processor.py" $M/$d
done
if [ ! -f $site/.imports_ok ]; then
  if [ "$SGL" = 0515 ]; then spec="sglang.srt.speculative.dflash_worker_v2"; else spec="sglang.srt.speculative.dflash_worker"; fi
  python3 -c "
import torch, sgl_kernel, flashinfer.sampling, flashinfer.prefill
import sglang.srt.entrypoints.http_server, sglang.srt.managers.scheduler, sglang.srt.model_executor.model_runner
import sglang.srt.models.qwen3_5, sglang.srt.models.qwen3_5_mtp, sglang.srt.models.llama, sglang.srt.layers.sampler
import sglang.srt.models.dflash, $spec
import importlib.metadata as md
print('imports ok', torch.cuda.get_device_name(0), torch.cuda.device_count(), 'GPUs', 'sglang', md.version('sglang'), 'transformers', md.version('transformers'))" > $OUT/import_check_$SGL.txt 2>&1
  rc=$?; tail -25 $OUT/import_check_$SGL.txt
  [ $rc = 0 ] || { echo "[run_boots] import check failed"; exit 4; }
  touch $site/.imports_ok
fi
echo "[run_boots] import check done at $(( $(date +%s) - T0 )) s"
if [ "$SGL" = 0515 ]; then
  NOGRAPH="--cuda-graph-backend-decode disabled --cuda-graph-backend-prefill disabled"
else
  NOGRAPH="--disable-cuda-graph --disable-piecewise-cuda-graph"   # 0.5.12 has no per-phase flags
fi
common() {  # $1 = tp size
  echo "--load-format dummy --skip-tokenizer-init --tp $1 --context-length 32768 --attention-backend triton \
 $NOGRAPH --sampling-backend pytorch --skip-server-warmup --host 127.0.0.1 --port 30000 --log-level info"
}
MTP="--speculative-algorithm NEXTN --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4"
args_of() {  # prints the launch arguments of one case, or UNKNOWN / BADVERSION
  local b=$1 v=0515
  case $b in v0512_*) v=0512; b=${b#v0512_};; esac
  [ "$v" = "$SGL" ] || { echo "BADVERSION"; return; }
  local model=${b%%_mrr*} rest=${b#*_mrr} tp=1
  case $model in *_tp[248]) tp=${model##*_tp}; model=${model%_tp[248]};; esac
  [ -n "${CONF[$model]:-}" ] && [ "$model" != q36_27b_dflash ] || { echo UNKNOWN; return; }
  local n=${rest%%_*}; [[ $n =~ ^[0-9]+$ ]] || { echo UNKNOWN; return; }
  local a="--model-path $M/$model $(common $tp) --max-running-requests $n"
  # TP>1: FlashInfer all-reduce fusion is auto-enabled for Qwen3.5 at TP>1 on SM90 and its
  # workspace goes through multicast objects, which this host must not use.
  [ $tp -gt 1 ] && a="$a --enforce-disable-flashinfer-allreduce-fusion"
  local mf=0.75
  case $rest in
    *_mfauto*) mf="";;
    *_mfk[0-9]*)
      local k=${rest#*_mfk}; k=${k%%_*}
      local d=4; case $rest in *_df[0-9]*) d=${rest#*_df}; d=${d%%_*};; esac
      local r=0.9; case $rest in *_eb05*) r=0.5;; esac
      [ -f "/tmp/ref_${SGL}_$model.log" ] || { echo UNKNOWN; return; }
      mf=$(python3 "$here/mf_for_slots.py" "/tmp/ref_${SGL}_$model.log" $M/$model/config.json $k $n $d $r 2>>"$OUT/mf_for_slots.txt") || { echo UNKNOWN; return; };;
    *_mfprev*) mf=$(cat /tmp/last_mf_$SGL 2>/dev/null) || { echo UNKNOWN; return; };;
    *_mf[0-9]*) local x=${rest#*_mf}; mf=0.${x%%_*};;
  esac
  echo "$mf" > /tmp/last_mf_$SGL
  [ -n "$mf" ] && a="$a --mem-fraction-static $mf"
  case $rest in *_mtp*) a="$a $MTP";; esac
  case $rest in *_df[0-9]*)
    local d=${rest#*_df}; d=${d%%_*}
    a="$a --speculative-algorithm DFLASH --speculative-draft-model-path $M/q36_27b_dflash --speculative-num-draft-tokens $d --mamba-scheduler-strategy extra_buffer"
    case $rest in *_eb05*) a="$a --mamba-full-memory-ratio 0.5";; esac;;
  esac
  echo "$a"
}
for item in "$@"; do
  for b in ${item//\// }; do
    el=$(( $(date +%s) - T0 ))
    if [ $el -ge $deadline ]; then echo "[run_boots] deadline: skip $b"; break; fi
    a=$(args_of $b)
    case $a in UNKNOWN|BADVERSION) echo "[run_boots] $b: $a (SGL=$SGL)"; break;; esac
    if [ "$DRY" = 1 ]; then echo "$b: $a"; continue; fi
    m=${b#v0512_}; m=${m%%_mrr*}; m=${m%_tp[248]}
    note="model_config=${CONF[$m]}"; case $a in *DFLASH*) note="$note draft_config=${CONF[q36_27b_dflash]}";; esac
    BOOT_NOTE="$note" bash "$here/boot_one.sh" "$b" "${BOOT_TMO:-300}" $a
    # remember this log as the reference for _mfk cases of the same model (needs both weight lines)
    grep -q "Load weight end" "$OUT/$b.log" && cp "$OUT/$b.log" "/tmp/ref_${SGL}_$m.log"
    # fallback only when the first choice ended before its weights were loaded
    if grep -q "Load weight end" "$OUT/$b.log" || grep -q "fired up and ready" "$OUT/$b.log"; then break; fi
    [ "$b" != "${item##*/}" ] && echo "[run_boots] $b ended before weights were loaded: trying the fallback"
  done
done
echo "[run_boots] all done at $(( $(date +%s) - T0 )) s"
