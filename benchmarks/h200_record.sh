#!/usr/bin/env bash
# The H200 recording run: installs carried wheels, runs the senet154 study with CUPTI and with
# torch.profiler, a batch-8 study for `diff`, and writes sessions, raw traces and logs to $OUT.
# Run through the device tool with carry [".whl"]; it needs no network.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/raw
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site TRT_INSPECT_HOME=/tmp/tih PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-build-isolation . >/dev/null 2>&1 || { echo "project install failed"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
run() { echo "== trt-inspect $*"; python3 -m inspector "$@"; echo "rc=$?"; }
run run senet154 --device cuda --variants fp16,fp8 --fp8-layout all --fp8-layout no-se \
    --raw-trace /tmp/raw/senet154 --out "$OUT/senet154-h200.json" 2> >(grep -v Warning >&2)
run run senet154 --device cuda --variants fp16 --tracer torch --rounds 1 --iters 10 \
    --out /tmp/raw/senet154-h200-torchprof.json 2>/dev/null
run run senet154 --device cuda --batch 8 --variants fp16,fp8 --fp8-layout no-se \
    --out "$OUT/senet154-h200-b8.json" 2>/dev/null
run run resnet18 --device cuda --variants fp16,fp8 --fp8-layout all --raw-trace /tmp/raw/resnet18 \
    --out /tmp/raw/resnet18-h200.json 2>/dev/null
run show /tmp/raw/senet154-h200-torchprof.json
cp /tmp/raw/senet154/fp16.trace.json "$OUT/senet154-fp16.trace.json"
cp /tmp/raw/resnet18/fp8-all.trace.json "$OUT/resnet18-fp8-all.trace.json"
tar -C /tmp/raw -czf "$OUT/extra.tgz" . 2>/dev/null
ls -la "$OUT"
