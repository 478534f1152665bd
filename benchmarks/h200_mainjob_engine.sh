#!/usr/bin/env bash
# The main job on the lent H200 with the real FP8 engine in its default variants: a fresh install, then
# `trt-inspect senet154` three times (the first run times cuDNN's plans, later runs take them from the timing
# cache), each output line stamped with the seconds since its run started; then `diff` of each pair of runs (the
# same study against itself must flag nothing) and of the committed main-job session of the previous code against
# the second run (every variant pairs by name; COMMITTED, where a sourcing script sets it, names another session).
# Run through the device tool with carry [".whl"]; logs and the sessions' tarball land in $OUT.
rm -rf /tmp/pycache /tmp/site /tmp/tih  # a machine kept warm between calls keeps /tmp
source "$(dirname "$0")/h200_setup.sh"
S="$OUT/sessions"
mkdir -p "$S"
ms_since() { local now=${EPOCHREALTIME/./}; echo $(( (now - $1) / 1000 )); }  # $1: a start in microseconds
stamped() {  # stamped LIMIT LOG ARGS...: trt-inspect ARGS (at most LIMIT s), each line stamped with ms since its start
    local limit=$1 log=$2 start=${EPOCHREALTIME/./}
    shift 2
    timeout "$limit" trt-inspect "$@" </dev/null 2>&1 | while IFS= read -r line; do
        printf '%7s ms  %s\n' "$(ms_since "$start")" "$line"
    done > "$log"
    local rc=${PIPESTATUS[0]}
    echo "rc=$rc wall=$(ms_since "$start") ms  trt-inspect $*" | tee -a "$log"
}
stamped 270 "$OUT/run1.log" senet154 --out "$S/senet154-run1.json"
stamped 110 "$OUT/run2.log" senet154 --out "$S/senet154-run2.json"
stamped 110 "$OUT/run3.log" senet154 --out "$S/senet154-run3.json"
for pair in "1 2" "1 3" "2 3"; do
    set -- $pair
    trt-inspect diff "$S/senet154-run$1.json" "$S/senet154-run$2.json" </dev/null > "$OUT/diff-$1-$2.txt" 2>&1
    echo "diff run $1 against run $2: rc=$? regressions=$(grep -c REGRESSION "$OUT/diff-$1-$2.txt")"
done
COMMITTED=${COMMITTED:-benchmarks/results/h200/mainjob-engine/senet154-run2.json}  # a sourcing script may name another
trt-inspect diff "$COMMITTED" "$S/senet154-run2.json" </dev/null > "$OUT/diff-committed.txt" 2>&1
echo "diff committed main job against run 2: rc=$? regressions=$(grep -c REGRESSION "$OUT/diff-committed.txt")"
cat "$OUT"/diff-*.txt > "$OUT/diffs.txt" && rm "$OUT"/diff-*.txt
trt-inspect show "$S/senet154-run2.json" </dev/null > "$OUT/show-run2.txt" 2>&1
tar -C "$OUT" -czf "$OUT/sessions.tar.gz" sessions && rm -rf "$S"
cat "$OUT/show-run2.txt"
for i in 1 2 3; do tail -1 "$OUT/run$i.log"; done
