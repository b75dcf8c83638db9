#!/usr/bin/env bash
# Device side. Boot one SGLang server, keep its whole log, stop it once it is
# ready (or has died, or after TIMEOUT seconds), then wait for the GPU to empty.
# usage: boot_one.sh NAME TIMEOUT_S sglang-launch-args...
# writes $OUT/NAME.log
name=$1; tmo=$2; shift 2
log=${OUT:-/tmp}/$name.log
port=30000
{
  echo "# boot record: $name (tools/gpu/boot_one.sh)"
  echo "# date_utc: $(date -u +%FT%TZ)"
  echo "# command: python3 -m sglang.launch_server $*"
  echo "# bundled configs (src/specbench/data/configs): ${BOOT_NOTE:-}"
  echo "# env: $(env | grep -E '^(SGLANG|NCCL|TORCH|NVSHMEM|CUDA|PYTHONPATH|HF_|TRANSFORMERS_)' | sort | tr '\n' ' ')"
  python3 - <<'PY' 2>&1 | sed 's/^/# /'
import importlib.metadata as md, sys, torch
v = lambda n: (md.version(n) if n else None)
print("python", sys.version.split()[0], "| torch", torch.__version__, "cuda", torch.version.cuda)
for n in ["sglang", "sglang-kernel", "flashinfer-python", "transformers", "tokenizers", "triton", "apache-tvm-ffi"]:
    try: print(n, md.version(n))
    except Exception as e: print(n, "?", e)
print("gpu", torch.cuda.get_device_name(0), "x", torch.cuda.device_count(), "total_bytes", torch.cuda.mem_get_info()[1])
PY
  echo "# nvidia-smi before boot:"
  nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv | sed 's/^/#   /'
  echo "# ---- server output ----"
} > "$log"
t0=$(date +%s)
setsid python3 -m sglang.launch_server "$@" >> "$log" 2>&1 < /dev/null &
pid=$!
status=timeout
while :; do
  if grep -q "The server is fired up and ready to roll" "$log"; then status=ready; break; fi
  if ! kill -0 $pid 2>/dev/null; then status=exited; break; fi
  [ $(( $(date +%s) - t0 )) -ge "$tmo" ] && break
  sleep 2
done
t1=$(date +%s)
{
  echo "# ---- end of server output at status=$status after $((t1-t0)) s ----"
  echo "# nvidia-smi while server up:"
  nvidia-smi --query-gpu=memory.total,memory.used --format=csv | sed 's/^/#   /'
  nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv | sed 's/^/#   /'
  if [ $status = ready ]; then
    echo "# GET /get_server_info:"
    python3 -c "import urllib.request,sys;print(urllib.request.urlopen('http://127.0.0.1:$port/get_server_info',timeout=20).read().decode())" 2>&1 | sed 's/^/#   /'
  fi
} >> "$log"
kill -TERM -- -$pid 2>/dev/null
for i in $(seq 1 20); do kill -0 -- -$pid 2>/dev/null || break; sleep 1; done
kill -KILL -- -$pid 2>/dev/null
for i in $(seq 1 60); do
  u=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | sort -n | tail -1)
  [ "${u:-0}" -lt 1500 ] && break; sleep 1
done
echo "# server stopped; gpu memory.used after stop: ${u} MiB; total wall $(( $(date +%s) - t0 )) s" >> "$log"
echo "[boot_one] $name: $status in $((t1-t0)) s"
grep -E "Load weight (begin|end)|KV Cache is allocated|Mamba Cache is allocated|Memory pool end|max_total_num_tokens=|max_running_requests|Capture cuda graph|Error|error:|Traceback|DFLASH|draft" "$log" | grep -v "^# command" | cut -c1-300 | head -24
