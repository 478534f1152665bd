#!/usr/bin/env bash
# The main job on the CPU as a user runs it: `trt-inspect senet154` with every default, headless, from this
# checkout (python -m inspector at the repository root), the tool's bytecode removed first and a fresh session
# folder. Every output line is stamped with the seconds since launch; then the estimate printed up front is set
# against the time the study took after printing it, and the session's step costs are listed.
# Usage: benchmarks/cpu_mainjob.sh [RESULTS_DIR]   (default benchmarks/results/cpu)
set -u
cd "$(dirname "$0")/.."
results=${1:-benchmarks/results/cpu}
mkdir -p "$results"
export TRT_INSPECT_HOME=$(mktemp -d)
find builders inspector profilers sessions -name __pycache__ -prune -exec rm -rf {} +
log="$results/mainjob.log"
{
  echo "# $(date -u +'%F %T') UTC; $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p')); load average $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!benchmarks/results' || echo -dirty); python -m inspector senet154 --out $results/senet154.json"
} > "$log"
start=$(date +%s.%N)
python -m inspector senet154 --out "$results/senet154.json" 2>&1 | while IFS= read -r line; do
  printf '[wall %6.1f s] %s\n' "$(echo "$(date +%s.%N) - $start" | bc)" "$line"
done >> "$log"
status=${PIPESTATUS[0]}
end=$(date +%s.%N)
printf '# exit %s, wall %.1f s; load average at the end %s\n' "$status" "$(echo "$end - $start" | bc)" "$(cut -d' ' -f1-3 /proc/loadavg)" >> "$log"
python - "$log" "$results/senet154.json" <<'PY' | tee -a "$log"
"""The estimate against the time after it was printed; per variant the step costs the estimate's ratios stand for."""
import re
import sys

from sessions.documents.storage import load

text = open(sys.argv[1]).read()
estimate_at, minutes, seconds = re.search(r"\[wall +([\d.]+) s\].*CPU plan:.*estimated (?:(\d+) min )?(\d+) s from here", text).groups()
wall = float(re.search(r"# exit \d+, wall ([\d.]+) s", text).group(1))
estimate = int(minutes or 0) * 60 + int(seconds)
real = wall - float(estimate_at)
print(f"# estimate {estimate} s, real {real:.1f} s after it was printed (at {float(estimate_at):.1f} s): "
      f"estimate / real {estimate / real:.2f}")
session = load(sys.argv[2])
fp32 = session.variant("fp32").latency.median_ms
for v in session.variants:
    trace = v.trace
    print(f"# {v.name}: median {v.latency.median_ms / 1e3:.2f} s ({v.latency.median_ms / fp32:.2f} x fp32), build {v.build_s:.1f} s, "
          f"traced call {trace.traced_call_ms / 1e3:.2f} s against {trace.untraced_call_ms / 1e3:.2f} s untraced, "
          f"batchnorm folded {v.batchnorm_folded}")
PY
exit "$status"
