#!/usr/bin/env bash
# The main job with both of the engine's caches (serialized plans in the timing cache, the FP8 calibration cache of
# scales and simulated outputs): benchmarks/h200_mainjob_engine.sh, sourced (a fresh install, three runs, their
# diffs and the diff against the committed session), then what each run took from the caches, then a fourth run
# (caches warm) under benchmarks/stack_sampler.py: where a second run's time goes now.
# Run through the device tool with carry [".whl"]; logs, run 2's session and the sampler's report land in $OUT.
source "$(dirname "$0")/h200_mainjob_engine.sh"
tar -C "$OUT" -xzf "$OUT/sessions.tar.gz" sessions/senet154-run2.json sessions/senet154-run1.json
for run in 1 2; do python3 -c "
import json, sys
for v in json.load(open(sys.argv[1]))['variants']:
    convs = [l['attrs'] for l in v['layers'] if 'plan_cached' in l.get('attrs', {})]
    twin = any('FP8 calibration cache' in n for n in v['notes'])
    print('run $run', v['name'], len(convs), 'cuDNN layers,', sum(a['plan_cached'] for a in convs),
          'plans from the timing cache; scales and simulated outputs from the calibration cache:', twin,
          '; simulated agreement', (v.get('simulation') or {}).get('top1_agreement'))" "$OUT/sessions/senet154-run$run.json"
done | tee "$OUT/caches.txt"
mv "$OUT/sessions/senet154-run2.json" "$OUT/" && rm -rf "$OUT/sessions" "$OUT/sessions.tar.gz"
start=${EPOCHREALTIME/./}
timeout 120 python3 benchmarks/stack_sampler.py "$OUT/second-sampled.top.txt" senet154 --out /tmp/second-sampled.json \
    </dev/null > /tmp/second-sampled.log 2>&1
echo "sampled run with warm caches: rc=$? wall=$(( (${EPOCHREALTIME/./} - start) / 1000 )) ms" | tee -a "$OUT/caches.txt"
head -50 "$OUT/second-sampled.top.txt"
