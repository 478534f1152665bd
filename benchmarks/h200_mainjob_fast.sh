#!/usr/bin/env bash
# The main job with the quantize layer as a Triton kernel, worker-compiled plans taken back graph by graph, and CUPTI
# recording launch APIs only: benchmarks/h200_mainjob_engine.sh, sourced (a fresh install, three runs, the diffs of
# each pair and against the last committed main job), then per run and variant what came from the caches, how the
# quantize layers ran and what the tracer recorded (checks.txt); then a fourth run with every cache warm under
# benchmarks/stack_sampler.py (sampled.txt), and a fifth with the engine's and Triton's caches cold (run-cold.log: a
# first run again, on a machine that has run the tool before; COLD_DRIVER_CACHE=1 also keeps the CUDA driver's
# compiled-kernel cache out, as on a machine's first run; BOTH_COLD=1 adds that run after the first, on one machine;
# SAMPLE=0 leaves the sampled run out, COLD=0 the cold run). Run through the device tool with carry [".whl"].
COMMITTED=benchmarks/results/h200/mainjob-caches/senet154-run2.json
source "$(dirname "$0")/h200_mainjob_engine.sh"
tar -C "$OUT" -xzf "$OUT/sessions.tar.gz" sessions/senet154-run1.json sessions/senet154-run2.json
for run in 1 2; do python3 -c "
import collections, json, sys
for v in json.load(open(sys.argv[1]))['variants']:
    layers = v.get('layers', [])
    convs = [l['attrs'] for l in layers if 'plan_cached' in l.get('attrs', {})]
    quantize = collections.Counter(l.get('tactic') for l in layers if l.get('kind') == 'quantize')
    twin = any('FP8 calibration cache' in n for n in v.get('notes', []))
    trace = v.get('trace') or {}
    print(f'run $run {v[\"name\"]}: {len(convs)} cuDNN layers, {sum(a[\"plan_cached\"] for a in convs)} plans from the '
          f'timing cache; calibration cache: {twin}; quantize layers: {dict(quantize)}; trace: '
          f'{trace.get(\"records\")} kernels, {trace.get(\"unattributed\")} unattributed, note: {trace.get(\"note\")!r}')
" "$OUT/sessions/senet154-run$run.json"; done > "$OUT/checks.txt"
cat "$OUT/install.txt" "$OUT/checks.txt" "$OUT/diffs.txt" > "$OUT/all-checks.txt" && rm "$OUT/install.txt" "$OUT/diffs.txt"
mv "$OUT/all-checks.txt" "$OUT/checks.txt"
mv "$OUT/sessions/senet154-run2.json" "$OUT/" && rm -rf "$OUT/sessions" "$OUT/sessions.tar.gz"
sampled() {  # sampled LABEL: trt-inspect senet154 under the stack sampler
    local label=$1 start=${EPOCHREALTIME/./}
    timeout 150 python3 benchmarks/stack_sampler.py "/tmp/$label.top.txt" senet154 --out "/tmp/$label.json" \
        </dev/null > "/tmp/$label.log" 2>&1
    echo "== $label: rc=$? wall=$(( (${EPOCHREALTIME/./} - start) / 1000 )) ms" >> "$OUT/sampled.txt"
    cat "/tmp/$label.top.txt" >> "$OUT/sampled.txt"
}
[ "${SAMPLE:-1}" = 1 ] && sampled second-warm
du -sh ~/.nv/ComputeCache ~/.triton "$TRT_INSPECT_HOME" 2>&1 | sed 's/^/caches after the runs: /' >> "$OUT/checks.txt"
cold_run() {  # cold_run LOG DRIVER_CACHE_DISABLED: a run with the engine's and Triton's caches cold
    (export TRT_INSPECT_HOME=/tmp/tih-cold-$2 TRITON_CACHE_DIR=/tmp/triton-cold-$2 CUDA_CACHE_DISABLE=$2
     stamped 150 "$OUT/$1" senet154 --out "/tmp/cold-$2.json")
    echo "$1: the engine's and Triton's caches cold, CUDA_CACHE_DISABLE=$2" >> "$OUT/checks.txt"
}
[ "${COLD:-1}" = 1 ] && cold_run run-cold.log "${COLD_DRIVER_CACHE:-0}"
[ "${BOTH_COLD:-0}" = 1 ] && cold_run run-cold-nodriver.log 1
head -12 "$OUT/checks.txt"
grep "^==" "$OUT/sampled.txt"
# what comes back names no machine's paths: the output folder as $OUT, scratch files as $TMP, the home folder as ~
sed -i -e "s#$OUT#\$OUT#g" -e "s#/tmp/#\$TMP/#g" -e "s#$HOME/#~/#g" "$OUT"/*.txt "$OUT"/*.log "$OUT"/*.json
