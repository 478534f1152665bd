#!/usr/bin/env bash
# The main job twice on the lent H200, lean: a fresh install without the image's packages compiled first
# (PREPARE=0: the first run's wall time then includes compiling them, so it is no cold-start figure), `trt-inspect
# senet154` with every cache empty, then with the caches it wrote; their diff, and with REF=SESSION each run's diff
# against that session (RUNS="cold": the first run alone). Logs, sessions and diffs in $OUT/main (tarred as main.tgz).
# Run through the device tool with carry [".whl"] (and the folder REF lies in).
rm -rf /tmp/pycache /tmp/site /tmp/tih /tmp/torchinductor_* ~/.triton/cache
PREPARE=0 source "$(dirname "$0")/h200_setup.sh"
mkdir -p "$OUT/main"
python3 -c "from builders.engine.weight_residency import gpu_l2_bytes; print('GPU L2 bytes', gpu_l2_bytes())"
for RUN in ${RUNS:-cold warm}; do
    start=$(date +%s%N)
    run senet154 --out "$OUT/main/senet154-$RUN.json" > "$OUT/main/$RUN.log" 2>&1
    echo "$RUN: wall_ms=$(( ($(date +%s%N) - start) / 1000000 )) $(grep '^rc=' "$OUT/main/$RUN.log")" | tee -a "$OUT/main/$RUN.log"
done
differ() {  # differ A B NAME: `trt-inspect diff A B` in NAME.txt, its exit code echoed
    trt-inspect diff "$1" "$2" > "$OUT/main/$3.txt"; echo "$3: exit $?"
}
[ ! -f "$OUT/main/senet154-warm.json" ] || differ "$OUT/main/senet154-cold.json" "$OUT/main/senet154-warm.json" diff-cold-warm
for RUN in ${RUNS:-cold warm}; do [ -z "${REF:-}" ] || differ "$REF" "$OUT/main/senet154-$RUN.json" "diff-committed-$RUN"; done
tar -C "$OUT" -czf "$OUT/main.tgz" main && rm -rf "${OUT:?}/main"
