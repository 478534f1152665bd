#!/usr/bin/env bash
# Where a warm `trt-inspect senet154` spends its time on the H200: bytecode caches checked, a cold and a
# warm run with elapsed seconds per progress line, then a warm run sampled by py-spy (collapsed stacks,
# wall clock, idle included) and Python's import times.
# Run through the device tool with carry [".whl", ".whl-prof"]; .whl-prof holds py-spy's wheel
# (`pip download --no-deps -d .whl-prof py-spy==0.4.3`).
torch_dir=$(python3 -c "import torch, os; print(os.path.dirname(torch.__file__))")
echo "torch at $torch_dir; its bytecode: $(ls "$torch_dir/__pycache__" 2>/dev/null | wc -l) files; writable: $(test -w "$torch_dir" && echo yes || echo no)"
env | grep "^PYTHON" || echo "no PYTHON* variables"
rm -rf /tmp/pycache /tmp/site /tmp/tih /tmp/spy  # a machine kept warm between calls keeps /tmp
source "$(dirname "$0")/h200_setup.sh"
echo "bytecode under $PYTHONPYCACHEPREFIX after install: $(find /tmp/pycache -name "*.pyc" 2>/dev/null | wc -l)"
python3 -m pip install -q --no-index --no-deps --target /tmp/spy .whl-prof/*.whl || exit 1
t() { local s=$SECONDS; run "$@"; echo "wall_s=$(( SECONDS - s ))"; }
t senet154 --out "$OUT/cold.json" 2>&1 | tee "$OUT/profile-log.txt"
t senet154 --out "$OUT/warm.json" 2>&1 | tee -a "$OUT/profile-log.txt"
echo "bytecode after two runs: $(find /tmp/pycache -name "*.pyc" | wc -l)" | tee -a "$OUT/profile-log.txt"
/tmp/spy/bin/py-spy record --idle --threads --rate 100 --format raw -o /tmp/warm-spy.txt -- \
  python3 -m inspector senet154 --out "$OUT/spy.json" >>"$OUT/profile-log.txt" 2>&1 || echo "py-spy failed: rc=$?" | tee -a "$OUT/profile-log.txt"
gzip -c /tmp/warm-spy.txt > "$OUT/warm-spy.txt.gz"
python3 -X importtime -c "import inspector.cli, builders.pytorch.torch_backend, profilers.kernel_trace, timm; import modelopt.torch.quantization" 2> "$OUT/importtime.txt"
