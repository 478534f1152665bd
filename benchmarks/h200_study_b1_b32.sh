#!/usr/bin/env bash
# On the H200: the TensorRT backend's CUDA stream and graph paths (stand-in enqueue), the main job
# from a fresh install and again (wall times, per-sample CoV, p99), the senet154 sessions behind
# `export --format study` (batch 1 and 32, the seed's three layouts, per-channel weights of the BN-folded
# kernels), with the per-tensor recipe beside them on the same images. Run through the device tool with carry [".whl"].
# Everything printed goes to $OUT/study-b1-b32-log.txt.
source "$(dirname "$0")/h200_setup.sh"
exec > >(tee "$OUT/study-b1-b32-log.txt") 2>&1
t() { local s=$SECONDS; run "$@"; echo "wall_s=$(( SECONDS - s ))"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
python3 benchmarks/h200_engine_device.py
t senet154 --out "$OUT/mainjob-cold.json"
t senet154 --out "$OUT/mainjob-warm.json"
python3 - "$OUT/mainjob-cold.json" "$OUT/mainjob-warm.json" <<'PY'
import sys
from sessions.documents.storage import load
for path in sys.argv[1:]:
    s = load(path)
    print(path.split("/")[-1], "timing:", s.study.plan.timing)
    for v in s.variants:
        l = v.latency
        print(f"  {v.name}: median {l.median_ms:.3f} ms over {len(l.samples_ms)} samples, per-sample CoV {100*l.cov:.2f} %, "
              f"round CoV {100*(l.round_cov or 0):.2f} %, p99/median {l.p99_ms/l.median_ms:.3f}, max/median {l.max_ms/l.median_ms:.3f}")
PY
rm -f "$OUT/mainjob-cold.json"
RECIPES="--fp8-recipe all --fp8-recipe no-se --fp8-recipe no-se-no-layer1"
t run senet154 --variants fp32,fp16,fp8 $RECIPES --fp8-recipe all-per-tensor --out "$OUT/study-b1.json"
t run senet154 --batch 32 --variants fp32,fp16,fp8 $RECIPES --out "$OUT/study-b32.json"
run export "$OUT/study-b1.json" "$OUT/study-b32.json" --format study -o "$OUT/study.md"
python3 - "$OUT/study-b1.json" <<'PY'
import sys
from sessions.documents.storage import load
print("weights      variant                 top-1 vs fp32 %  mean KL    max abs err  top-1 vs fp16 %  images")
for path in sys.argv[1:]:
    for v in load(path).variants:
        if v.recipe is None or v.quality is None:
            continue
        q = v.quality
        print(f"{v.recipe.weights:<12} {v.name:<23} {100*q.top1_agreement:>15.2f}  {q.mean_kl:.3e}  {q.max_abs_logit_error:>11.4f}  "
              f"{100*(q.agreement_baseline or 0):>15.2f}  {q.images}")
PY
