#!/usr/bin/env bash
# Device side, first call: park one wheel chunk in /tmp/stash (it survives only
# while the machine stays warm, ~30 s after a call) and report the environment.
# usage: bash tools/gpu/stage.sh .devwhl-a
mkdir -p /tmp/stash && cp "$1"/*.whl /tmp/stash/ && ls /tmp/stash | wc -l
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv
python3 -c "import sys,torch;print(sys.version.split()[0],torch.__version__,torch.version.cuda)"
which gcc nvcc | tr '\n' ' '; echo
