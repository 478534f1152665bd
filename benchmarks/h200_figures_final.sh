#!/usr/bin/env bash
# On the H200, one call for what a session last needs measured, most needed first (each part's files tarred as it
# ends, so a call cut short keeps the parts done): (1) the main job from a fresh install, Inductor's and Triton's
# caches cold, then twice warm, the three reruns diffed (each must exit 0); (2) each of the main job's variants alone
# against the whole study (benchmarks/row_independence.py, one alternation); (3) senet154 at batch 32 with PyTorch,
# torch.compile, the engine's fp16 and FP8 (precision timed) in one session, and the engine's fp16 against
# torch.compile again where it lost (dpn68, vit_tiny_patch16_224, SegFormer-B0; batch 1), each variant's spread
# printed; (4) the probe against the engine, layer by layer (benchmarks/probe_vs_engine.py). Run through the device
# tool with carry [".whl"].
rm -rf /tmp/pycache /tmp/site /tmp/tih /tmp/torchinductor_* ~/.triton/cache
source "$(dirname "$0")/h200_setup.sh"
exec > >(tee "$OUT/final-log.txt") 2>&1
t() { local s=$(date +%s%N); run "$@"; echo "wall_ms=$(( ($(date +%s%N) - s) / 1000000 ))"; }
pack() { tar -C "$OUT" -cf "$OUT/$1.tar" "$1" && rm -rf "${OUT:?}/$1"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
mkdir -p "$OUT/main" "$OUT/compile"
t senet154 --out "$OUT/main/senet154-cold.json"
t senet154 --out "$OUT/main/senet154-warm.json"
t senet154 --out "$OUT/main/senet154-warm2.json"
python3 benchmarks/engine_fusion_report.py "$OUT"/main/senet154-warm.json
for PAIR in "cold warm" "cold warm2" "warm warm2"; do  # three reruns of unchanged code: each diff must exit 0
  set -- $PAIR; trt-inspect diff "$OUT/main/senet154-$1.json" "$OUT/main/senet154-$2.json" > "$OUT/main/diff-$1-$2.txt"
  echo "diff $1 $2: exit $?"
done
pack main
python3 benchmarks/row_independence.py senet154 --repeat 1 --out "$OUT/rows" 2>"$OUT/rows-progress.log"
pack rows
t run senet154 --batch 32 --variants fp16,compile-fp16,cudnn-fp16,cudnn-fp8-all,cudnn-fp8-pointwise \
  --out "$OUT/compile/senet154-b32-vs-compile.json"
for MODEL in dpn68 vit_tiny_patch16_224; do
  t run $MODEL --variants fp16,compile-fp16,cudnn-fp16 --out "$OUT/compile/$MODEL-b1-vs-compile.json"
done
t run hf:segformer-b0-512 --variants fp16,compile-fp16,cudnn-fp16 --out "$OUT/compile/segformer-b0-b1-vs-compile.json"
python3 benchmarks/engine_vs_compile.py "$OUT"/compile/*.json
python3 benchmarks/engine_tactics_report.py "$OUT"/compile/senet154-b32-vs-compile.json
python3 benchmarks/engine_fusion_report.py "$OUT"/compile/*.json
pack compile
python3 benchmarks/probe_vs_engine.py senet154 --out "$OUT/probe" 2>"$OUT/probe-progress.log"
pack probe
