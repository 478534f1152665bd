#!/usr/bin/env bash
# On the H200: the main job from a fresh install (cold: the image's torch, timm and transformers have
# no bytecode yet) and twice again
# (warm), with every progress line's elapsed seconds, then per-sample CoV, round-median CoV, p99 / median
# and each round's median (does the first round start cold?).
# Run through the device tool with carry [".whl"].
rm -rf /tmp/pycache /tmp/site /tmp/tih  # a machine kept warm between calls keeps /tmp
source "$(dirname "$0")/h200_setup.sh"
t() { local s=$(date +%s%N); run "$@"; echo "wall_s=$(( ($(date +%s%N) - s) / 1000000 )) ms"; }
t senet154 --out "$OUT/senet154-cold.json" 2>&1 | tee "$OUT/mainjob-cold.log"
t senet154 --out "$OUT/senet154-warm.json" 2>&1 | tee "$OUT/mainjob-warm.log"
t senet154 --out "$OUT/senet154-warm2.json" 2>&1 | tee "$OUT/mainjob-warm2.log"
python3 - "$OUT"/senet154-{cold,warm,warm2}.json <<'PY' | tee "$OUT/mainjob-stats.txt"
import sys
from sessions.documents.storage import load
for path in sys.argv[1:]:
    session = load(path)
    print(path, session.study.plan.timing, "CUDA graphs:", session.method.cuda_graph)
    for v in session.variants:
        l = v.latency
        rounds = " ".join(f"{m:.3f}" for m in l.round_medians_ms)
        print(f"  {v.name}: median {l.median_ms:.3f} ms, per-sample CoV {100*l.cov:.2f} %, round CoV {100*(l.round_cov or 0):.2f} %, "
              f"p99/median {l.p99_ms/l.median_ms:.3f}, max/median {l.max_ms/l.median_ms:.3f}; round medians {rounds}")
PY
# which libraries ModelOpt's import brought in, and what it cost, in a process like the CLI's
python3 -X importtime -c "import torch, timm; from builders.pytorch.variant_modules import _modelopt; _modelopt(); import sys; print('after ModelOpt:', sorted(n for n in ('transformers', 'peft', 'diffusers', 'torch_geometric', 'triton') if n in sys.modules))" 2> "$OUT/modelopt-importtime.txt" | tee -a "$OUT/mainjob-stats.txt"
sort -t'|' -k2 -n -r "$OUT/modelopt-importtime.txt" | head -12 | tee -a "$OUT/mainjob-stats.txt"
