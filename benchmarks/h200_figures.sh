#!/usr/bin/env bash
# On the H200: do the figures hold beyond senet154 at batch 1? PART=rows: the main job's variants each timed alone
# and in the whole study (benchmarks/row_independence.py, 2 alternations); PART=spread: per-sample CoV and p99 of
# seven families of 0.2-5 ms (benchmarks/small_model_spread.py). One part per device call (each takes minutes).
# Run through the device tool with carry [".whl"], e.g. `PART=rows bash benchmarks/h200_figures.sh`.
rm -rf /tmp/pycache /tmp/site /tmp/tih  # a machine kept warm between calls keeps /tmp
source "$(dirname "$0")/h200_setup.sh"
case "${PART:-rows}" in
  rows) python3 benchmarks/row_independence.py senet154 --repeat 2 --out "$OUT/rows" 2>"$OUT/rows-progress.log" \
          | tee "$OUT/row-independence.txt" ;;
  spread) python3 benchmarks/small_model_spread.py --out "$OUT/spread" 2>"$OUT/spread-progress.log" \
          | tee "$OUT/small-model-spread.txt" ;;
  *) echo "PART must be rows or spread"; exit 2 ;;
esac
