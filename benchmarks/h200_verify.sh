#!/usr/bin/env bash
# Second H200 run: the main job exactly as the README runs it (headless, defaults), its rerun and
# diff, and the Hugging Face SegFormer path on CUDA. Run through the device tool with carry [".whl"].
source "$(dirname "$0")/h200_setup.sh"
run senet154 --out "$OUT/senet154-default.json" 2>"$OUT/senet154-default.err"
grep -v "Warning\|warn" "$OUT/senet154-default.err" | head -5
run rerun "$OUT/senet154-default.json" --out "$OUT/senet154-rerun.json" 2>/dev/null | tail -25
run run hf:segformer --device cuda --variants fp16,fp8 --fp8-layout all --out "$OUT/segformer-h200.json" 2>/dev/null
run groups "$OUT/senet154-default.json" --variant fp16 --variant fp8-all
ls -la "$OUT"
