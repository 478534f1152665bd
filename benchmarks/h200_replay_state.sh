#!/usr/bin/env bash
# Is the 9-11 % between a cold and a warm main job's replays the host's or the GPU's, and does each engine variant's
# quality come from its own outputs? The replay-state probe in two fresh processes, then the main job's variants with
# empty caches and again with warm ones, their quality step watched (benchmarks/engine_outputs_check.py).
#   OUT=... PREPARE=0 bash benchmarks/h200_replay_state.sh
source benchmarks/h200_setup.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader | tee "$OUT/replay-state.txt"
for i in 1 2; do python3 benchmarks/replay_state_probe.py 2>&1 | tee -a "$OUT/replay-state.txt"; done
for run in cold warm; do
  echo "== $run: engine_outputs_check.py senet154" | tee -a "$OUT/replay-state.txt"
  python3 benchmarks/engine_outputs_check.py senet154 --variants fp16,cudnn-fp16,cudnn-fp8-all,cudnn-fp8-no-se \
    --out "$OUT/study-$run.json" </dev/null 2>&1 | grep -v "^trt-inspect: \[" | grep -v "^note (" | head -40 \
    | tee -a "$OUT/replay-state.txt"
done
