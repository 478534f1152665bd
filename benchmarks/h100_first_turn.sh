#!/usr/bin/env bash
# Why does a study's first turn run slow on a short model (benchmarks/results/h100/floor-every-turn/README.md: vit_tiny's
# PyTorch fp16 ran its first round 0.29-0.74 % slow in 4 of 5 spread runs)? Two parts, each tarred as it ends:
#   idle    how long an H100 runs vit_tiny and convnext_atto slow after 0.2, 1 and 3 s of idling, over 1 s of samples
#           (benchmarks/idle_lag.py): does the lag after seconds of idling outlast the warm-ups and the first floor?
#   warmup  the spread of FIRST_TURN_MODELS (default: vit_tiny_patch16_224, convnext_atto, resnet50) once per warm-up in
#           WARMUPS (default "0.05 0.3 0": the default, a longer one, none), then benchmarks/round_openings.py over
#           them: does the first turn's slowness follow the warm-up?
#   PARTS="idle warmup" OUT=... PREPARE=0 bash benchmarks/h100_first_turn.sh   # device tool, carry [".whl"]
source "$(dirname "$0")/h200_setup.sh"
exec > >(tee -a "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
for PART in ${PARTS:-idle warmup}; do
  mkdir -p "$OUT/$PART"; echo "#### part $PART at ${SECONDS} s"
  case $PART in
  idle) python3 benchmarks/idle_lag.py --models vit_tiny_patch16_224,convnext_atto --gaps 0,200,1000,3000 \
          --samples 250 --windows 0,100,200,400,700,1000 --repeats 6 2>&1 | tee "$OUT/idle/idle-lag.txt" ;;
  warmup)
    archives=()
    for WARMUP in ${WARMUPS:-0.05 0.3 0}; do
      mkdir -p "$OUT/warmup/$WARMUP"
      for M in ${FIRST_TURN_MODELS:-vit_tiny_patch16_224 convnext_atto resnet50}; do
        python3 benchmarks/small_model_spread.py --models "$M" --out "$OUT/warmup/$WARMUP" -- \
          --variants fp16,cudnn-fp16,cudnn-fp8-all --warmup "$WARMUP" 2>>"$OUT/warmup/$WARMUP/progress.log" \
          | grep -v "^| model\|^|---\|^variants judged" | tee -a "$OUT/warmup/spread-rows-$WARMUP.txt"
      done
      tar -C "$OUT/warmup/$WARMUP" -czf "$OUT/warmup/$WARMUP.tar.gz" . && rm -rf "${OUT:?}/warmup/$WARMUP"
      archives+=("warm-up $WARMUP s=$OUT/warmup/$WARMUP.tar.gz")  # round_openings reads an archive of sessions
    done
    python3 benchmarks/round_openings.py "${archives[@]}" | tee "$OUT/warmup/round-openings.txt" ;;
  esac
  tar -C "$OUT" -czf "$OUT/$PART.tar.gz" "$PART" && rm -rf "${OUT:?}/$PART"
done
echo "#### done at ${SECONDS} s"
