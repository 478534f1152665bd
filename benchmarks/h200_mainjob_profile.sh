#!/usr/bin/env bash
# Where the main job's time goes on the lent H200: `trt-inspect senet154` twice under benchmarks/stack_sampler.py
# (a first run that times cuDNN's plans and compiles what it imports, a second that takes both from its caches),
# each output line stamped with the seconds since its run started, and the sampler's report of each run.
# Run through the device tool with carry [".whl"]; logs and both sessions (`sessions.tar.gz`) land in $OUT, and in
# `diffs.txt` the first run's diff against the second and, with REF=SESSION, each run's diff against that session.
# RUNS names the runs in order (default "first second"; each later one on the caches of those before), SAMPLED those
# of them run under the sampler (default all); the others run as a user runs them, their wall time unsampled.
rm -rf /tmp/pycache /tmp/site /tmp/tih
source "$(dirname "$0")/h200_setup.sh"
S="$OUT/sessions"
mkdir -p "$S"
ms_since() { local now=${EPOCHREALTIME/./}; echo $(( (now - $1) / 1000 )); }
profiled() {  # profiled NAME: the main job (sampled where SAMPLED names it: the report in NAME.top.txt), stamped log in $OUT/NAME.log
    local start=${EPOCHREALTIME/./} job=(trt-inspect)
    [[ " ${SAMPLED:-${RUNS:-first second}} " == *" $1 "* ]] && job=(python3 benchmarks/stack_sampler.py "$OUT/$1.top.txt")
    timeout 250 "${job[@]}" senet154 --out "$S/senet154-$1.json" </dev/null 2>&1 \
        | while IFS= read -r line; do printf '%7s ms  %s\n' "$(ms_since "$start")" "$line"; done > "$OUT/$1.log"
    echo "rc=${PIPESTATUS[0]} wall=$(ms_since "$start") ms" | tee -a "$OUT/$1.log"
}
for RUN in ${RUNS:-first second}; do profiled "$RUN"; done
differ() {  # differ A B: `trt-inspect diff A B` under a header in diffs.txt, its exit code echoed
    echo "== trt-inspect diff $1 $2" >> "$OUT/diffs.txt"
    trt-inspect diff "$1" "$2" >> "$OUT/diffs.txt"; echo "rc=$?" | tee -a "$OUT/diffs.txt"
}
set -- ${RUNS:-first second}
for LATER in "${@:2}"; do differ "$S/senet154-$1.json" "$S/senet154-$LATER.json"; done
for RUN in ${RUNS:-first second}; do [ -z "${REF:-}" ] || differ "$REF" "$S/senet154-$RUN.json"; done
tar -C "$S" -czf "$OUT/sessions.tar.gz" . && rm -rf "$S"
