#!/usr/bin/env bash
# The two seed studies as plain `trt-inspect run` commands, one session each: the same jobs as
# senet154-fp8.toml and segformer-fp8.toml for a checkout without `trt-inspect sweep`.
# IMAGES=/data/imagenet/val CALIB=500 EVAL=1500 ./studies/seeds-as-run-commands.sh for the seeds' data.
set -euo pipefail
out=${OUT:-sessions-seeds}
mkdir -p "$out"
images=(${IMAGES:+--images "$IMAGES"})
counts=(--calib-count "${CALIB:-6}" --eval-count "${EVAL:-12}")
timing=(--rounds 5 --iters 50 --warmup 1)
for level in 3 1; do
  for batch in 1 32; do
    trt-inspect run senet154 --backend tensorrt --variants fp32,fp16,fp8 --fp8-recipe all --fp8-recipe no-se \
      --fp8-recipe no-se-no-layer1 --opt-level "$level" --batch "$batch" "${images[@]}" "${counts[@]}" "${timing[@]}" \
      --out "$out/senet154-level$level-batch$batch.json"
  done
done
for model in nvidia/segformer-b0-finetuned-ade-512-512 nvidia/segformer-b5-finetuned-ade-640-640; do
  trt-inspect run "$model" --backend tensorrt --variants fp32,fp16,fp8 --fp8-recipe encoder-linears \
    ${SEG_IMAGES:+--images "$SEG_IMAGES"} "${counts[@]}" "${timing[@]}" --out "$out/$(basename "$model").json"
done
