#!/usr/bin/env bash
# Does a longer discard at each switch of variant take away the steps an H100's rounds show in a whole study and not
# alone (benchmarks/round_steps.py: a level that moves tens of milliseconds into a variant's round and holds to its
# end)? The main job once to fill the caches (its session not kept), then each variant alone against the whole study
# (benchmarks/row_independence.py, one alternation) once per discard in DISCARDS (samples' worth, `--switch-warmup`,
# on a GPU at least profilers/timing.py's SWITCH_MIN_MS; default "5", the default), each folder's sessions stepped
# by benchmarks/round_steps.py;
# nvidia-smi samples the SM and memory clocks, power and clock event reasons every 20 ms meanwhile (clocks.csv).
# Before the rows, a warm main job, timed (warm.log). The sessions, the rows and steps end in sessions.tar.gz.
#   OUT=... PREPARE=0 bash benchmarks/h100_switch_discard.sh   # device tool, carry [".whl"]
source "$(dirname "$0")/h200_setup.sh"
exec > >(tee -a "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
run senet154 --out "$OUT/prime.json" > "$OUT/prime.log" 2>&1; tail -1 "$OUT/prime.log"; rm -f "$OUT/prime.json"
start=$(date +%s%N); run senet154 --out "$OUT/warm.json" > "$OUT/warm.log" 2>&1  # a warm main job, its session kept
echo "warm main job: $(( ($(date +%s%N) - start) / 1000000 )) ms, $(tail -1 "$OUT/warm.log")"
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
  --format=csv -lms 20 > "$OUT/clocks.csv" &
sampler=$!
for DISCARD in ${DISCARDS:-5}; do
  mkdir -p "$OUT/discard-$DISCARD"; echo "#### discard $DISCARD at ${SECONDS} s"
  python3 benchmarks/row_independence.py senet154 --repeat 1 --out "$OUT/discard-$DISCARD" -- --switch-warmup "$DISCARD" \
    2>"$OUT/discard-$DISCARD/progress.log" | tee "$OUT/discard-$DISCARD/rows.txt"
  python3 benchmarks/round_steps.py "$OUT/discard-$DISCARD"/*.json > "$OUT/discard-$DISCARD/round-steps.txt"
  grep together "$OUT/discard-$DISCARD/round-steps.txt"
done
kill "$sampler"
(cd "$OUT" && tar -czf sessions.tar.gz warm.json discard-* && rm -rf warm.json discard-*)  # few files come back
echo "#### done at ${SECONDS} s"
