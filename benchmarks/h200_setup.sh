# Sourced by the benchmarks/h200_*.sh scripts on the lent H200 (no network there): installs the
# wheels carried in .whl and this project, and defines `run`, which echoes a trt-inspect command
# and its exit code. How to fetch wheels: the device tool's README. The image lacks: textual 8.2.8 (with
# mdit-py-plugins, linkify-it-py, uc-micro-py: not carried, the runs are headless and never import it), orjson, platformdirs, nvidia-modelopt 0.47.0 (with omegaconf,
# pulp<4 (its solverdir/cbc binaries removed: ModelOpt only imports it), pydantic and pydantic-core),
# cupti-python 13.0.1 and nvidia-cudnn-frontend 1.32.0 (its attention and gemm sub-packages removed to fit the
# 64 MiB a call may carry beside this tree).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONPATH=/tmp/site TRT_INSPECT_HOME=/tmp/tih PYTHONUNBUFFERED=1
# The image sets PYTHONDONTWRITEBYTECODE=1 and ships torch without bytecode, so every run would compile
# torch, timm and transformers afresh; a user's Python caches bytecode, and pip compiles what it installs.
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX=/tmp/pycache
python3 -m pip install -q --no-index --no-deps --no-cache-dir --upgrade --target /tmp/site "${WHEELS:-.whl}"/*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation . >/dev/null 2>&1 || { echo "project install failed"; exit 1; }
# The image's own packages came without bytecode and were never read on a fresh machine, where a user's `pip install`
# compiles what it installs and leaves the files it wrote in the page cache: the packages a main job imports are
# compiled and read once here, as that install would leave them (timed apart from the runs: the install's share).
# A job that times no first run (PREPARE=0) skips it.
if [ "${PREPARE:-1}" = 1 ]; then
prepare_start=$SECONDS
packages=$(python3 benchmarks/imported_packages.py /tmp/site 2>>"$OUT/install.txt")
[ -n "$packages" ] || { echo "install: benchmarks/imported_packages.py named no package" | tee -a "$OUT/install.txt"; exit 1; }
python3 -m compileall -q -j 0 $packages >/dev/null 2>&1
find $packages -type f -print0 | xargs -0 cat > /dev/null
echo "install: the image's packages a main job imports ($(du -sch $packages | tail -1 | cut -f1)) compiled and read in $((SECONDS - prepare_start)) s" | tee -a "$OUT/install.txt"
fi
run() { echo "== trt-inspect $*"; trt-inspect "$@" </dev/null; echo "rc=$?"; }
