# Sourced by the benchmarks/h200_*.sh scripts on the lent H200 (no network there): installs the
# wheels carried in .whl and this project, and defines `run`, which echoes a trt-inspect command
# and its exit code. The wheel list and how to fetch them: the device tool's README.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONPATH=/tmp/site TRT_INSPECT_HOME=/tmp/tih PYTHONUNBUFFERED=1
# The image sets PYTHONDONTWRITEBYTECODE=1 and ships torch without bytecode, so every run would compile
# torch, timm and transformers afresh; a user's Python caches bytecode: the first run here compiles what
# it imports (a fresh install at its slowest), later runs reuse it. pip compiles what it installs.
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX=/tmp/pycache
python3 -m pip install -q --no-index --no-deps --no-cache-dir --upgrade --target /tmp/site "${WHEELS:-.whl}"/*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation . >/dev/null 2>&1 || { echo "project install failed"; exit 1; }
# The image's own packages (torch, timm, transformers, numpy) came without bytecode; `pip install` compiles what it
# installs, so compile them as a user's install would have (timed apart from the runs: the install's share).
compile_start=$SECONDS
python3 -m compileall -q -j 0 $(python3 -c "import importlib.util as u, os
print(' '.join(os.path.dirname(u.find_spec(n).origin) for n in ('torch', 'timm', 'transformers', 'numpy')))") >/dev/null 2>&1
echo "install: bytecode of the image's torch, timm, transformers, numpy compiled in $((SECONDS - compile_start)) s"
run() { echo "== trt-inspect $*"; trt-inspect "$@" </dev/null; echo "rc=$?"; }
