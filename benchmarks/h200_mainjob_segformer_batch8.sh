#!/usr/bin/env bash
# On the H200: the main job cold (fresh install) and warm with wall times, per-sample and
# round-median CoV; the SegFormer-B0 study (encoder-linears recipe); batch 1 against batch 8 per image.
# Run through the device tool with carry [".whl"].
source "$(dirname "$0")/h200_setup.sh"
t() { local s=$SECONDS; run "$@"; echo "wall_s=$(( SECONDS - s ))"; }
t senet154 --out "$OUT/senet154-cold.json" 2> >(grep -v "^trt-inspect: \[" >&2)
t senet154 --out "$OUT/senet154-warm.json" 2> >(grep -v "^trt-inspect: \[" >&2)
python3 - "$OUT/senet154-warm.json" <<'PY'
import sys
from sessions.documents.storage import load
s = load(sys.argv[1])
for v in s.variants:
    l = v.latency
    print(f"{v.name}: median {l.median_ms:.3f} ms, per-sample CoV {100*l.cov:.2f} %, round CoV {100*(l.round_cov or 0):.2f} %, p99/median {l.p99_ms/l.median_ms:.3f}")
PY
t run hf:segformer-b0-512 --variants fp32,fp16,fp8-encoder-linears --out "$OUT/segformer-b0.json" 2> >(grep -v "^trt-inspect: \[" >&2)
t run senet154 --batch 8 --variants fp16,fp8 --fp8-recipe all --out "$OUT/senet154-b8.json" 2> >(grep -v "^trt-inspect: \[" >&2)
run diff "$OUT/senet154-warm.json" "$OUT/senet154-b8.json"
