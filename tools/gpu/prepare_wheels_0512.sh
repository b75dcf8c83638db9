#!/usr/bin/env bash
# Wheel chunks for SGLang 0.5.12.post1, installed on the device machine ON TOP
# of the 0.5.15.post1 install (/tmp/site, from prepare_wheels.sh's chunks): only
# the wheels whose pins differ travel, into /tmp/site12, which goes first on
# PYTHONPATH. Everything else 0.5.12.post1 imports (import trace, see README) is
# on the image or in .devwhl-b.
# Run here, on the CPU machine, from the repository root:
#   bash tools/gpu/prepare_wheels_0512.sh
# Result: .devwhl-12a/ (sglang_kernel 0.4.2.post2 repacked, flashinfer_python
# 0.6.11.post1, apache-tvm-ffi 0.1.9) and .devwhl-12b/ (sglang 0.5.12.post1,
# transformers 5.6.0), ignored by .gitignore ('/.devwhl*/').
# Pins of sglang 0.5.12.post1 that matter here: torch==2.11.0 (same as the
# image), sglang-kernel==0.4.2.post2 (its .so files need libcudart.so.13,
# libcublas.so.13, libnvrtc.so.13: cu130, fine), flashinfer_python==0.6.11.post1,
# transformers==5.6.0 (tokenizers<=0.23.0: the 0.22.2 of .devwhl-b does),
# apache-tvm-ffi==0.1.9.
set -euo pipefail
root=$(pwd)
dl=$root/.devwhl-dl12; mkdir -p "$dl"
A=$root/.devwhl-12a; B=$root/.devwhl-12b; rm -rf "$A" "$B"; mkdir -p "$A" "$B"
PIP="python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
 --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
 --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 -d $dl"
if [ -n "${WHEEL_CACHE:-}" ]; then cp -n "$WHEEL_CACHE"/sglang-0.5.12.post1-cp312-*.whl "$WHEEL_CACHE"/sglang_kernel-0.4.2.post2-*.whl "$WHEEL_CACHE"/flashinfer_python-0.6.11.post1-*.whl "$dl"/ 2>/dev/null || true; fi
ls "$dl"/sglang-0.5.12.post1-cp312-*.whl >/dev/null 2>&1 || $PIP sglang==0.5.12.post1
ls "$dl"/sglang_kernel-0.4.2.post2-*.whl >/dev/null 2>&1 || $PIP sglang-kernel==0.4.2.post2   # 322 MB
$PIP flashinfer_python==0.6.11.post1 transformers==5.6.0 apache-tvm-ffi==0.1.9
# Repack sglang_kernel like prepare_wheels.sh does, and also drop the mscclpp
# files this wheel carries at the top level (lib/, lib64/, include/,
# _mscclpp*.so: only for the mscclpp all-reduce, not used at TP 1).
k=$(ls "$dl"/sglang_kernel-0.4.2.post2-*.whl); t=$(mktemp -d); di=sglang_kernel-0.4.2.post2.dist-info
(cd "$t" && unzip -q "$k" 'sgl_kernel/*' 'triton_kernels/*' "$di/*" \
   -x 'sgl_kernel/flash_ops.abi3.so' 'sgl_kernel/flashmla_ops.abi3.so' 'sgl_kernel/sm100/*' \
  && grep -E '^(sgl_kernel|triton_kernels|sglang_kernel-)' "$di/RECORD" \
     | grep -v -E '^sgl_kernel/(flash_ops\.abi3\.so|flashmla_ops\.abi3\.so|sm100/)' > R \
  && mv R "$di/RECORD" \
  && zip -q -r -6 "$A/$(basename "$k")" sgl_kernel triton_kernels "$di")
rm -rf "$t"
cp "$dl"/flashinfer_python-0.6.11.post1-*.whl "$dl"/apache_tvm_ffi-0.1.9-*.whl "$A"/
cp "$dl"/sglang-0.5.12.post1-cp312-*.whl "$dl"/transformers-5.6.0-*.whl "$B"/
du -sh "$A" "$B"; ls "$A" "$B"
