#!/usr/bin/env python3
"""Pick --mem-fraction-static so that an SGLang <= 0.5.12 hybrid boot lands on K mamba slots.

Used on the device to make the incident's assertion ("max_running_request is zero") bite on a
141 GB H200: it reads B and A from a previous boot log of the same engine and model, and inverts
the <= 0.5.12 rule of sglang/srt/model_executor/model_runner_kv_cache_mixin.py
(`_profile_available_bytes`, `handle_max_mamba_cache`):

    R  = A - B*(1-f)                 # GiB, A = avail after target weights, B = pre-load avail
    R' = R - p*mrr*D                 # spec scratch taken off the top
    K  = floor(R' * r/(1+r) / p)     # mamba slots

p is mamba_cache_per_req (conv bf16 + ssm fp32 over all linear layers, Qwen3.5/3.6 GDN shapes,
sglang/srt/configs/mamba_utils.py). Aims at K + 0.5 slots.

usage: mf_for_slots.py LOG CONFIG_JSON K MRR D RATIO   -> prints f (3 decimals)
"""
import json
import math
import re
import sys

log, cfg_path, K, mrr, D, r = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
text = open(log, errors="replace").read()
B = float(re.search(r"Load weight begin\. avail mem=([\d.]+) GB", text).group(1))
A = float(re.search(r"Load weight end\..*?avail mem=([\d.]+) GB", text).group(1))
c = json.load(open(cfg_path)); c = c.get("text_config", c)
n_lin = sum(1 for l in range(c["num_hidden_layers"]) if (l + 1) % c["full_attention_interval"] != 0)
hk, dk, hv, dv, kc = (c["linear_num_key_heads"], c["linear_key_head_dim"], c["linear_num_value_heads"],
                      c["linear_value_head_dim"], c["linear_conv_kernel_dim"])
conv = (hv * dv + 2 * hk * dk) * (kc - 1) * 2
ssm = hv * dv * dk * 4
p = n_lin * (conv + ssm) / 2**30
R = (K + 0.5) * p * (1 + r) / r + p * mrr * D
f = (R + B - A) / B
print(f"{math.floor(f * 1000 + 0.5) / 1000:.3f}")
print(f"# B={B} A={A} p={p:.4f}GiB R={R:.3f} f={f:.5f}", file=sys.stderr)
