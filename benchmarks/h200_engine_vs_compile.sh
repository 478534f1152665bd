#!/usr/bin/env bash
# On the H200: the engine's fp16 against torch.compile's (the tool's compile backend: Inductor, CUDA graphs) and
# PyTorch's eager fp16, in one study per model and batch, default options: senet154, resnet50, dpn68,
# seresnext26d_32x4d and vit_tiny_patch16_224 at batch 1 and 32, SegFormer-B0 at 512 (batch 1, its FP8 beside).
# Run through the device tool with carry [".whl"]; the log goes to $OUT/engine-vs-compile-log.txt, the sessions to
# $OUT, then benchmarks/engine_vs_compile.py's table.
rm -rf /tmp/pycache /tmp/site /tmp/tih  # a machine kept warm between calls keeps /tmp
PREPARE=0 source "$(dirname "$0")/h200_setup.sh"
exec > >(tee "$OUT/engine-vs-compile-log.txt") 2>&1
t() { local s=$SECONDS; run "$@"; echo "wall_s=$(( SECONDS - s ))"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
VARIANTS=fp16,compile-fp16,cudnn-fp16
for MODEL in senet154 resnet50 dpn68 seresnext26d_32x4d vit_tiny_patch16_224; do
  t run $MODEL --variants $VARIANTS --out "$OUT/$MODEL-b1-vs-compile.json"
done
t run hf:segformer-b0-512 --variants $VARIANTS,cudnn-fp8-encoder-linears --out "$OUT/segformer-b0-b1-vs-compile.json"
for MODEL in vit_tiny_patch16_224 resnet50 dpn68 seresnext26d_32x4d senet154; do  # the longest last
  t run $MODEL --batch 32 --variants $VARIANTS --out "$OUT/$MODEL-b32-vs-compile.json"
done
python3 benchmarks/engine_vs_compile.py "$OUT"/*-vs-compile.json
