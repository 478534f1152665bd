#!/usr/bin/env bash
# The main job with serialized plans in the timing cache and plans compiled in worker processes
# (benchmarks/h200_mainjob_engine.sh, sourced: a fresh install, three runs, their diffs and the diff against the
# committed session); then a first run again (empty caches, bytecode kept) under benchmarks/stack_sampler.py, to
# see where a first run's time still goes; then whether cuDNN's plans survive serialization and what compiling them
# in workers costs (benchmarks/plan_serialization_check.py). Run through the device tool with carry [".whl"].
source "$(dirname "$0")/h200_mainjob_engine.sh"
for run in 1 2; do tar -xzOf "$OUT/sessions.tar.gz" "sessions/senet154-run$run.json" | python3 -c "
import json, sys
for v in json.load(sys.stdin)['variants']:
    convs = [l['attrs'] for l in v['layers'] if 'plan_cached' in l.get('attrs', {})]
    print('run $run', v['name'], len(convs), 'cuDNN layers,', sum(a['plan_cached'] for a in convs), 'plans from the cache')"
done | tee "$OUT/plans-cached.txt"
du -sh "$TRT_INSPECT_HOME"/engines/*.plans | sed "s#$TRT_INSPECT_HOME#\$TRT_INSPECT_HOME#" | tee -a "$OUT/plans-cached.txt"
start=${EPOCHREALTIME/./}
TRT_INSPECT_HOME=/tmp/tih-cold timeout 200 python3 benchmarks/stack_sampler.py "$OUT/first-sampled.top.txt" senet154 \
    --out /tmp/first-sampled.json </dev/null > "$OUT/first-sampled.log" 2>&1
echo "sampled first run: rc=$? wall=$(( (${EPOCHREALTIME/./} - start) / 1000 )) ms"
head -45 "$OUT/first-sampled.top.txt"
timeout 150 python3 benchmarks/plan_serialization_check.py --workers 6 > "$OUT/plan-serialization.txt" 2>&1
echo "plan_serialization_check rc=$?"
cat "$OUT/plan-serialization.txt"
