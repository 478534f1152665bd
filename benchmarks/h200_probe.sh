#!/usr/bin/env bash
# The FP8 probe on the lent H200: senet154 and the SegFormer-B0 encoder at batch 1 and 32,
# real FP8 kernels (cuDNN frontend, torch._scaled_mm), sessions and this log in $OUT. No network
# there: installs the wheels carried in $WHEELS (default .whl; the device tool's README says how to
# fetch them), then this checkout. Run from the checkout's root, e.g. with carry [".whl"]:
#   bash benchmarks/h200_probe.sh 2>&1 | tee "$OUT/probe-log.txt"
set -uo pipefail
OUT=${OUT:-/tmp/out}
WHEELS=${WHEELS:-.whl}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$WHEELS"/*.whl || exit 1
export PYTHONPATH=/tmp/site TRT_INSPECT_HOME=/tmp/tih PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-build-isolation . >/dev/null 2>&1 || { echo "project install failed"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
python3 -m pip list 2>/dev/null | grep -i -E "^(torch|nvidia-cudnn|nvidia-cuda-cupti|cupti-python|timm|transformers) "
probe() {  # probe SECONDS ARGS...: one probe under a time limit, its wall time and exit code
    local limit=$1 started=$SECONDS
    shift
    echo "== trt-inspect probe $*"
    timeout "$limit" trt-inspect probe "$@" </dev/null
    echo "rc=$? wall=$((SECONDS - started))s"
}
probe 110 senet154 --out "$OUT/senet154-probe-b1.json"
probe 70 hf:segformer --layers 'model.segformer.*' --out "$OUT/segformer-b0-probe-b1.json"
probe 110 senet154 --batch 32 --out "$OUT/senet154-probe-b32.json"
probe 70 hf:segformer --layers 'model.segformer.*' --batch 32 --out "$OUT/segformer-b0-probe-b32.json"
if [ -f "$OUT/senet154-probe-b1.json" ]; then
    trt-inspect groups "$OUT/senet154-probe-b1.json" </dev/null
    trt-inspect export "$OUT/senet154-probe-b1.json" --sections comparison,method </dev/null
fi
ls -la "$OUT"
