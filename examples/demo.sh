#!/usr/bin/env bash
# `make demo`: the example matrix (examples/demo.toml) on the embedded local engine (vLLM's CPU build serving
# tiny locally generated models): autoregressive vs draft-model speculative decoding (tiny-draft, and
# tiny-target as its own draft, whose acceptance is 1.0 by construction), at two concurrencies. Then the
# report of the store when `specbench report` exists.
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
echo "   note: 'self-draft' serves tiny-target as its own draft model: acceptance 1.0 by construction,"
echo "   a demo that the speculative path works, not a claim about a real draft model."
echo "   'draft-tiny' is a real separate draft model with random weights: it rarely agrees with the target."
status=0
"$BIN/specbench" run examples/demo.toml --store "$STORE" || status=$?

if "$BIN/specbench" report --help >/dev/null 2>&1; then
  echo "== specbench report $STORE"
  "$BIN/specbench" report "$STORE" --out "$OUT/report"
  echo "report: $OUT/report/report.html (and report.md, PNG plots) in $OUT/report/"
fi
echo "server logs: $OUT/demo-logs/"
exit "$status"
