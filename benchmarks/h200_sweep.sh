#!/usr/bin/env bash
# The sweep on the two-GPU H200 machine (kind nvidia-h200-x2): the matrix benchmarks/h200_sweep.toml
# (senet154 and resnet50 x batch 1 and 32, fp16 and FP8) with `--executor ray` on both GPUs, then the
# same matrix on one GPU (a fresh folder, so nothing is skipped), the wall-time ratio (target <= 0.6),
# and the merged tables. Run through the device tool with carry [".whl-sweep"]: ray (Java jar and source maps stripped to fit the
# 64 MiB carry), submitit, jsonschema and what the project needs for FP8 (modelopt and its dependencies).
# Usage: benchmarks/h200_sweep.sh [both|two|one]   (one command each if 10 minutes are too few for both)
WHEELS=.whl-sweep source "$(dirname "$0")/h200_setup.sh"
MODE=${1:-both}
MATRIX=benchmarks/h200_sweep.toml
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
python3 -c "import ray, submitit; print('ray', ray.__version__, 'submitit', submitit.__version__)" || exit 3

sweep() {  # sweep GPUS FOLDER: one timed sweep, its wall time in FOLDER.wall
  local start end
  start=$(date +%s.%N)
  run sweep "$MATRIX" --executor ray --gpus "$1" --out "$2" 2> >(grep -v -i warn >&2)
  end=$(date +%s.%N)
  python3 -c "print(f'{$end - $start:.1f}')" | tee "$2.wall"
  echo "wall_s($1 GPU)=$(cat "$2.wall")"
}

[ "$MODE" = one ] || sweep 2 "$OUT/sweep-2gpu"
[ "$MODE" = two ] || sweep 1 "$OUT/sweep-1gpu"
if [ -f "$OUT/sweep-2gpu.wall" ] && [ -f "$OUT/sweep-1gpu.wall" ]; then
  python3 -c "a=$(cat "$OUT/sweep-2gpu.wall"); b=$(cat "$OUT/sweep-1gpu.wall"); print(f'ratio 2 GPUs / 1 GPU = {a / b:.2f} (target <= 0.6)')"
fi
for folder in "$OUT/sweep-2gpu" "$OUT/sweep-1gpu"; do
  [ -f "$folder/merged.json" ] || continue
  # which GPU each job ran on (the per-row environment), then the tables
  python3 - "$folder/merged.json" <<'PY'
import sys, orjson
d = orjson.loads(open(sys.argv[1], "rb").read())
for job in d["merge"]["jobs"]:
    gpu = job["environment"]["gpu"] or {}
    print(job["label"], gpu.get("name"), gpu.get("uuid"))
PY
  run export "$folder/merged.json" --format matrix
done
[ -f "$OUT/sweep-2gpu/merged.json" ] && run export "$OUT/sweep-2gpu/merged.json" --format study
run sweep "$MATRIX" --executor ray --gpus 2 --out "$OUT/sweep-2gpu" 2>&1 | grep -E "finished earlier|rc="  # rerun: all 4 skipped
