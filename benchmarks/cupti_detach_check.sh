#!/usr/bin/env bash
# On a GPU: what CUPTI left attached after the traces costs the timing rounds, and whether the discard's floor after a
# switch of variant is still needed once the tracer detaches CUPTI (profilers/kernel_trace.py, `_detach`).
#   1. benchmarks/capture_levels.py, one process each: the tracer's detach on (--traced), then off (--attached)
#   2. the main job cold (filling the caches), then warm twice; a warm run with the detach switched off
#      (profilers.kernel_trace.DETACH_AFTER_TRACE); two warm runs with the discard's floor at 0 ms
#      (profilers.timing.SWITCH_MIN_MS); diffs against the first warm run
#   Everything but log.txt ends in results.tar.gz (the device tool returns only a few files a call).
#   3. benchmarks/round_steps.py and round_medians.py on the warm sessions: does a round still step after a switch?
#   OUT=... PREPARE=0 bash benchmarks/cupti_detach_check.sh   # device tool, carry [".whl"]
source "$(dirname "$0")/h200_setup.sh"
exec > >(tee -a "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name,driver_version,pci.bus_id --format=csv,noheader
for FLAGS in "--traced" "--traced --attached"; do
  python3 benchmarks/capture_levels.py --runs 1 --captures 3 $FLAGS 2>&1 | tee -a "$OUT/capture-levels.txt"
done
# patched: the CLI in a process whose tracer keeps CUPTI attached, or whose discard has no floor
ATTACHED='import profilers.kernel_trace as k; k.DETACH_AFTER_TRACE = False'
NO_FLOOR='import profilers.timing as t; t.SWITCH_MIN_MS = 0.0'
patched() {  # label patch: the main job in a process that ran `patch` first
  local label=$1 patch=$2 s=$(date +%s%N)
  python3 -c "$patch
import sys
from inspector.cli import main
sys.exit(main(['senet154', '--out', '$OUT/senet154-$label.json']))" </dev/null > "$OUT/$label.log" 2>&1
  echo "$label rc=$? wall_ms=$(( ($(date +%s%N) - s) / 1000000 ))"
}
for RUN in cold warm warm2; do
  s=$(date +%s%N); trt-inspect senet154 --out "$OUT/senet154-$RUN.json" </dev/null > "$OUT/$RUN.log" 2>&1
  echo "$RUN rc=$? wall_ms=$(( ($(date +%s%N) - s) / 1000000 ))"
done
patched attached "$ATTACHED"
patched nofloor "$NO_FLOOR"
patched nofloor2 "$NO_FLOOR"
for RUN in warm2 attached nofloor nofloor2; do
  trt-inspect diff "$OUT/senet154-warm.json" "$OUT/senet154-$RUN.json" > "$OUT/diff-warm-$RUN.txt"
  echo "diff warm $RUN: exit $?"
done
python3 benchmarks/round_steps.py "$OUT"/senet154-{warm,warm2,attached,nofloor,nofloor2}.json \
  > "$OUT/round-steps.txt" 2>&1
python3 benchmarks/round_medians.py warm="$OUT/senet154-warm.json" warm2="$OUT/senet154-warm2.json" \
  attached="$OUT/senet154-attached.json" nofloor="$OUT/senet154-nofloor.json" nofloor2="$OUT/senet154-nofloor2.json" \
  > "$OUT/round-medians.txt" 2>&1
grep -h "^fp32 \|^fp16 \|^cudnn" "$OUT"/{warm,warm2,attached,nofloor,nofloor2}.log | cut -c1-60
(cd "$OUT" && tar -czf results.tar.gz --exclude=results.tar.gz --exclude=log.txt ./* && find . -mindepth 1 \
  ! -name results.tar.gz ! -name log.txt -delete)
