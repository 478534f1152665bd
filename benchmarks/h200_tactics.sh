#!/usr/bin/env bash
# On the H200: the engine's precision and output format chosen by timing (--fp8-layers timed, the default) against
# FP8 kept on every quantized layer (--fp8-layers kept), senet154 at batch 1 (PART=b1, with the main job's wall time
# from a fresh install and again) or 32 (PART=b32), beside PyTorch fp16 and torch.compile. Run through the device
# tool with carry [".whl"]; everything printed goes to $OUT/tactics-$PART-log.txt, the sessions to $OUT.
source "$(dirname "$0")/h200_setup.sh"
PART=${PART:-b1}
# another cupti-python than the one in .whl (the tracer's speed by its version): its wheel in .whl-alt, carried too
if [ -d .whl-alt ]; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site-alt .whl-alt/*.whl && export PYTHONPATH=/tmp/site-alt:$PYTHONPATH
fi
python3 -c "import importlib.metadata as m; print('cupti-python', m.version('cupti-python'))"
exec > >(tee "$OUT/tactics-$PART-log.txt") 2>&1
t() { local s=$SECONDS; run "$@"; echo "wall_s=$(( SECONDS - s ))"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
ENGINE=fp16,cudnn-fp16,cudnn-fp8,cudnn-fp8-pointwise
if [ "$PART" = b1 ]; then
  t senet154 --out "$OUT/mainjob-cold.json"
  t senet154 --out "$OUT/mainjob-timed.json"
  rm -f "$OUT/mainjob-cold.json"
  t run senet154 --variants $ENGINE --fp8-layers kept --out "$OUT/senet154-b1-kept.json"
  t run senet154 --variants $ENGINE --out "$OUT/senet154-b1-timed.json"
else
  t run senet154 --batch 32 --variants $ENGINE --out "$OUT/senet154-b32-timed.json"
  t run senet154 --batch 32 --variants $ENGINE --fp8-layers kept --out "$OUT/senet154-b32-kept.json"
  t run senet154 --batch 32 --backend compile --variants fp16 --out "$OUT/senet154-b32-compile.json"
fi
python3 benchmarks/engine_tactics_report.py "$OUT"/*.json
