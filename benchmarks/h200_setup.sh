# Sourced by the benchmarks/h200_*.sh scripts on the lent H200 (no network there): installs the
# wheels carried in .whl and this project, and defines `run`, which echoes a trt-inspect command
# and its exit code. The wheel list and how to fetch them: the device tool's README.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "${WHEELS:-.whl}"/*.whl || exit 1
export PYTHONPATH=/tmp/site TRT_INSPECT_HOME=/tmp/tih PYTHONUNBUFFERED=1
# bytecode somewhere writable, as a normal install has it (the carried wheels are installed --no-compile)
export PYTHONPYCACHEPREFIX=/tmp/pycache
python3 -m pip install -q --no-index --no-deps --no-build-isolation . >/dev/null 2>&1 || { echo "project install failed"; exit 1; }
run() { echo "== trt-inspect $*"; trt-inspect "$@" </dev/null; echo "rc=$?"; }
