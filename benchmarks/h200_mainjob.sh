#!/usr/bin/env bash
# Issue 14 on the H200: the main job from a fresh install (cold) and again (warm), with every progress
# line's elapsed seconds (where the time goes), then per-sample CoV, round-median CoV and p99 / median.
# Run through the device tool with carry [".whl"].
source "$(dirname "$0")/h200_setup.sh"
t() { local s=$SECONDS; run "$@"; echo "wall_s=$(( SECONDS - s ))"; }
t senet154 --out "$OUT/senet154-cold.json" 2>&1 | tee "$OUT/mainjob-cold.log"
t senet154 --out "$OUT/senet154-warm.json" 2>&1 | tee "$OUT/mainjob-warm.log"
if [ "${PROFILE:-0}" = 1 ]; then  # a third run under cProfile: where the host time goes
  python3 -m cProfile -o "$OUT/mainjob.prof" -m inspector senet154 --out "$OUT/senet154-prof.json" >/dev/null 2>&1
  python3 -c "import pstats; pstats.Stats('$OUT/mainjob.prof').sort_stats('cumulative').print_stats(60)" | cut -c1-200 > "$OUT/mainjob-prof.txt"
  python3 -c "import pstats; pstats.Stats('$OUT/mainjob.prof').sort_stats('tottime').print_stats(30)" | cut -c1-200 >> "$OUT/mainjob-prof.txt"
fi
python3 - "$OUT/senet154-cold.json" "$OUT/senet154-warm.json" <<'PY'
import sys
from sessions.storage import load
for path in sys.argv[1:]:
    print(path)
    for v in load(path).variants:
        l = v.latency
        print(f"  {v.name}: median {l.median_ms:.3f} ms, per-sample CoV {100*l.cov:.2f} %, round CoV {100*(l.round_cov or 0):.2f} %, "
              f"p99/median {l.p99_ms/l.median_ms:.3f}, max/median {l.max_ms/l.median_ms:.3f}")
PY
