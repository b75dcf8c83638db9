#!/usr/bin/env bash
# Device side, after `run_boots.sh CHUNK 0` installed SGLang 0.5.15.post1 into /tmp/site (same warm machine):
# boot the int-N quantized configs of tests/data/quant-configs/ and gpt-oss-20b at another --swa-full-tokens-ratio
# (issue #12's cold-plan check of AWQ / GPTQ / compressed-tensors and of the SWA ratio).
# usage: [BOOT_TMO=S] bash tools/gpu/boot_quant.sh DEADLINE_S CASE...
#   CASE: qwen3_8b_awq qwen3_8b_gptq qwen3_8b_w4a16 qwen3_8b_w4a16_asym qwen3_30b_a3b_awq gpt_oss_20b_swa05
#         nano30b_fi super120b_fp8_fi (Nemotron-3 Nano BF16 / Super FP8, latent MoE: flashinfer attention, since
#         SGLang refuses triton for NemotronH; Super at --mem-fraction-static 0.93 to hold its ~113 GiB)
# Each boot: the common flags of run_boots.sh, --max-running-requests 48 (gpt-oss, Nemotron: 8),
# --mem-fraction-static 0.75 unless said.
set -u
here=$(cd "$(dirname "$0")" && pwd); repo=$(cd "$here/../.." && pwd)
deadline=$1; shift; T0=$(date +%s)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; export OUT
[ -f /tmp/site/.imports_ok ] || { echo "[boot_quant] no SGLang install in /tmp/site: run_boots.sh first"; exit 5; }
export PYTHONPATH=/tmp/site:$here/shims PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
  NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
M=/tmp/models
BASE="--load-format dummy --skip-tokenizer-init --tp 1 --context-length 32768 \
 --cuda-graph-backend-decode disabled --cuda-graph-backend-prefill disabled --sampling-backend pytorch \
 --skip-server-warmup --host 127.0.0.1 --port 30000 --log-level info"
COMMON="$BASE --attention-backend triton --mem-fraction-static 0.75"
bundled() {  # case, bundled config, extra flags...
  local c=$1 cfg=$2; shift 2
  mkdir -p $M/$c && cp "$repo/src/specbench/data/configs/$cfg" $M/$c/config.json
  [ -f "$repo/src/specbench/data/configs/${cfg%.json}__hf_quant_config.json" ] && \
    cp "$repo/src/specbench/data/configs/${cfg%.json}__hf_quant_config.json" $M/$c/hf_quant_config.json
  BOOT_NOTE="model_config=$cfg" bash "$here/boot_one.sh" "${c}_mrr8" "${BOOT_TMO:-200}" --model-path $M/$c "$@"
}
for c in "$@"; do
  [ $(( $(date +%s) - T0 )) -ge "$deadline" ] && { echo "[boot_quant] deadline: skip $c"; continue; }
  case $c in
    gpt_oss_20b_swa05)
      mkdir -p $M/gpt_oss_20b && cp "$repo/src/specbench/data/configs/openai__gpt-oss-20b.json" $M/gpt_oss_20b/config.json
      BOOT_NOTE="model_config=openai__gpt-oss-20b.json" bash "$here/boot_one.sh" "${c}_mrr8" "${BOOT_TMO:-200}" \
        --model-path $M/gpt_oss_20b $COMMON --max-running-requests 8 --swa-full-tokens-ratio 0.5;;
    nano30b_fi) bundled $c nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json $BASE --attention-backend flashinfer \
      --mem-fraction-static 0.75 --max-running-requests 8;;
    super120b_fp8_fi) bundled $c nvidia__NVIDIA-Nemotron-3-Super-120B-A12B-FP8.json $BASE --attention-backend \
      flashinfer --mem-fraction-static 0.93 --max-running-requests 8;;
    super120b_fp8_x)  # the bundled Super FP8 config + an hf_quant_config.json with `exclude_modules` (SGLang needs it)
      mkdir -p $M/$c && cp "$repo/tests/data/quant-configs/nemotron3_super_fp8/"*.json $M/$c/
      BOOT_NOTE="model_config=tests/data/quant-configs/nemotron3_super_fp8/config.json" bash "$here/boot_one.sh" \
        "${c}_mrr8" "${BOOT_TMO:-200}" --model-path $M/$c $BASE --attention-backend flashinfer \
        --disable-flashinfer-autotune --mem-fraction-static 0.93 --max-running-requests 8;;
    nano30b_fi_na) bundled $c nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json $BASE --attention-backend flashinfer \
      --disable-flashinfer-autotune --mem-fraction-static 0.75 --max-running-requests 8;;
    *)
      [ -f "$repo/tests/data/quant-configs/$c/config.json" ] || { echo "[boot_quant] unknown case $c"; continue; }
      mkdir -p $M/$c && cp "$repo/tests/data/quant-configs/$c/config.json" $M/$c/config.json
      BOOT_NOTE="model_config=tests/data/quant-configs/$c/config.json" bash "$here/boot_one.sh" "${c}_mrr48" \
        "${BOOT_TMO:-200}" --model-path $M/$c $COMMON --max-running-requests 48;;
  esac
done
echo "[boot_quant] all done at $(( $(date +%s) - T0 )) s"
