#!/usr/bin/env bash
# On the H200: the engine's tactics of every library (cuDNN's plans, a cuBLASLt GEMM for 1x1 convolutions, ATen's
# depthwise dispatch on channels-last and on an NCHW copy) timed against each other, the precision chosen by timing
# (the default --fp8-layers timed) and FP8 kept, senet154 at batch 32 and 1 with the four recipes beside PyTorch fp16,
# and SegFormer-B0 at 512 (the second seed's model), the default --opt-level 3. Run through the device tool with
# carry [".whl"]; everything printed goes to $OUT/engine-tactics-log.txt, the sessions to $OUT. Prints, per variant,
# the convolutions by shape, library and precision, and the 1x1 convolutions' best FP8 against best fp16 tactic
# (benchmarks/engine_library_report.py), then benchmarks/engine_tactics_report.py's counts.
rm -rf /tmp/pycache /tmp/site /tmp/tih  # a machine kept warm between calls keeps /tmp
source "$(dirname "$0")/h200_setup.sh"
exec > >(tee "$OUT/engine-tactics-log.txt") 2>&1
t() { local s=$SECONDS; run "$@"; echo "wall_s=$(( SECONDS - s ))"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
SENET=fp16,cudnn-fp16,cudnn-fp8-all,cudnn-fp8-no-se,cudnn-fp8-no-se-no-first-stage,cudnn-fp8-pointwise
t run senet154 --batch 32 --variants $SENET --out "$OUT/senet154-b32-libraries.json"
t run senet154 --batch 32 --variants $SENET --fp8-layers kept --out "$OUT/senet154-b32-libraries-kept.json"
t run senet154 --batch 1 --variants $SENET --out "$OUT/senet154-b1-libraries.json"
t run hf:segformer-b0-512 --variants fp16,cudnn-fp16,cudnn-fp8-encoder-linears --out "$OUT/segformer-b0-libraries.json"
t run senet154 --batch 1 --variants $SENET --fp8-layers kept --out "$OUT/senet154-b1-libraries-kept.json"
# a second run of the same study reads every choice from the timing cache: its build_s shows nothing was re-timed
t run senet154 --batch 32 --variants cudnn-fp16,cudnn-fp8-all --out "$OUT/senet154-b32-libraries-again.json"
python3 benchmarks/engine_library_report.py "$OUT"/*.json
python3 benchmarks/engine_tactics_report.py "$OUT"/*.json
