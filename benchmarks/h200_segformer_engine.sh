#!/usr/bin/env bash
# SegFormer-B0 (Hugging Face, random weights, no hub) at 512 x 512 through the cuDNN / cuBLASLt engine on the lent
# H200, now that the engine's graph capture traces it whole: fp32, PyTorch fp16, the engine's fp16 and its real-FP8
# `encoder-linears` beside the simulated `fp8-encoder-linears`, headless; `show` prints the pixel agreement of the
# real FP8 variant with fp32 and with the simulated one. Then dpn68 (concatenations), seresnext26d_32x4d (grouped
# convolutions) and vit_tiny_patch16_224 (linears) end to end with the engine at opt-level 1.
# About 3 minutes (install included; each study has a time limit: 110 s and 3 x 45 s, under 5 minutes in all).
# Run through the device tool with carry [".whl"]; the log, the `show` output and the sessions' tarball land in $OUT.
rm -rf /tmp/pycache /tmp/site /tmp/tih  # a machine kept warm between calls keeps /tmp
source "$(dirname "$0")/h200_setup.sh"
S="$OUT/sessions"
mkdir -p "$S"
timed() {  # timed LIMIT LOG ARGS...: `trt-inspect run ARGS` (at most LIMIT s) into LOG, then its exit code and wall time
    local limit=$1 log=$2 started=$SECONDS
    shift 2
    echo "== trt-inspect run $*" | tee "$log"
    timeout "$limit" trt-inspect run "$@" </dev/null >>"$log" 2>&1
    echo "rc=$? wall=$((SECONDS - started))s  trt-inspect run $*" | tee -a "$log"
}
timed 110 "$OUT/segformer-b0.log" hf:segformer-b0-512 \
    --variants fp32,fp16,cudnn-fp16,cudnn-fp8-encoder-linears,fp8-encoder-linears --opt-level 1 \
    --out "$S/segformer-b0-engine.json"
trt-inspect show "$S/segformer-b0-engine.json" </dev/null > "$OUT/segformer-b0-show.txt" 2>&1
for model in dpn68 seresnext26d_32x4d vit_tiny_patch16_224; do
    timed 45 "$OUT/$model.log" "$model" --variants fp16,cudnn-fp16,cudnn-fp8-all --opt-level 1 --out "$S/$model-engine.json"
done
cat "$OUT"/*.log > "$OUT/engine-log.txt" && rm "$OUT"/*.log
tar -C "$OUT" -czf "$OUT/sessions.tar.gz" sessions && rm -rf "$S"
cat "$OUT/segformer-b0-show.txt"
grep -E "^rc=|Traceback|not lowered|not traced into" "$OUT/engine-log.txt"
