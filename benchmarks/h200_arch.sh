#!/usr/bin/env bash
# The architecture check on the H200: the README's main job, headless, after the architecture refactor,
# then its diff against the session committed before it (schema 1, read through the migration).
# Run through the device tool with carry [".whl"].
source "$(dirname "$0")/h200_setup.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
start=$(date +%s)
run senet154 --out "$OUT/senet154-arch.json" 2> >(grep -v -i warn >&2)
echo "wall_s=$(( $(date +%s) - start ))"
run diff tests/data/h200/senet154-h200.json "$OUT/senet154-arch.json"
run groups "$OUT/senet154-arch.json" --variant fp16 --variant fp8-all
