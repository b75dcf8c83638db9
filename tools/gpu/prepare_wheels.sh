#!/usr/bin/env bash
# Build the wheel chunks that let SGLang 0.5.15.post1 boot on the device machine
# (Python 3.12, torch 2.11.0+cu130 preinstalled, no network there).
# Run here, on the CPU machine, from the repository root:
#   bash tools/gpu/prepare_wheels.sh
# Result: .devwhl-a/ and .devwhl-b/ (each < 64 MiB, ignored by .gitignore
# '/.devwhl*/'), to be carried in two successive `run` calls.
# Set WHEEL_CACHE to a folder that already holds the big wheels
# (sglang, sglang_kernel, flashinfer_python) to skip downloading them again.
set -euo pipefail
root=$(pwd)
dl=$root/.devwhl-dl; mkdir -p "$dl"
A=$root/.devwhl-a; B=$root/.devwhl-b; rm -rf "$A" "$B"; mkdir -p "$A" "$B"
PIP="python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
 --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
 --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 -d $dl"
if [ -n "${WHEEL_CACHE:-}" ]; then cp -n "$WHEEL_CACHE"/sglang-0.5.15.post1-*.whl "$WHEEL_CACHE"/sglang_kernel-0.4.4-*.whl "$WHEEL_CACHE"/flashinfer_python-0.6.12-*.whl "$dl"/ || true; fi
ls "$dl"/sglang-0.5.15.post1-*.whl >/dev/null 2>&1 || $PIP sglang==0.5.15.post1
ls "$dl"/flashinfer_python-0.6.12-*.whl >/dev/null 2>&1 || $PIP flashinfer_python==0.6.12
ls "$dl"/sglang_kernel-0.4.4-*.whl >/dev/null 2>&1 || $PIP sglang-kernel==0.4.4   # 615 MB
# Missing runtime imports of `sglang.launch_server` found by an import trace
# (transformers 5.17 on the image breaks sglang 0.5.15: it pins 5.12.1, which
# in turn needs tokenizers <=0.23.0, so both travel).
$PIP transformers==5.12.1 tokenizers==0.22.2 \
 ipython==9.18.1 traitlets==5.16.1 ipython_pygments_lexers==1.1.1 decorator==5.3.1 \
 compressed-tensors==0.20.1 loguru==0.7.3 dill==0.4.1 distro==1.9.0 fastapi==0.165.0 starlette==1.10.0 \
 gguf==0.19.0 jsonschema==4.26.0 jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1 \
 msgspec==0.23.0 openai==2.6.1 jiter==0.19.0 orjson==3.13.0 partial-json-parser==0.2.1.1.post7 \
 pybase64==1.5.1 pydantic==2.14.4 pydantic_core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 \
 python-multipart==0.0.34 setproctitle==1.3.8 sniffio==1.3.1 soundfile==0.14.0 cffi==2.1.1 \
 apache-tvm-ffi==0.1.11 uvicorn==0.54.0 watchfiles==1.3.0 pyzmq==27.3.0 zstandard==0.25.0 \
 opentelemetry-api==1.45.2 importlib-metadata==10.2.0 \
 tomli-w==1.2.0   # fastapi 0.165 imports opentelemetry at import time; tomli-w: specbench calibrate --quick
# Repack sglang_kernel without FlashAttention-3 (flash_ops, 1.7 GB unpacked),
# FlashMLA and the sm100 build: on an H200 (sm90) SGLang loads sm90/common_ops.
k=$(ls "$dl"/sglang_kernel-0.4.4-*.whl); t=$(mktemp -d)
(cd "$t" && unzip -q "$k" -x 'sgl_kernel/flash_ops.abi3.so' 'sgl_kernel/flashmla_ops.abi3.so' 'sgl_kernel/sm100/*' \
  && grep -v -E '^sgl_kernel/(flash_ops\.abi3\.so|flashmla_ops\.abi3\.so|sm100/)' sglang_kernel-0.4.4.dist-info/RECORD > R \
  && mv R sglang_kernel-0.4.4.dist-info/RECORD \
  && zip -q -r -6 "$A/$(basename "$k")" sgl_kernel triton_kernels sglang_kernel-0.4.4.dist-info)
rm -rf "$t"
cp "$dl"/flashinfer_python-0.6.12-*.whl "$dl"/transformers-5.12.1-*.whl "$A"/
for f in "$dl"/*.whl; do
  case $(basename "$f") in sglang_kernel-*|flashinfer_python-*|transformers-*) ;; *) cp "$f" "$B"/ ;; esac
done
du -sh "$A" "$B"; ls "$A" "$B"
