#!/usr/bin/env bash
# On the H200, the figures the GPU-state settle (profilers/gpu_contexts.py) must hold, in parts named by PARTS (each
# part's files tarred as it ends, so a call cut short keeps the parts done):
#   state   the replay-state probe with the tool's settle (benchmarks/replay_state_probe.py --settle)
#   main    the main job with Inductor's, Triton's and the engine's caches cold, then twice warm (MAIN_RUNS: the runs'
#           names, default "cold warm warm2"); the diffs between them
#           (each must exit 0); with REF=SESSION, each run's diff against that session too
#   sampled the main job once more on the caches it left, under benchmarks/stack_sampler.py (where a warm run's
#           time goes: sampled.top.txt; its progress lines in sampled.log)
#   coldsampled  the main job under the stack sampler after emptying the tool's, Inductor's and Triton's caches (where a
#           first run's time goes: coldsampled.top.txt; the CUDA driver's kernel cache stays as the runs before left it)
#   freshsampled  the same, with the CUDA driver's kernel cache (CUDA_CACHE_PATH, default ~/.nv/ComputeCache) emptied
#           too: a fresh machine's first run but for the OS's file cache (freshsampled.top.txt; then the cache's size);
#           run before coldsampled, the two tell the driver's cache apart from the rest
#   rows    each main-job variant alone against the whole study (benchmarks/row_independence.py)
#   placement  each variant in PLACEMENT_VARIANTS (default "fp32 cudnn-fp16") alone at eight placements of its memory
#           (benchmarks/placement_shift.py senet154: 0, 0, 2, 4, 8, 16, 32 and 64 MiB held first), after one run of
#           the engine's variant that fills the tool's caches (its session dropped)
#   options the main job once more on the caches it left, with the study options in MAIN_OPTIONS (a timing plan
#           weighed against the default: options/run.log)
#   spread  seven families of 0.2-5 ms, PyTorch fp16, engine fp16 and FP8 (benchmarks/small_model_spread.py)
#   probe   the FP8 probe against the engine, layer by layer (benchmarks/probe_vs_engine.py senet154)
#   compile the engine's fp16 against torch.compile, MODEL:BATCH jobs in COMPILE_JOBS (default: where it lost before,
#           dpn68 and vit_tiny_patch16_224 at batch 1 and 32, SegFormer-B0 at 512 batch 1)
#   matmul  each 1x1 shape's conv and matmul graphs run as engine layers, their outputs compared
#           (benchmarks/cudnn_matmul_tactic.py --check)
#   b32     senet154 at batch 32, the engine's fp16 and FP8 (recipes in RECIPES, default `all`), once per precision
#           choice in CHOICES (default "timed kept"), each session's `groups`
#   PARTS="state main rows" OUT=... PREPARE=0 bash benchmarks/h200_figures_settled.sh   # device tool, carry [".whl"]
[ "${KEEP_CACHES:-0}" = 1 ] || rm -rf /tmp/pycache /tmp/site /tmp/tih /tmp/torchinductor_* ~/.triton/cache
source "$(dirname "$0")/h200_setup.sh"
exec > >(tee -a "$OUT/log.txt") 2>&1
t() { local s=$(date +%s%N); run "$@"; echo "wall_ms=$(( ($(date +%s%N) - s) / 1000000 ))"; }
pack() { tar -C "$OUT" -cf "$OUT/$1.tar" "$1" && rm -rf "${OUT:?}/$1"; }
DRIVER_CACHE=${CUDA_CACHE_PATH:-$HOME/.nv/ComputeCache}  # the CUDA driver's compiled kernels
sample_main() {  # part [path ...]: the paths removed, then the main job under the stack sampler (its session dropped)
  local part=$1; shift; rm -rf "$@"
  python3 benchmarks/stack_sampler.py "$OUT/$part/$part.top.txt" senet154 --out "$OUT/$part/senet154.json" \
    > "$OUT/$part/$part.log" 2>&1
  echo "$part rc=$?"; rm -f "$OUT/$part/senet154.json"
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
for PART in ${PARTS:-state main rows}; do
  mkdir -p "$OUT/$PART"; echo "#### part $PART at ${SECONDS} s"
  case $PART in
  state) python3 benchmarks/replay_state_probe.py --settle 2>&1 | tee "$OUT/state/replay-state-settle.txt" ;;
  main)
    for RUN in ${MAIN_RUNS:-cold warm warm2}; do
      t senet154 --out "$OUT/main/senet154-$RUN.json" | tee "$OUT/main/$RUN.log"
    done
    for PAIR in "cold warm" "cold warm2" "warm warm2"; do  # three reruns of unchanged code: each diff must exit 0
      set -- $PAIR; [ -f "$OUT/main/senet154-$2.json" ] || continue  # MAIN_RUNS="cold warm": one diff
      trt-inspect diff "$OUT/main/senet154-$1.json" "$OUT/main/senet154-$2.json" \
        > "$OUT/main/diff-$1-$2.txt"; echo "diff $1 $2: exit $?"
    done
    for RUN in ${REF:+cold warm warm2}; do  # against a committed session of this main job
      trt-inspect diff "$REF" "$OUT/main/senet154-$RUN.json" > "$OUT/main/diff-ref-$RUN.txt"; echo "diff ref $RUN: exit $?"
    done ;;
  sampled) sample_main sampled ;;
  options) t senet154 ${MAIN_OPTIONS:?MAIN_OPTIONS names the options} --out "$OUT/options/senet154.json" \
             | tee "$OUT/options/run.log" ;;
  coldsampled) sample_main coldsampled "$TRT_INSPECT_HOME" /tmp/torchinductor_* ~/.triton/cache ;;
  freshsampled)
    sample_main freshsampled "$TRT_INSPECT_HOME" /tmp/torchinductor_* ~/.triton/cache "$DRIVER_CACHE"
    du -sh "$DRIVER_CACHE" | tee "$OUT/freshsampled/driver-cache-size.txt" ;;
  matmul) python3 benchmarks/cudnn_matmul_tactic.py --check --batch 1 --batch 32 2>&1 | tee "$OUT/matmul/check.txt" ;;
  b32)
    for CHOICE in ${CHOICES:-timed kept}; do
      t run senet154 --batch 32 --variants cudnn-fp16,cudnn-fp8 ${RECIPES:---fp8-recipe all} --fp8-layers "$CHOICE" \
        --out "$OUT/b32/senet154-b32-$CHOICE.json" > "$OUT/b32/senet154-b32-$CHOICE.log" 2>&1
      tail -2 "$OUT/b32/senet154-b32-$CHOICE.log"
      trt-inspect groups "$OUT/b32/senet154-b32-$CHOICE.json" > "$OUT/b32/groups-$CHOICE.txt" 2>&1
    done ;;
  rows) python3 benchmarks/row_independence.py senet154 --repeat 2 --out "$OUT/rows" 2>"$OUT/rows/progress.log" \
          | tee "$OUT/rows/rows.txt" ;;
  spread) python3 benchmarks/small_model_spread.py --out "$OUT/spread" -- --variants fp16,cudnn-fp16,cudnn-fp8-all \
            | tee "$OUT/spread/spread.txt" ;;
  placement)
    trt-inspect run senet154 --variants cudnn-fp16 --out "$OUT/placement/prime.json" >/dev/null 2>&1
    echo "prime rc=$?"; rm -f "$OUT/placement/prime.json"
    for V in ${PLACEMENT_VARIANTS:-fp32 cudnn-fp16}; do
      python3 benchmarks/placement_shift.py senet154 --out "$OUT/placement/$V" -- --variants "$V" \
        2>"$OUT/placement/$V-progress.log" | tee "$OUT/placement/$V.txt"
    done ;;
  probe) python3 benchmarks/probe_vs_engine.py senet154 --out "$OUT/probe" 2>"$OUT/probe/progress.log" \
           | tee "$OUT/probe/probe-vs-engine.txt" ;;
  compile)
    for JOB in ${COMPILE_JOBS:-dpn68:1 dpn68:32 vit_tiny_patch16_224:1 vit_tiny_patch16_224:32 hf:segformer-b0-512:1}; do
      MODEL=${JOB%:*} BATCH=${JOB##*:}
      t run $MODEL --batch $BATCH --variants fp16,compile-fp16,cudnn-fp16 \
        --out "$OUT/compile/${MODEL#hf:}-b$BATCH-vs-compile.json"
    done
    python3 benchmarks/engine_vs_compile.py "$OUT"/compile/*.json | tee "$OUT/compile/engine-vs-compile.txt" ;;
  esac
  pack "$PART"
done
echo "#### done at ${SECONDS} s"
