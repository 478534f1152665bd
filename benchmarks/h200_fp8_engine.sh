#!/usr/bin/env bash
# The cuDNN / cuBLASLt engine on the lent H200: real FP8 kernels end to end beside PyTorch fp16 and the engine's
# own fp16, from a fresh install of the project with the fp8 extra (wheels carried in .whl). Run through the
# device tool with carry [".whl"]; sessions, logs and the report land in $OUT (tarred, at most 8 files come back).
#   PHASE=smoke: resnet18 and senet154 batch 1 (recipe all) only; PHASE=full (default): everything below.
source "$(dirname "$0")/h200_setup.sh"
PHASE=${PHASE:-full}
S="$OUT/sessions"
mkdir -p "$S"
python3 -m pip list 2>/dev/null | grep -i -E "^(torch|nvidia-cudnn-frontend|nvidia-cudnn-cu13|cupti-python|nvidia-modelopt) "
timed() {  # timed LIMIT ARGS...: one study under a time limit, its wall time and exit code
    local limit=$1 started=$SECONDS
    shift
    echo "== trt-inspect $*"
    timeout "$limit" trt-inspect "$@" </dev/null 2>&1 | grep -v "^trt-inspect: \[timing\] round"
    echo "rc=${PIPESTATUS[0]} wall=$((SECONDS - started))s"
}
RECIPES="cudnn-fp8-all,cudnn-fp8-no-se,cudnn-fp8-no-se-no-first-stage,cudnn-fp8-pointwise"
if [ "$PHASE" = smoke ]; then
    timed 60 resnet18 --variants fp16,cudnn-fp16,cudnn-fp8-all --opt-level 1 --out "$S/resnet18-engine.json"
    timed 150 senet154 --variants fp16,cudnn-fp8-all,fp8-all --opt-level 1 --out "$S/senet154-engine-b1.json"
else  # the default --opt-level (3: four plans timed per graph), as a user runs it; SegFormer and the other models:
    # benchmarks/h200_segformer_engine.sh
    timed 260 senet154 --variants "fp16,cudnn-fp16,$RECIPES" --out "$S/senet154-engine-b1.json"
    timed 290 senet154 --batch 32 --variants "fp16,cudnn-fp16,$RECIPES" --out "$S/senet154-engine-b32.json"
fi
python3 benchmarks/engine_report.py "$S"/*.json 2>&1 | tee "$OUT/engine-report.txt"
for f in "$S"/senet154-engine-b1.json "$S"/senet154-engine-b32.json; do
    [ -f "$f" ] && trt-inspect groups "$f" --by role </dev/null 2>&1 | head -80
done
tar -C "$OUT" -czf "$OUT/sessions.tar.gz" sessions && rm -rf "$S"
ls -la "$OUT"
