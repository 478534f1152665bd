#!/usr/bin/env bash
# On the H200: senet154's four FP8 recipes on the engine beside PyTorch fp16, torch.compile fp16 and the engine's fp16,
# once per precision choice (`--fp8-layers timed`, the default, and `kept`), at the batches in JOBS ("BATCH:CHOICE"
# words, default "1:timed 1:kept 32:timed"); one session and one log per job in $OUT, each session holding all four
# kinds of row (PyTorch fp16, torch.compile fp16, the engine's fp16 and its FP8 builds).
#   JOBS="32:kept" OUT=... PREPARE=0 bash benchmarks/h200_recipes_study.sh   # device tool, carry [".whl"]
source "$(dirname "$0")/h200_setup.sh"
RECIPES="--fp8-recipe all --fp8-recipe no-se --fp8-recipe no-se-no-first-stage --fp8-recipe pointwise"
for JOB in ${JOBS:-1:timed 1:kept 32:timed}; do
  BATCH=${JOB%:*} CHOICE=${JOB##*:} start=$SECONDS
  run run senet154 --batch "$BATCH" --variants fp16,compile-fp16,cudnn-fp16,cudnn-fp8 $RECIPES --fp8-layers "$CHOICE" \
    --out "$OUT/senet154-b$BATCH-$CHOICE.json" > "$OUT/senet154-b$BATCH-$CHOICE.log" 2>&1
  echo "b$BATCH $CHOICE: $((SECONDS - start)) s, $(tail -1 "$OUT/senet154-b$BATCH-$CHOICE.log")"
done
