#!/usr/bin/env bash
# First runs' compile timelines on the lent GPU: one cold main job per name in RUNS (default "fresh-w12 cold-w15 cold-w12").
# Before each, the tool's, Inductor's, Triton's and the CUDA driver's kernel caches are emptied (a first name is a fresh
# machine's run; later ones keep only the OS's file cache), and the job runs under benchmarks/compile_timeline.py
# (RUN.report.txt, RUN.report.events.jsonl, RUN.log, the session RUN.json): with the plan compiler's most workers set
# to N where its name ends in -wN, and from the source tree BASE (another commit's builders, inspector,
# profilers and sessions, e.g. `git archive REV builders inspector profilers sessions | tar -x -C BASE`) where its
# name starts with "base".
#   OUT=... RUNS="base new base-again new-again" BASE=tmp_ref/base bash benchmarks/first_run_timeline.sh  # device tool, carry
#   [".whl", "tmp_ref"]
source "$(dirname "$0")/h200_setup.sh"
DRIVER_CACHE=${CUDA_CACHE_PATH:-$HOME/.nv/ComputeCache}
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader
for RUN in ${RUNS:-fresh-w12 cold-w15 cold-w12}; do
  rm -rf "$TRT_INSPECT_HOME" /tmp/torchinductor_* ~/.triton/cache "$DRIVER_CACHE"
  tree=$PYTHONPATH; [[ $RUN == base* ]] && tree=$(realpath "${BASE:?BASE names the base tree}"):$PYTHONPATH
  start=$(date +%s%N)
  PYTHONPATH=$tree COMPILE_TIMELINE_WORKERS=$([[ $RUN =~ -w([0-9]+)$ ]] && echo "${BASH_REMATCH[1]}") python3 benchmarks/compile_timeline.py \
    "$OUT/$RUN.report.txt" senet154 --out "$OUT/$RUN.json" > "$OUT/$RUN.log" 2>&1 </dev/null
  echo "$RUN rc=$? wall_ms=$(( ($(date +%s%N) - start) / 1000000 ))"
  head -4 "$OUT/$RUN.report.txt"; grep "^build " "$OUT/$RUN.report.txt"
done
