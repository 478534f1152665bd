#!/usr/bin/env bash
# The H200 recording run: installs carried wheels, runs the senet154 study with CUPTI and with
# torch.profiler, a batch-8 study for `diff`, and writes sessions, raw traces and logs to $OUT.
# Run through the device tool with carry [".whl"]; it needs no network.
source "$(dirname "$0")/h200_setup.sh"
mkdir -p /tmp/raw
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
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
