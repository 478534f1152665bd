#!/usr/bin/env bash
# On the H200: families the tests never build, end to end on the engine (fp16 and FP8 `all`) beside PyTorch's and
# torch.compile's fp16, batch 1, one study each: nf_resnet26 and resnetv2_50x1_bit (convolutions that compute their
# weight at every call, built as plain convolutions), eca_resnet33ts (Conv1d channel attention: recipe layers the
# engine runs as PyTorch ops), hrnet_w18_small and levit_128s. Run through the device tool with carry [".whl"]; the
# log goes to $OUT/unseen-families-log.txt, the sessions to $OUT, then benchmarks/engine_vs_compile.py's table.
rm -rf /tmp/pycache /tmp/site /tmp/tih  # a machine kept warm between calls keeps /tmp
PREPARE=0 source "$(dirname "$0")/h200_setup.sh"
exec > >(tee "$OUT/unseen-families-log.txt") 2>&1
t() { local s=$SECONDS; run "$@"; echo "wall_s=$(( SECONDS - s ))"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
for MODEL in nf_resnet26 resnetv2_50x1_bit eca_resnet33ts hrnet_w18_small levit_128s; do
  t run $MODEL --variants fp16,compile-fp16,cudnn-fp16,cudnn-fp8-all --out "$OUT/$MODEL-unseen.json"
done
python3 benchmarks/engine_vs_compile.py "$OUT"/*-unseen.json
