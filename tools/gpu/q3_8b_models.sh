#!/usr/bin/env bash
# The Qwen3-8B model folders the h100-sglang-qwen3-8b-* matrices launch (dummy weights: only config.json is read):
# the target, the SpecForge EAGLE3 drafter and the SpecForge DFlash drafter, from the bundled configs.
set -euo pipefail
cfg=src/specbench/data/configs
mkdir -p /tmp/models/q3_8b /tmp/models/q3_8b_eagle3 /tmp/models/q3_8b_dflash
cp $cfg/Qwen__Qwen3-8B.json /tmp/models/q3_8b/config.json
cp $cfg/specforge__qwen3-8b-eagle3.json /tmp/models/q3_8b_eagle3/config.json
cp $cfg/specforge__qwen3-8b-dflash.json /tmp/models/q3_8b_dflash/config.json
